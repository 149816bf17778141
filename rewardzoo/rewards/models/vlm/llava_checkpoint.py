"""Original LLaVA-NeXT (LLaVA-OneVision) checkpoints as transformers' ``LlavaOnevisionForConditionalGeneration``.

Checkpoints trained with the LLaVA-NeXT code (``LlavaQwenForCausalLM``: ``CodeGoat24/UnifiedReward-7b-v1.5``,
``lmms-lab/llava-onevision-qwen2-7b-ov``) are published in that code's layout: a Qwen2 ``config.json`` with
``mm_*`` keys naming the vision tower by hub id, weights under ``model.*`` / ``model.vision_tower.vision_tower.*``
/ ``model.mm_projector.{0,2}``, and a tokenizer without ``<image>``. transformers' conversion script for
llava-onevision (``convert_llava_onevision_weights_to_hf.py``) turns them into its layout; :func:`load_original`
does the same on load, in memory:

- config: the Qwen2 text config from the checkpoint's own keys, the SigLIP tower's config (read from
  ``mm_vision_tower`` when it is a directory, else the conversion script's so400m-patch14-384 constants) less
  its last layer (LLaVA-NeXT drops it and reads the last remaining hidden state: ``vision_feature_layer -1``,
  strategy ``full``), ``image_aspect_ratio`` / ``image_grid_pinpoints`` carried over;
- weights: :func:`map_key` (the script's renames, then transformers' current module names);
- processor: the checkpoint's tokenizer with ``<image>`` / ``<video>`` added (as the script does), a
  ``LlavaOnevisionImageProcessor`` with the tower's preprocessing (SigLIP: 384x384 bicubic, mean = std = 0.5)
  and the grid pinpoints, and :data:`LLAVA_QWEN_CHAT_TEMPLATE`, LLaVA-NeXT's ``qwen_1_5`` conversation.

Only ``mm_projector_type: mlp2x_gelu``, ``mm_patch_merge_type: spatial_unpad`` and SigLIP towers (what
LLaVA-OneVision uses) are accepted; anything else is a ConfigError naming the key. Imports torch and
transformers only inside the loader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ....errors import ConfigError
from ....shared.weights import loading, model_folder

#: ``model_type`` values LLaVA-NeXT writes (with ``mm_vision_tower`` beside them).
ORIGINAL_MODEL_TYPES = ("llava", "llava_qwen")
#: LLaVA-NeXT's ``conv_qwen_1_5`` (ChatML, default system "You are a helpful assistant."), each image part
#: as ``<image>\n`` where it stands (the placement of ``DEFAULT_IMAGE_TOKEN + "\n"`` in its prompts).
LLAVA_QWEN_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' %}"
    "<image>\n{% elif content['type'] == 'video' %}<video>\n{% else %}{{ content['text'] }}{% endif %}{% endfor %}"
    "{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: The SigLIP tower LLaVA-OneVision is trained with, as the conversion script configures it (last layer dropped).
SIGLIP_SO400M = "google/siglip-so400m-patch14-384"
SIGLIP_SO400M_CONFIG = {
    "hidden_size": 1152,
    "image_size": 384,
    "intermediate_size": 4304,
    "num_attention_heads": 16,
    "num_hidden_layers": 27,
    "patch_size": 14,
}
#: SigLIP's preprocessing (its ``preprocessor_config.json``).
SIGLIP_PREPROCESS = {
    "size": {"height": 384, "width": 384},
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 3,
    "rescale_factor": 1 / 255,
}
#: Original key prefix -> transformers' (``LlavaOnevisionForConditionalGeneration``), first match wins.
KEY_MAP = (
    ("model.vision_tower.vision_tower.vision_model.", "model.vision_tower."),
    ("model.mm_projector.0.", "model.multi_modal_projector.linear_1."),
    ("model.mm_projector.2.", "model.multi_modal_projector.linear_2."),
    ("model.image_newline", "model.image_newline"),
    ("model.", "model.language_model."),
    ("lm_head.", "lm_head."),
)


def map_key(key: str) -> str | None:
    """The transformers name of an original weight (None for the rotary ``inv_freq`` buffers, not weights)."""
    if key.endswith(".inv_freq"):
        return None
    for old, new in KEY_MAP:
        if key.startswith(old):
            return new + key[len(old) :]
    raise ConfigError(
        f"the LLaVA checkpoint has the weight '{key}', which no LLaVA-OneVision module holds", field="model_path"
    )


def is_original(config: Mapping[str, Any]) -> bool:
    """Whether a ``config.json`` is LLaVA-NeXT's (a ``llava`` / ``llava_qwen`` type naming ``mm_vision_tower``)."""
    return config.get("model_type") in ORIGINAL_MODEL_TYPES and "mm_vision_tower" in config


