"""Tiny vision-language models on disk: Qwen2-VL, Qwen2.5-VL and Qwen3-VL with a real processor over a tiny
byte-level BPE tokenizer, as hub ``save_pretrained`` directories.

They are what the VLM rewards of :mod:`rewardzoo.rewards.vlm` (VQAScore, UnifiedReward, HPSv3, VideoAlign, the
generic judge) load as ``model_path``; the configs and processors also build the HPSv3 / VideoAlign heads in
tests, and :func:`tiny_edit_reward_dirs` writes an EditReward checkpoint in its published layout. Imports: the standard library and :mod:`.common` at module level; torch, tokenizers and transformers
inside the builders.
"""

from __future__ import annotations

from pathlib import Path

from .common import made_dir, save_safetensors

#: The Qwen special tokens the processors and chat templates use, in id order (ids 0..7).
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
#: The Qwen2-VL / Qwen2.5-VL chat template, shortened (no tool calls, no numbered images): ChatML turns, a default
#: system prompt, each image as ``<|vision_start|><|image_pad|><|vision_end|>`` and each video with ``<|video_pad|>``.
QWEN2_VL_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n{% else %}"
    "{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'video' or 'video' in content %}"
    "<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: Qwen3-VL's template has no default system prompt (its processor adds the frame timestamps of videos).
QWEN3_VL_CHAT_TEMPLATE = QWEN2_VL_CHAT_TEMPLATE.replace(
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}",
    "",
)
#: Text the tiny byte-level BPE is trained on, so prompt words, answers and numbers are short token sequences.
VLM_CORPUS = (
    'Does this figure show "a cat on a mat"? Please answer Yes or No. Yes No yes no',
    "You are a helpful assistant. system user assistant image video frame",
    "Final Score: 3.5 Image 1 is better Image 2 is better score 0 1 2 3 4 5 6 7 8 9 . , : ; ! ?",
    "<think> reasoning </think> <answer> </answer> Alignment Coherence Style prompt photo of a dog",
)
VLM_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")


def tiny_vlm_tokenizer(vocab_size: int = 400):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with the Qwen special tokens (ids 0-7), trained offline.

    Trained on :data:`VLM_CORPUS` repeated (deterministic: the BPE trainer breaks ties by order), with
    pad ``<|endoftext|>`` and eos ``<|im_end|>`` as Qwen's. Any text encodes (byte fallback).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(QWEN_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(VLM_CORPUS) * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": list(QWEN_SPECIAL_TOKENS[1:])})
    return fast


def tiny_vlm_config(
    family: str = "qwen2_vl",
    *,
    vocab_size: int,
    max_position_embeddings: int = 4096,
    initializer_range: float = 0.2,
    text: dict | None = None,
    vision: dict | None = None,
):
    """A tiny ``Qwen2VLConfig`` / ``Qwen2_5_VLConfig`` / ``Qwen3VLConfig`` over :func:`tiny_vlm_tokenizer` ids.

    Text: width 32, 2 layers, 4 heads (2 key/value), head dim 8 with M-RoPE sections (1, 1, 2); vision:
    width 32, 1 block (Qwen2.5-VL: 2, one windowed), patch 14 (Qwen3-VL: 16), merge 2, temporal patch 2.
    ``initializer_range`` 0.2 (not 0.02) so the random model's next-token distribution is far from uniform
    and scores differ between inputs. ``text`` / ``vision`` override text- and vision-config fields (e.g. a
    larger model for a memory benchmark; keep M-RoPE sections summing to head_dim / 2, and the vision output
    width, ``hidden_size`` for Qwen2-VL or ``out_hidden_size`` otherwise, equal to the text width).
    """
    ids = {t: i for i, t in enumerate(QWEN_SPECIAL_TOKENS)}
    text_overrides, vision_overrides = dict(text or {}), dict(vision or {})
    text = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        initializer_range=initializer_range,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [1, 1, 2]},
    )
    special = dict(
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    if family == "qwen2_vl":
        from transformers import Qwen2VLConfig

        vision = dict(
            depth=1,
            embed_dim=32,
            hidden_size=32,
            num_heads=2,
            mlp_ratio=2,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            initializer_range=initializer_range,
        )
        return Qwen2VLConfig(
            text_config={**text, **text_overrides}, vision_config={**vision, **vision_overrides}, **special
        )
    if family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig

        vision = dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=32,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            window_size=56,
            fullatt_block_indexes=[1],
            initializer_range=initializer_range,
        )
        return Qwen2_5_VLConfig(
            text_config={**text, **text_overrides}, vision_config={**vision, **vision_overrides}, **special
        )
    if family == "qwen3_vl":
        from transformers import Qwen3VLConfig

        text = dict(
            text,
            head_dim=8,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [1, 1, 2],
                "mrope_interleaved": True,
            },
        )
        vision = dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=32,
            patch_size=16,
            spatial_merge_size=2,
            temporal_patch_size=2,
            num_position_embeddings=64,
            deepstack_visual_indexes=[0],
            initializer_range=initializer_range,
        )
        return Qwen3VLConfig(
            text_config={**text, **text_overrides}, vision_config={**vision, **vision_overrides}, **special
        )
    raise ValueError(f"family must be one of {VLM_FAMILIES}, got {family!r}")


