"""Real-sized Qwen-VL pieces for the scale check: the published configurations, a tokenizer of the real size and
the processor, and sparse ("header-only") sharded safetensors for the 7B judges.

Configurations are the published ``config.json`` numbers (Qwen/Qwen2-VL-2B-Instruct, Qwen/Qwen2.5-VL-3B-Instruct,
Qwen/Qwen2-VL-7B-Instruct, Qwen/Qwen2.5-VL-7B-Instruct). The tokenizer is a byte-level BPE trained on English prompt
text (so prompts tokenize to about the real number of tokens), padded with unreachable filler entries to Qwen's
151,643 regular tokens, then Qwen's 22 special tokens at their real ids (151643..151664): ``len(tokenizer)`` and
the embedding rows are the real ones. No weights are downloaded.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

#: Qwen2 / Qwen2.5's special tokens in id order, from 151643.
QWEN_SPECIALS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
)  # fmt: skip
QWEN_REGULAR = 151643

#: English text the BPE is trained on (plus the reward prompts given to :func:`qwen_tokenizer`).
CORPUS = (
    "You are a helpful assistant. Please evaluate the image and the caption. Alignment Score (1-5): 3 "
    "Coherence Score (1-5): 4 Style Score (1-5): 2. The video shows a cat walking on a wooden table in the sun, "
    "a dog running through a field of flowers, a city street at night with cars and people. Visual quality, "
    "motion quality, text alignment, reasonableness, clarity, detail richness, aesthetic and creativity."
)


def qwen2_vl_2b() -> dict[str, Any]:
    """Qwen/Qwen2-VL-2B-Instruct's config.json (architecture fields)."""
    return dict(
        model_type="qwen2_vl",
        text_config=dict(
            hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
            num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-6, vocab_size=151936,
            tie_word_embeddings=True, hidden_act="silu",
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]},
        ),
        vision_config=dict(
            depth=32, embed_dim=1280, hidden_size=1536, mlp_ratio=4, num_heads=16, in_chans=3, patch_size=14,
            spatial_merge_size=2, temporal_patch_size=2,
        ),
        tie_word_embeddings=True,
    )  # fmt: skip


def qwen2_vl_7b() -> dict[str, Any]:
    """Qwen/Qwen2-VL-7B-Instruct's config.json (HPSv3's base)."""
    cfg = qwen2_vl_2b()
    cfg["text_config"].update(
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False,
    )  # fmt: skip
    cfg["vision_config"].update(hidden_size=3584)
    cfg["tie_word_embeddings"] = False
    return cfg


def qwen2_5_vl_3b() -> dict[str, Any]:
    """Qwen/Qwen2.5-VL-3B-Instruct's config.json (UnifiedReward-qwen-3b's base)."""
    return dict(
        model_type="qwen2_5_vl",
        text_config=dict(
            hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
            num_key_value_heads=2, max_position_embeddings=128000, rms_norm_eps=1e-6, vocab_size=151936,
            tie_word_embeddings=True, hidden_act="silu",
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]},
        ),
        vision_config=dict(
            depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, in_chans=3, out_hidden_size=2048,
            patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
            fullatt_block_indexes=[7, 15, 23, 31], hidden_act="silu",
        ),
        tie_word_embeddings=True,
    )  # fmt: skip


def qwen2_5_vl_7b() -> dict[str, Any]:
    """Qwen/Qwen2.5-VL-7B-Instruct's config.json (UnifiedReward-qwen-7b's, VideoScore2's base)."""
    cfg = qwen2_5_vl_3b()
    cfg["text_config"].update(
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False,
    )  # fmt: skip
    cfg["vision_config"].update(out_hidden_size=3584)
    cfg["tie_word_embeddings"] = False
    return cfg


def qwen2_5_vl_72b() -> dict[str, Any]:
    """Qwen/Qwen2.5-VL-72B-Instruct's config.json (UnifiedReward-qwen-72b's base)."""
    cfg = qwen2_5_vl_3b()
    cfg["text_config"].update(
        hidden_size=8192, intermediate_size=29568, num_hidden_layers=80, num_attention_heads=64,
        num_key_value_heads=8, vocab_size=152064, tie_word_embeddings=False,
    )  # fmt: skip
    cfg["vision_config"].update(out_hidden_size=8192)
    cfg["tie_word_embeddings"] = False
    return cfg


