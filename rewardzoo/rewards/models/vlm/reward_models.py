"""Reward checkpoints on Qwen-VL backbones (HPSv3, VideoAlign): published state dicts onto transformers 5.

The reward models of HPSv3 and VideoAlign subclass transformers 4.x ``Qwen2VLForConditionalGeneration``
and add a small head (``rm_head``); their checkpoints are that class's ``state_dict()`` saved with
``torch.save`` or safetensors, so the keys follow one of the two 4.x layouts (before 4.52: ``visual.*``,
``model.layers.*``; from 4.52: ``model.visual.*``, ``model.language_model.*``; both with ``lm_head.weight``,
``rm_head.*``), optionally inside a PEFT wrapper (``base_model.model.*`` with
``…base_layer.weight`` / ``…lora_A.default.weight`` / ``…lora_B.default.weight``).

Here the backbone is the bare transformers 5 ``Qwen2VLModel`` (``visual.*`` + ``language_model.*``, no
``lm_head``: a reward reads hidden states, not the vocabulary), built from the base model's config
without random initialisation (:func:`build_backbone`); :func:`unwrap_peft` merges LoRA into the base
weights (``W + scaling * B @ A``, what PEFT's forward adds at inference), or :func:`attach_lora` keeps it
unmerged under PEFT's own LoRA layers (the reference's arithmetic); :func:`load_backbone` maps the
published keys onto the backbone, checks that every key is accounted for and every shape fits, and
returns the head's tensors for the caller's own head.

Their inference code also bypasses transformers' multimodal RoPE: the subclass's ``forward`` embeds the
tokens itself and calls the decoder without ``position_ids`` (HPSv3's under the transformers >= 4.52 layout,
``self.model(input_ids=None, ...)`` with no image grid, where ``get_rope_index`` falls back to the attention
mask's running count), which numbers the tokens ``0 .. L-1`` in all three M-RoPE sections, image and video
tokens included. :func:`sequential_positions` gives those positions for a
left-padded batch. The media preprocessing is qwen-vl-utils' (as vendored by both repositories):
:func:`smart_resize`, :func:`resize_image` (PIL bicubic), :func:`video_frame_indices` (``smart_nframes`` +
uniform indices) and :func:`resize_frames` (torchvision bicubic with antialias on 8-bit frames).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ....errors import ConfigError, InputError
from ....shared.weights import load_state_dict, loading

#: qwen-vl-utils constants: the size factor (patch 14 x merge 2), the largest aspect ratio, 2 frames per
#: temporal patch, and the frame-count bounds of fps sampling.
FACTOR = 28
MAX_RATIO = 200
FRAME_FACTOR = 2
FPS_MIN_FRAMES = 4
FPS_MAX_FRAMES = 768

PEFT_PREFIX = _PEFT_PREFIX = "base_model.model."  # a PEFT model's state dict keys
_LORA = re.compile(r"^(?P<module>.+)\.lora_(?P<which>[AB])\.(?P<adapter>[^.]+)\.weight$")


def peft_parts(state: Mapping[str, Any], *, where: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A PEFT model's state dict split: (the plain model's tensors, ``base_model.model.`` dropped and each LoRA
    base layer under its module's own name; ``{module: {"A": lora_A, "B": lora_B}}``). A state dict without
    the PEFT prefix comes back unchanged with no LoRA. Several adapters, or a LoRA pair without its base
    weight, are a :class:`ConfigError`."""
    if not any(k.startswith(_PEFT_PREFIX) for k in state):
        return dict(state), {}
    plain: dict[str, Any] = {}
    lora: dict[str, dict[str, Any]] = {}
    adapters: set[str] = set()
    for key, value in state.items():
        key = key[len(_PEFT_PREFIX) :] if key.startswith(_PEFT_PREFIX) else key
        found = _LORA.match(key)
        if found:
            adapters.add(found["adapter"])
            lora.setdefault(found["module"], {})[found["which"]] = value
        else:
            plain[key.replace(".base_layer.", ".")] = value
    if len(adapters) > 1:
        raise ConfigError(
            f"'{where}' holds several LoRA adapters ({', '.join(sorted(adapters))}); one is expected",
            field="model_path",
        )
    for module, pair in lora.items():
        if set(pair) != {"A", "B"} or f"{module}.weight" not in plain:
            raise ConfigError(
                f"'{where}': LoRA weights of '{module}' are incomplete (need lora_A, lora_B and the "
                "base layer's weight)",
                field="model_path",
            )
    return plain, lora