def tiny_vlm_processor(
    family: str = "qwen2_vl", *, tokenizer=None, min_pixels: int = 28 * 28, max_pixels: int = 112 * 112
):
    """The family's real processor (``Qwen2VLProcessor`` / ``Qwen2_5_VLProcessor`` / ``Qwen3VLProcessor``) over
    :func:`tiny_vlm_tokenizer`, with pixel bounds small enough for a CPU test (images resized to at most
    ``max_pixels``) and the family's chat template (:data:`QWEN2_VL_CHAT_TEMPLATE` / :data:`QWEN3_VL_CHAT_TEMPLATE`)."""
    from transformers import Qwen2VLImageProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    tokenizer = tiny_vlm_tokenizer() if tokenizer is None else tokenizer
    if family == "qwen3_vl":
        from transformers import Qwen3VLProcessor
        from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

        size = {"shortest_edge": min_pixels, "longest_edge": max_pixels}
        return Qwen3VLProcessor(
            image_processor=Qwen2VLImageProcessor(size=size, patch_size=16),
            video_processor=Qwen3VLVideoProcessor(size=size, patch_size=16),
            tokenizer=tokenizer,
            chat_template=QWEN3_VL_CHAT_TEMPLATE,
        )
    if family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLProcessor as Processor
    elif family == "qwen2_vl":
        from transformers import Qwen2VLProcessor as Processor
    else:
        raise ValueError(f"family must be one of {VLM_FAMILIES}, got {family!r}")
    return Processor(
        image_processor=Qwen2VLImageProcessor(min_pixels=min_pixels, max_pixels=max_pixels),
        video_processor=Qwen2VLVideoProcessor(min_pixels=min_pixels, max_pixels=max_pixels),
        tokenizer=tokenizer,
        chat_template=QWEN2_VL_CHAT_TEMPLATE,
    )


def tiny_vlm_dir(
    path, family: str = "qwen2_vl", *, seed: int = 0, max_position_embeddings: int = 4096, config=None, processor=None
) -> Path:
    """Write a random-init Qwen-VL ``...ForConditionalGeneration`` and its processor with ``save_pretrained``.

    The directory is what ``AutoModelForImageTextToText`` / ``AutoProcessor.from_pretrained`` (and so
    :func:`rewardzoo.rewards.models.vlm.backbone.load_vlm`, and every VLM reward's ``model_path``) read, as a hub checkpoint.
    ``torch.manual_seed(seed)`` is called right before the model is built from ``config`` (default
    :func:`tiny_vlm_config`), so equal seeds give equal weights. Returns the directory.
    """
    import torch
    from transformers import AutoModelForImageTextToText

    processor = tiny_vlm_processor(family) if processor is None else processor
    config = (
        tiny_vlm_config(family, vocab_size=len(processor.tokenizer), max_position_embeddings=max_position_embeddings)
        if config is None
        else config
    )
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config)
    path = made_dir(path)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


#: EditReward's checkpoint keys of its two heads (``rm_heads.head_{0,1}``: Linear, ReLU, Dropout, Linear, ReLU,
#: Linear, so the linears are entries 0, 3 and 5), and the head widths of its default ``ranknet`` head.
EDIT_REWARD_HEADS = ("head_0", "head_1")
EDIT_REWARD_HEAD_WIDTHS = (1024, 16)


def tiny_edit_reward_dirs(
    path,
    *,
    seed: int = 0,
    min_pixels: int = 56 * 56,
    max_pixels: int = 28 * 28 * 1280,
    text: dict | None = None,
    vision: dict | None = None,
):
    """(base directory, checkpoint directory) of a tiny EditReward in its published layout.

    The base is a Qwen2.5-VL "base model" directory (config, tokenizer, chat template, image processor; no
    weights). The checkpoint directory holds ``model.safetensors``: the state dict of EditReward's
    ``Qwen2_5_VLRewardModelBT_MultiHead`` as transformers 4.57 names it (``model.visual.*``,
    ``model.language_model.*``, ``lm_head.weight``) with the embeddings resized to the tokenizer plus
    ``<|Reward|>``, and ``rm_heads.head_{0,1}.{0,3,5}.{weight,bias}`` (two heads of ``Linear(d, 1024)``,
    ``Linear(1024, 16)``, ``Linear(16, 2)``). ``torch.manual_seed(seed)`` is called before the model, then the
    heads are built. ``text`` / ``vision``: config overrides (a larger model for a benchmark).
    """
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    root = made_dir(path)
    processor = tiny_vlm_processor("qwen2_5_vl", min_pixels=min_pixels, max_pixels=max_pixels)
    config = tiny_vlm_config("qwen2_5_vl", vocab_size=len(processor.tokenizer), text=text, vision=vision)
    base = made_dir(root / "base")
    processor.save_pretrained(base)
    config.save_pretrained(base)
    processor.tokenizer.add_special_tokens({"additional_special_tokens": ["<|Reward|>"]})
    config.text_config.vocab_size = len(processor.tokenizer)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    state = dict(model.state_dict())
    width = config.text_config.hidden_size
    h1, h2 = EDIT_REWARD_HEAD_WIDTHS
    for name in EDIT_REWARD_HEADS:
        head = torch.nn.Sequential(
            torch.nn.Linear(width, h1),
            torch.nn.ReLU(),
            torch.nn.Dropout(0.05),
            torch.nn.Linear(h1, h2),
            torch.nn.ReLU(),
            torch.nn.Linear(h2, 2),
        )
        state.update({f"rm_heads.{name}.{k}": v for k, v in head.state_dict().items()})
    checkpoint = made_dir(root / "checkpoint")
    save_safetensors({k: v.clone() for k, v in state.items()}, checkpoint / "model.safetensors")
    return base, checkpoint