def read_config(source: str) -> dict | None:
    """``config.json`` of a local directory or a cached hub id as a dict (None where it cannot be read)."""
    try:
        from transformers.utils import cached_file

        path = cached_file(source, "config.json")
        return json.loads(Path(path).read_text(encoding="utf-8")) if path else None
    except Exception:
        return None


def _tower(original: Mapping[str, Any], root: Path) -> tuple[dict, dict]:
    """(SigLIP vision config as the checkpoint holds it, its preprocessing) of ``mm_vision_tower``."""
    tower = str(original["mm_vision_tower"])
    if "siglip" not in tower.lower():
        raise ConfigError(
            f"mm_vision_tower '{tower}': only SigLIP towers (LLaVA-OneVision's) are supported", field="model_path"
        )
    folder = next((p for p in (Path(tower), root / tower) if p.is_dir()), None)
    if folder is None:
        if tower != SIGLIP_SO400M:
            raise ConfigError(
                f"mm_vision_tower '{tower}' is neither a directory nor {SIGLIP_SO400M}", field="model_path"
            )
        return dict(SIGLIP_SO400M_CONFIG), dict(SIGLIP_PREPROCESS)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config = config.get("vision_config", config)
    preprocess = json.loads((folder / "preprocessor_config.json").read_text(encoding="utf-8"))
    keys = ("size", "image_mean", "image_std", "resample", "rescale_factor")
    return config, {k: preprocess[k] for k in keys if k in preprocess}


def _check(original: Mapping[str, Any]) -> None:
    for key, wanted in (("mm_projector_type", "mlp2x_gelu"), ("mm_patch_merge_type", "spatial_unpad")):
        if original.get(key, wanted) != wanted:
            raise ConfigError(
                f"the LLaVA checkpoint has {key}: {original.get(key)!r}; LLaVA-OneVision's is "
                f"{wanted!r} (the only one supported)",
                field="model_path",
            )
    aspect = str(original.get("image_aspect_ratio", "anyres_max_9"))
    if not re.fullmatch(r"anyres_max_\d+", aspect):
        raise ConfigError(
            f"the LLaVA checkpoint has image_aspect_ratio: {aspect!r}; supported: anyres_max_N", field="model_path"
        )


def build_config(
    original: Mapping[str, Any], tower: Mapping[str, Any], *, image_token_id: int, video_token_id: int
) -> Any:
    """The ``LlavaOnevisionConfig`` of an original checkpoint (module docstring)."""
    from transformers import LlavaOnevisionConfig, Qwen2Config, SiglipVisionConfig

    own = set(Qwen2Config().to_dict())
    text = Qwen2Config(
        **{
            k: v
            for k, v in original.items()
            if k in own and k not in ("model_type", "architectures", "transformers_version")
        }
    )
    vision = {
        k: v
        for k, v in tower.items()
        if k in set(SiglipVisionConfig().to_dict()) and k not in ("model_type", "architectures", "transformers_version")
    }
    vision = SiglipVisionConfig(
        **{**vision, "num_hidden_layers": int(vision["num_hidden_layers"]) - 1, "vision_use_head": False}
    )
    return LlavaOnevisionConfig(
        text_config=text,
        vision_config=vision,
        image_token_index=image_token_id,
        video_token_index=video_token_id,
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
        vision_aspect_ratio=str(original.get("image_aspect_ratio", "anyres_max_9")),
        image_grid_pinpoints=original.get("image_grid_pinpoints"),
        tie_word_embeddings=bool(original.get("tie_word_embeddings", False)),
    )