def unwrap_peft(state: Mapping[str, Any], *, scaling: float | None, where: str) -> dict[str, Any]:
    """A PEFT model's state dict as the plain model's: ``base_model.model.`` dropped, LoRA merged.

    ``W_merged = W + scaling * (B @ A)`` in float32, cast back to ``W``'s dtype (``scaling`` =
    ``lora_alpha / r``, or ``lora_alpha / sqrt(r)`` with rsLoRA). A state dict without the PEFT prefix
    is returned unchanged; LoRA keys without a ``scaling`` are a :class:`ConfigError`.
    """
    plain, lora = peft_parts(state, where=where)
    if lora and scaling is None:
        raise ConfigError(
            f"'{where}' holds LoRA weights but no LoRA scaling is known (lora_alpha / r)", field="model_path"
        )
    for module, pair in lora.items():
        target = f"{module}.weight"
        base = plain[target]
        delta = pair["B"].float() @ pair["A"].float()
        if delta.shape != base.shape:
            raise ConfigError(
                f"'{where}': LoRA update of '{module}' has shape {tuple(delta.shape)}, its weight {tuple(base.shape)}",
                field="model_path",
            )
        plain[target] = (base.float() + scaling * delta).to(base.dtype)
    return plain


def attach_lora(
    model: Any, lora: Mapping[str, Mapping[str, Any]], *, r: int, alpha: float, rslora: bool, where: str
) -> None:
    """Keep a checkpoint's LoRA unmerged: PEFT's LoRA layers injected into ``model`` (a backbone loaded with
    the base weights) around the modules of ``lora`` (:func:`peft_parts`, checkpoint key names), holding its
    ``lora_A`` / ``lora_B``, so each forward adds ``scaling * B(A(x))`` as the reference's PEFT model does.
    The adapter weights are cast as PEFT's ``get_peft_model`` casts them (``autocast_adapter_dtype``:
    float32 beside bfloat16 / float16 base layers)."""
    try:
        from peft import LoraConfig, inject_adapter_in_model
        from peft.tuners.tuners_utils import cast_adapter_dtype
    except ImportError as exc:
        raise ConfigError(
            f"merge_lora: false keeps the LoRA under PEFT, which is not installed ({exc}); "
            "pip install peft, or merge it (merge_lora: true)",
            field="kwargs.merge_lora",
        ) from None
    import torch

    tensors = {f"{module}.lora_{which}.weight": w for module, pair in lora.items() for which, w in pair.items()}
    mapped, _, _ = split_legacy_qwen_vl(tensors)  # checkpoint names -> the backbone's
    modules = sorted({k.rsplit(".lora_", 1)[0] for k in mapped})
    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, use_rslora=rslora, target_modules=modules)
    inject_adapter_in_model(config, model, adapter_name="default")
    cast_adapter_dtype(model, adapter_name="default", autocast_adapter_dtype=True)
    expected = {k for k in model.state_dict() if ".lora_" in k}
    given = {k.replace(".weight", ".default.weight"): v for k, v in mapped.items()}
    if set(given) != expected:
        odd = sorted(set(given) ^ expected)
        raise ConfigError(
            f"'{where}': the LoRA weights do not fit the injected LoRA layers ({len(odd)} key(s) differ, "
            f"e.g. {odd[:3]})",
            field="model_path",
        )
    params = dict(model.named_parameters())
    with torch.no_grad():
        for key, value in given.items():
            if params[key].shape != value.shape:
                raise ConfigError(
                    f"'{where}': LoRA weight '{key}' has shape {tuple(value.shape)}, the layer "
                    f"{tuple(params[key].shape)} (lora_r {r})",
                    field="model_path",
                )
            params[key].copy_(value)
    model.eval().requires_grad_(False)