def hf_config(spec: dict[str, Any]) -> Any:
    """The transformers config object of a spec above, with Qwen's special token ids."""
    from transformers import Qwen2_5_VLConfig, Qwen2VLConfig

    ids = {t: QWEN_REGULAR + i for i, t in enumerate(QWEN_SPECIALS)}
    text = dict(
        spec["text_config"],
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    cls = {"qwen2_vl": Qwen2VLConfig, "qwen2_5_vl": Qwen2_5_VLConfig}[spec["model_type"]]
    return cls(
        text_config=text,
        vision_config=spec["vision_config"],
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=spec["tie_word_embeddings"],
    )


def qwen_tokenizer(extra_text: tuple[str, ...] = ()) -> Any:
    """A ``PreTrainedTokenizerFast`` of Qwen2's size (151,665 tokens) with the special tokens at their ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    trained = Tokenizer(models.BPE())
    trained.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=4000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    trained.train_from_iterator([CORPUS, *extra_text] * 4, trainer)
    state = json.loads(trained.to_str())["model"]
    vocab: dict[str, int] = dict(state["vocab"])
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    for i in range(len(vocab), QWEN_REGULAR):  # unreachable fillers: the real embedding rows, never produced
        vocab[f"<filler{i}>"] = i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.add_special_tokens({"additional_special_tokens": list(QWEN_SPECIALS)})  # in id order
    fast.add_special_tokens({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
    ids = fast.convert_tokens_to_ids(list(QWEN_SPECIALS))
    assert ids == list(range(QWEN_REGULAR, QWEN_REGULAR + len(QWEN_SPECIALS))), ids[:3]
    return fast


def qwen_processor(family: str, tokenizer: Any) -> Any:
    """The family's processor with the released pixel bounds (3136 .. 12,845,056) and the Qwen2-VL chat template."""
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    from rewardzoo.testing.vlm import QWEN2_VL_CHAT_TEMPLATE

    cls = {"qwen2_vl": Qwen2VLProcessor, "qwen2_5_vl": Qwen2_5_VLProcessor}[family]
    bounds = dict(min_pixels=3136, max_pixels=12845056)
    return cls(
        image_processor=Qwen2VLImageProcessor(**bounds),
        video_processor=Qwen2VLVideoProcessor(**bounds),
        tokenizer=tokenizer,
        chat_template=QWEN2_VL_CHAT_TEMPLATE,
    )


_ST_DTYPES = {"torch.bfloat16": "BF16", "torch.float16": "F16", "torch.float32": "F32", "torch.int64": "I64"}


def sparse_safetensors(
    model: Any,
    directory: Path,
    *,
    shard_bytes: int = 5 * 10**9,
    single: str | None = None,
    rename: Any = None,
    extra: dict[str, tuple[str, list[int]]] | None = None,
) -> list[Path]:
    """Write ``model``'s state dict (a meta-device model is fine) as sharded safetensors whose headers are real and
    whose data are holes (``truncate`` to the full size: no disk blocks), plus ``model.safetensors.index.json``.

    What ``rewardzoo plan`` and any header reader see is the published layout at full size; reading the data would
    give zeros. Tied parameters are written once (the first name), as ``save_pretrained`` does. ``single``: one
    file of that name, no index; ``rename``: a function applied to each key; ``extra``: more tensors
    (``name -> (torch dtype string, shape)``)."""
    directory.mkdir(parents=True, exist_ok=True)
    tied = {n for n, _ in model.named_parameters(remove_duplicate=False)} - {n for n, _ in model.named_parameters()}
    items = [
        (name, str(t.dtype), list(t.shape), t.numel() * t.element_size())
        for name, t in model.state_dict().items()
        if name not in tied
    ]
    if rename is not None:
        items = [(rename(n), *rest) for n, *rest in items]
    for name, (dtype, shape) in (extra or {}).items():
        size = {"torch.float32": 4, "torch.bfloat16": 2, "torch.float16": 2}[dtype]
        for dim in shape:
            size *= dim
        items.append((name, dtype, list(shape), size))
    if single is not None:
        shard_bytes = 1 << 62
    shards: list[list[tuple]] = [[]]
    size = 0
    for item in items:
        if shards[-1] and size + item[3] > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(item)
        size += item[3]
    weight_map, paths, total = {}, [], 0
    for i, shard in enumerate(shards, 1):
        fname = single or f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
        offset = 0
        for name, dtype, shape, nbytes in shard:
            header[name] = {"dtype": _ST_DTYPES[dtype], "shape": shape, "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
            weight_map[name] = fname
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        path = directory / fname
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
            f.truncate(8 + len(raw) + offset)
        paths.append(path)
        total += offset
    if single is None:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return paths