def build_processor(
    root: Path, original: Mapping[str, Any], preprocess: Mapping[str, Any], *, num_image_tokens: int
) -> Any:
    """The ``LlavaOnevisionProcessor``: the checkpoint's tokenizer plus ``<image>`` / ``<video>``, SigLIP
    preprocessing with the grid pinpoints, and :data:`LLAVA_QWEN_CHAT_TEMPLATE`."""
    from transformers import AddedToken, AutoTokenizer, LlavaOnevisionImageProcessor, LlavaOnevisionProcessor
    from transformers.models.llava_onevision.video_processing_llava_onevision import LlavaOnevisionVideoProcessor

    with loading(f"the tokenizer of the LLaVA checkpoint '{root}'"):
        tokenizer = AutoTokenizer.from_pretrained(str(root))
    for token in ("<image>", "<video>"):
        if token not in tokenizer.get_vocab():
            tokenizer.add_tokens(AddedToken(token, special=True, normalized=False), special_tokens=True)
    pinpoints = original.get("image_grid_pinpoints")
    image = dict(preprocess, **({"image_grid_pinpoints": pinpoints} if pinpoints else {}))
    return LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(**image),
        video_processor=LlavaOnevisionVideoProcessor(**dict(preprocess)),
        tokenizer=tokenizer,
        num_image_tokens=num_image_tokens,
        vision_feature_select_strategy="full",
        vision_aspect_ratio=str(original.get("image_aspect_ratio", "anyres_max_9")),
        chat_template=LLAVA_QWEN_CHAT_TEMPLATE,
    )


def load_state_dict(root: Path) -> dict:
    """Every tensor of the checkpoint's safetensors files under its transformers name (:func:`map_key`);
    ``lm_head.weight`` cloned from the embeddings when the checkpoint ties them (the script does the same)."""
    from safetensors.torch import load_file

    files = sorted(root.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"the LLaVA checkpoint '{root}' has no .safetensors weights", field="model_path")
    state: dict = {}
    for path in files:
        for key, tensor in load_file(str(path)).items():
            name = map_key(key)
            if name is not None:
                state[name] = tensor
    if "lm_head.weight" not in state and "model.language_model.embed_tokens.weight" in state:
        state["lm_head.weight"] = state["model.language_model.embed_tokens.weight"].clone()
    return state


def load_original(
    source: str, original: Mapping[str, Any], *, dtype: Any, attn_implementation: str | None
) -> tuple[Any, Any]:
    """(model, processor) of an original LLaVA-NeXT checkpoint at ``source`` (a directory or a cached hub id);
    ConfigError naming ``model_path`` when a weight is missing, left over, or of another shape."""
    import torch
    from transformers import LlavaOnevisionForConditionalGeneration

    _check(original)
    root = model_folder(source, ["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja"])
    tower, preprocess = _tower(original, root)
    grid = int(tower["image_size"]) // int(tower["patch_size"])
    processor = build_processor(root, original, preprocess, num_image_tokens=grid * grid)
    tokenizer = processor.tokenizer
    config = build_config(
        original,
        tower,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<video>"),
    )
    with torch.device("meta"):  # names and shapes only
        expected = {k: tuple(v.shape) for k, v in LlavaOnevisionForConditionalGeneration(config).state_dict().items()}
    state = load_state_dict(root)
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(state) & set(expected) if tuple(state[k].shape) != expected[k])
    if missing or extra or wrong:
        raise ConfigError(
            f"the LLaVA checkpoint '{source}' does not fit LLaVA-OneVision: missing {missing[:5]}, "
            f"unexpected {extra[:5]}, other shapes {wrong[:5]}",
            field="model_path",
        )
    extra_kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
    model = LlavaOnevisionForConditionalGeneration.from_pretrained(
        None, config=config, state_dict=state, dtype=dtype, **extra_kwargs
    )
    return model, processor


__all__ = [
    "ORIGINAL_MODEL_TYPES",
    "LLAVA_QWEN_CHAT_TEMPLATE",
    "KEY_MAP",
    "map_key",
    "is_original",
    "read_config",
    "build_config",
    "build_processor",
    "load_state_dict",
    "load_original",
]