def split_legacy_qwen_vl(state: Mapping[str, Any], head_prefix: str = "rm_head.") -> tuple[dict, dict, set]:
    """(backbone tensors keyed for ``Qwen2VLModel``, head tensors keyed inside the head, dropped keys).

    Accepts the layout before transformers 4.52 (``visual.*``, ``model.*``, ``lm_head.weight``) and the one
    of ``…ForConditionalGeneration`` from 4.52 on, 5.x included (``model.visual.*``,
    ``model.language_model.*``, ``lm_head.weight``).
    ``lm_head.weight`` is dropped (returned in the third item so callers can check it was there).
    """
    backbone, head, dropped = {}, {}, set()
    for key, value in state.items():
        if key.startswith(head_prefix):
            head[key[len(head_prefix) :]] = value
        elif key == "lm_head.weight":
            dropped.add(key)
        elif key.startswith(("model.visual.", "model.language_model.")):
            backbone[key[len("model.") :]] = value
        elif key.startswith("visual."):
            backbone[key] = value
        elif key.startswith("model."):
            backbone["language_model." + key[len("model.") :]] = value
        else:
            backbone[key] = value  # reported as unexpected by load_backbone
    return backbone, head, dropped


def build_backbone(config: Any, *, dtype: Any, device: str, attn_implementation: str | None = None):
    """The bare vision-language backbone of ``config`` (``AutoModel``: ``Qwen2VLModel`` for ``qwen2_vl``),
    allocated on ``device`` in ``dtype`` without random initialisation (its weights come from a checkpoint).
    ``attn_implementation``: ``sdpa`` (default), ``eager`` or ``flash_attention_2``."""
    import torch
    import transformers
    from transformers import AutoModel

    if int(transformers.__version__.split(".")[0]) < 5:
        raise ConfigError(
            f"the Qwen-VL reward models need transformers >= 5 (its Qwen2VLModel holds the vision tower); "
            f"transformers {transformers.__version__} is installed",
            field="model_path",
        )
    from transformers.initialization import no_init_weights

    with no_init_weights(), torch.device(device):
        extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
        model = AutoModel.from_config(config, dtype=dtype, **extra)
    return model.eval().requires_grad_(False)


def load_backbone(model: Any, state: Mapping[str, Any], *, where: str, head_prefix: str = "rm_head.") -> dict:
    """Copy a published reward checkpoint's backbone tensors into ``model`` (built by :func:`build_backbone`).

    Strict: every backbone parameter and persistent buffer must be present with its shape, every key of
    the checkpoint must be used (``lm_head.weight`` may be present and is dropped). Returns the head's
    tensors (``head_prefix`` removed) for the caller to load into its head. Mismatches are a
    :class:`ConfigError` naming a few keys, not a partial load.
    """
    import torch

    backbone, head, _ = split_legacy_qwen_vl(state, head_prefix)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(backbone))
    unexpected = sorted(set(backbone) - set(expected))
    if missing or unexpected:
        raise ConfigError(
            f"'{where}' does not fit the backbone built from the base model's config: "
            f"{len(missing)} missing key(s) {missing[:4]}, {len(unexpected)} unexpected {unexpected[:4]} "
            "(is base_model the model the reward was trained on?)",
            field="model_path",
        )
    wrong = [(k, tuple(v.shape), tuple(expected[k].shape)) for k, v in backbone.items() if v.shape != expected[k].shape]
    if wrong:
        key, got, want = wrong[0]
        raise ConfigError(
            f"'{where}' does not fit the backbone: '{key}' has shape {got}, the base model's config "
            f"gives {want} ({len(wrong)} tensor(s) differ)",
            field="model_path",
        )
    with torch.no_grad():
        model.load_state_dict(backbone, strict=True)
    return head


def embedding_rows(state: Mapping[str, Any]) -> int | None:
    """Rows of the token embedding in a (4.x or 5.x layout) Qwen-VL state dict, None when absent."""
    for key in ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight"):
        if key in state:
            return int(state[key].shape[0])
    return None


def check_prompt_text(prompts: Any, tokenizer: Any, *, field: str = "prompt") -> list[str]:
    """The prompts as a list of non-empty strings that contain none of the tokenizer's added special tokens
    (a literal ``<|image_pad|>`` or reward token in a prompt would break the image or reward-token count);
    InputError naming the field and sample otherwise."""
    specials = [t for t in getattr(tokenizer, "added_tokens_encoder", {}) if t.startswith("<") and len(t) > 2]
    out = []
    for i, text in enumerate(prompts):
        if not isinstance(text, str):
            raise InputError(f"expected a text prompt, got {type(text).__name__}", field=field, sample=i)
        if not text.strip():
            raise InputError("the prompt is empty", field=field, sample=i)
        found = next((t for t in specials if t in text), None)
        if found is not None:
            raise InputError(f"the prompt contains the model's special token {found!r}", field=field, sample=i)
        out.append(text)
    return out


