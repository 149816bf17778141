"""A tiny LLaVA-OneVision on disk, in transformers' layout and in the original LLaVA-NeXT layout
(``CodeGoat24/UnifiedReward-7b-v1.5`` is published in the latter).

Both directories hold the same random weights (Qwen2 text model, SigLIP tower, two-layer projector, image
newline) and the same byte-level BPE as :mod:`rewardzoo.testing.vlm`:

- ``transformers``: ``LlavaOnevisionForConditionalGeneration.save_pretrained`` with a ``LlavaOnevisionProcessor``
  (``<image>`` / ``<video>`` added to the tokenizer, LLaVA-NeXT's ChatML chat template);
- ``llava``: what LLaVA-NeXT's trainer writes: a Qwen2 ``config.json`` with the ``mm_*`` keys
  (``model_type: llava``), weights named as LLaVA-NeXT's modules are (:data:`LLAVA_NAMES`), the tokenizer
  without ``<image>``, and the SigLIP tower's ``config.json`` / ``preprocessor_config.json`` in ``siglip/``
  (named by ``mm_vision_tower``; its config counts the layer LLaVA-NeXT drops).

Imports: the standard library, :mod:`.common` and the loader's chat template at module level; torch and
transformers inside the builders.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..rewards.models.vlm import llava_checkpoint
from .common import made_dir

#: Tiny tile grid (SigLIP image size 28, patch 14: 2x2 patches = 4 tokens per tile).
TINY_PINPOINTS = [[28, 28], [28, 56], [56, 28], [56, 56], [56, 84], [84, 56], [84, 84]]
#: transformers' module prefix -> LLaVA-NeXT's (``LlavaQwenForCausalLM``: ``model`` is the Qwen2 model holding
#: ``vision_tower.vision_tower`` (the SigLIP wrapper) and ``mm_projector`` (``Sequential(Linear, GELU, Linear)``)).
LLAVA_NAMES = (
    ("model.vision_tower.", "model.vision_tower.vision_tower.vision_model."),
    ("model.multi_modal_projector.linear_1.", "model.mm_projector.0."),
    ("model.multi_modal_projector.linear_2.", "model.mm_projector.2."),
    ("model.image_newline", "model.image_newline"),
    ("model.language_model.", "model."),
    ("lm_head.", "lm_head."),
)
_SIGLIP_PREPROCESS = {
    "size": {"height": 28, "width": 28},
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 3,
    "rescale_factor": 1 / 255,
}


def tiny_llava_onevision_config(
    *, vocab_size: int, image_token_id: int, video_token_id: int, initializer_range: float = 0.2
):
    """A tiny ``LlavaOnevisionConfig``: Qwen2 text (width 32, 2 layers, 4 heads / 2 key-value), SigLIP tower
    (width 32, 1 layer, image 28, patch 14, no head), ``anyres_max_9`` on :data:`TINY_PINPOINTS`."""
    from transformers import LlavaOnevisionConfig, Qwen2Config, SiglipVisionConfig

    text = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        initializer_range=initializer_range,
        tie_word_embeddings=False,
    )
    vision = SiglipVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=28,
        patch_size=14,
        vision_use_head=False,
    )
    return LlavaOnevisionConfig(
        text_config=text,
        vision_config=vision,
        image_token_index=image_token_id,
        video_token_index=video_token_id,
        image_grid_pinpoints=TINY_PINPOINTS,
        vision_aspect_ratio="anyres_max_9",
        initializer_range=initializer_range,
    )


def tiny_llava_onevision_processor(tokenizer=None):
    """The real ``LlavaOnevisionProcessor`` over the tiny BPE with ``<image>`` / ``<video>`` added (as
    transformers' conversion script adds them), SigLIP preprocessing at 28x28 and LLaVA-NeXT's ChatML chat template
    (:data:`~rewardzoo.rewards.models.vlm.llava_checkpoint.LLAVA_QWEN_CHAT_TEMPLATE`)."""
    from transformers import AddedToken, LlavaOnevisionImageProcessor, LlavaOnevisionProcessor
    from transformers.models.llava_onevision.video_processing_llava_onevision import LlavaOnevisionVideoProcessor

    from .vlm import tiny_vlm_tokenizer

    tokenizer = tiny_vlm_tokenizer() if tokenizer is None else tokenizer
    for token in ("<image>", "<video>"):
        tokenizer.add_tokens(AddedToken(token, special=True, normalized=False), special_tokens=True)
    return LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(**_SIGLIP_PREPROCESS, image_grid_pinpoints=TINY_PINPOINTS),
        video_processor=LlavaOnevisionVideoProcessor(**_SIGLIP_PREPROCESS),
        tokenizer=tokenizer,
        num_image_tokens=4,
        vision_feature_select_strategy="full",
        chat_template=llava_checkpoint.LLAVA_QWEN_CHAT_TEMPLATE,
    )


def llava_name(key: str) -> str:
    """The LLaVA-NeXT name of a transformers ``LlavaOnevisionForConditionalGeneration`` weight."""
    for new, old in LLAVA_NAMES:
        if key.startswith(new):
            return old + key[len(new) :]
    raise KeyError(key)


def tiny_llava_onevision_dirs(root, *, seed: int = 0) -> dict[str, Path]:
    """``{"transformers": dir, "llava": dir}`` under ``root``: one random-init tiny LLaVA-OneVision
    (``torch.manual_seed(seed)`` right before it is built) saved in both layouts (module docstring)."""
    import torch
    from safetensors.torch import save_file
    from transformers import LlavaOnevisionForConditionalGeneration

    from .vlm import tiny_vlm_tokenizer

    root = made_dir(root)
    processor = tiny_llava_onevision_processor()
    tok = processor.tokenizer
    image_id, video_id = tok.convert_tokens_to_ids("<image>"), tok.convert_tokens_to_ids("<video>")
    vocab = (len(tok) + 15) // 16 * 16  # room past the tokenizer, as Qwen's embeddings have
    config = tiny_llava_onevision_config(vocab_size=vocab, image_token_id=image_id, video_token_id=video_id)
    torch.manual_seed(seed)
    model = LlavaOnevisionForConditionalGeneration(config).eval()
    hf = made_dir(root / "transformers")
    model.save_pretrained(hf)
    processor.save_pretrained(hf)

    llava = made_dir(root / "llava")
    tower = made_dir(llava / "siglip")
    vision = config.vision_config.to_dict()
    vision["num_hidden_layers"] += 1  # the tower as published; LLaVA-NeXT drops its last layer
    (tower / "config.json").write_text(json.dumps({"model_type": "siglip_vision_model", **vision}), encoding="utf-8")
    (tower / "preprocessor_config.json").write_text(
        json.dumps({"image_processor_type": "SiglipImageProcessor", **_SIGLIP_PREPROCESS}), encoding="utf-8"
    )
    text = config.text_config.to_dict()
    original = {
        **text,
        "architectures": ["LlavaQwenForCausalLM"],
        "model_type": "llava",
        "mm_vision_tower": str(tower),
        "mm_projector_type": "mlp2x_gelu",
        "mm_hidden_size": vision["hidden_size"],
        "mm_vision_select_layer": -2,
        "mm_vision_select_feature": "patch",
        "mm_patch_merge_type": "spatial_unpad",
        "image_aspect_ratio": "anyres_max_9",
        "image_grid_pinpoints": TINY_PINPOINTS,
        "mm_use_im_start_end": False,
        "mm_use_im_patch_token": False,
        "tokenizer_padding_side": "right",
    }
    (llava / "config.json").write_text(json.dumps(original), encoding="utf-8")
    state = {llava_name(k): v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(llava / "model.safetensors"))
    tiny_vlm_tokenizer().save_pretrained(llava)  # no <image>: LLaVA-NeXT splices the image at the text's <image>
    return {"transformers": hf, "llava": llava}