def resize_vocabulary(config: Any, rows: int) -> None:
    """Set the text vocabulary size of a (Qwen-VL) config to ``rows`` (the reward checkpoints resize their
    embeddings to the tokenizer after adding their reward tokens)."""
    text = getattr(config, "text_config", None) or config
    text.vocab_size = int(rows)
    if text is not config and hasattr(config, "vocab_size"):
        config.vocab_size = int(rows)


def sequential_positions(attention_mask: Any) -> Any:
    """(B, L) positions ``0 .. n-1`` over each row's real tokens of a left-padded batch (pads get 0): the
    positions the 4.x reward models' forward used, independent of padding."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


#: The (B, L) per-token entries a Qwen-VL processor's batch may hold (moved by :func:`right_aligned`).
TOKEN_KEYS = ("input_ids", "token_type_ids", "mm_token_type_ids")


def right_aligned(batch: Any) -> tuple[dict, Any]:
    """A left-padded batch with each row's tokens moved to its start (pads after them) and no attention mask,
    and the positions ``0 .. L-1`` (B, L) for it.

    For a causal decoder that reads the hidden state of a row's own tokens this is exact: a token attends only
    to earlier ones, all of them real, and its position is its index, as :func:`sequential_positions` gives it.
    Without a padding mask, attention takes the causal kernel (on the CPU much faster than a masked one on long
    prompts). The per-token tensors (:data:`TOKEN_KEYS`) move with their row; media tensors keep their order.
    """
    import torch

    mask = batch["attention_mask"]
    b, length = mask.shape
    shift = (length - mask.long().sum(dim=1)).unsqueeze(1)  # pads before each row's tokens
    index = (torch.arange(length, device=mask.device).unsqueeze(0) + shift) % length
    moved = {k: torch.gather(v, 1, index) if k in TOKEN_KEYS else v for k, v in batch.items() if k != "attention_mask"}
    return moved, torch.arange(length, device=mask.device).expand(b, length)


# ------------------------------------------------------------------------------ qwen-vl-utils preprocessing


def smart_resize(height: int, width: int, *, min_pixels: int, max_pixels: int, factor: int = FACTOR) -> tuple[int, int]:
    """qwen-vl-utils' target size: both sides multiples of ``factor``, about ``[min_pixels, max_pixels]``
    pixels, the aspect ratio kept (sides rounded; scaled by ``sqrt`` and floored / ceiled when outside).
    InputError (field ``image``) above an aspect ratio of 200."""
    if max(height, width) / max(min(height, width), 1) > MAX_RATIO:
        raise InputError(
            f"the aspect ratio {max(height, width) / min(height, width):.0f} of a {width}x{height} image "
            f"is above {MAX_RATIO}",
            field="image",
        )
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h, w = math.floor(height / beta / factor) * factor, math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h, w


def resize_image(image: Any, *, min_pixels: int, max_pixels: int) -> Any:
    """An RGB PIL image resized (PIL bicubic) to :func:`smart_resize`'s size, as qwen-vl-utils' ``fetch_image``."""
    from PIL import Image

    w, h = image.size
    rh, rw = smart_resize(h, w, min_pixels=min_pixels, max_pixels=max_pixels)
    return image.convert("RGB").resize((rw, rh), Image.Resampling.BICUBIC)


def video_frame_indices(
    total: int,
    *,
    num_frames: int | None = None,
    fps: float | None = None,
    source_fps: float | None = None,
    min_frames: int = FPS_MIN_FRAMES,
    max_frames: int = FPS_MAX_FRAMES,
) -> list[int]:
    """qwen-vl-utils' frame choice (``smart_nframes``, ``sample_type: uniform``).

    With ``num_frames``: that count rounded to an even number. Otherwise ``total / source_fps * fps`` frames,
    clamped to ``[ceil2(min_frames), floor2(min(max_frames, total))]`` and rounded to an even number. Never
    more than ``total``; fewer than 2 is an InputError (field ``video``). Indices:
    ``round(linspace(0, total - 1, n))`` in float32 (torch), as the reference; past 2**24 frames float32 rounds
    ``total - 1`` up to ``total``, so they are clamped to the last frame (where the reference reads past the end).
    """
    import torch

    if num_frames is not None:
        n = round(num_frames / FRAME_FACTOR) * FRAME_FACTOR
    elif fps is None or source_fps is None:
        raise TypeError("frame indices need num_frames, or fps and source_fps")
    else:
        lo = math.ceil(min_frames / FRAME_FACTOR) * FRAME_FACTOR
        hi = math.floor(min(max_frames, total) / FRAME_FACTOR) * FRAME_FACTOR
        n = round(min(max(total / source_fps * fps, lo), hi) / FRAME_FACTOR) * FRAME_FACTOR
    n = min(n, total)
    if n < FRAME_FACTOR:
        raise InputError(
            f"the video has {total} frame(s); {FRAME_FACTOR} or more are needed (the reference samples "
            f"at least {FRAME_FACTOR})",
            field="video",
        )
    return torch.linspace(0, total - 1, n).round().long().clamp_(max=total - 1).tolist()


def resize_frames(frames: Any, *, min_pixels: int, max_pixels: int) -> Any:
    """uint8 frames (T, 3, H, W) resized to :func:`smart_resize`'s size with torchvision bicubic + antialias
    (uint8 out), as qwen-vl-utils' ``fetch_video`` does for decoded videos."""
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.functional import resize

    h, w = int(frames.shape[-2]), int(frames.shape[-1])
    try:
        rh, rw = smart_resize(h, w, min_pixels=min_pixels, max_pixels=max_pixels)
    except InputError as exc:
        raise InputError(exc.message.replace("image", "video frame"), field="video") from None
    return resize(frames, [rh, rw], interpolation=InterpolationMode.BICUBIC, antialias=True)


def reward_processor(
    base: str, tokens: Sequence[str], *, family: str, model_type: str = "qwen2_vl"
) -> tuple[Any, list[int], Any]:
    """The processor of the base model a reward model was trained from, with the reward's special
    ``tokens`` added, their ids, and the base's config (which must be of ``model_type``: Qwen2-VL for
    HPSv3 and VideoAlign, ``qwen2_5_vl`` for EditReward)."""
    from transformers import AutoConfig

    from .backbone import load_vlm_processor

    processor = load_vlm_processor(base, field="kwargs.base_model")
    processor.tokenizer.add_special_tokens({"additional_special_tokens": list(tokens)})
    ids = [int(i) for i in processor.tokenizer.convert_tokens_to_ids(list(tokens))]
    with loading(f"the config of '{base}'", field="kwargs.base_model", verb="read"):
        config = AutoConfig.from_pretrained(base)
    if getattr(config, "model_type", None) != model_type:
        shown = {"qwen2_vl": "Qwen2-VL", "qwen2_5_vl": "Qwen2.5-VL"}.get(model_type, model_type)
        raise ConfigError(
            f"{family} is a {shown} reward model; '{base}' is a '{config.model_type}' model", field="kwargs.base_model"
        )
    return processor, ids, config


def read_checkpoint(checkpoint: Any) -> dict[str, Any]:
    """A reward checkpoint's state dict, loaded safely (a bad file is a ConfigError on ``model_path``)."""
    try:
        return load_state_dict(checkpoint)
    except InputError as exc:
        raise ConfigError(exc.message, field="model_path") from None


def reward_backbone(
    state: Mapping[str, Any],
    processor: Any,
    config: Any,
    *,
    checkpoint: Any,
    base: str,
    family: str,
    dtype: Any,
    device: str,
    attn_implementation: str | None = None,
    head_prefix: str = "rm_head.",
) -> tuple[Any, dict]:
    """The backbone built from ``config`` and loaded with ``state`` (the published keys), and the head's
    tensors (the keys under ``head_prefix``); the checkpoint's vocabulary must be the base tokenizer's plus
    the reward tokens."""
    rows = embedding_rows(state)
    if rows != len(processor.tokenizer):
        raise ConfigError(
            f"'{checkpoint}' has {rows} token embeddings; the tokenizer of '{base}' with {family}'s "
            f"reward tokens has {len(processor.tokenizer)} (is base_model the model {family} was "
            "trained on?)",
            field="model_path",
        )
    resize_vocabulary(config, rows)
    model = build_backbone(config, dtype=dtype, device=device, attn_implementation=attn_implementation)
    return model, load_backbone(model, state, where=str(checkpoint), head_prefix=head_prefix)
