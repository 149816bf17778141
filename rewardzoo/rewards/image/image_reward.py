"""ImageReward (Xu et al., NeurIPS 2023): BLIP's ViT and its cross-attention BERT with an MLP head.

The published checkpoint (``THUDM/ImageReward``: ``ImageReward.pt`` + ``med_config.json``) is a plain state
dict of the reference model; its keys are mapped onto transformers' BLIP classes (``BlipVisionModel`` for
``blip.visual_encoder.*``, ``BlipTextModel`` with cross-attention for ``blip.text_encoder.*``, whose names
are those of BLIP's ``med.py``) and an ``nn.Sequential`` head for ``mlp.layers.*``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch

from ...errors import ConfigError, InputError
from ...shared.image_ops import (
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    PreprocessConfig,
    preprocess_images,
    preprocess_pixels,
)
from ...shared.weights import load_state_dict, loading
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import check_pairs
from ..models.weights import resolve_weights_file
from ..options import PositiveInt, RewardOptions, WeightPath

#: ImageReward's normalisation of the MLP output (``ImageReward.py``: ``self.mean``, ``self.std``).
RAW_MEAN = 0.16717362830052426
RAW_STD = 1.0333394966054072
MAX_TOKENS = 35
#: ``med_config.json`` as published with ImageReward (BERT-base with cross-attention); used when absent.
MED_CONFIG = dict(
    vocab_size=30524,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
    hidden_act="gelu",
    layer_norm_eps=1e-12,
    pad_token_id=0,
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
)
#: Checkpoint entries the score does not use (BLIP's contrastive projections, a position-id buffer).
_UNUSED = re.compile(r"^blip\.(vision_proj|text_proj)\.|^blip\.text_encoder\.embeddings\.position_ids$")
_VISION_KEYS = [
    (r"^cls_token$", "embeddings.class_embedding"),
    (r"^pos_embed$", "embeddings.position_embedding"),
    (r"^patch_embed\.proj\.", "embeddings.patch_embedding."),
    (r"^blocks\.(\d+)\.norm1\.", r"encoder.layers.\1.layer_norm1."),
    (r"^blocks\.(\d+)\.norm2\.", r"encoder.layers.\1.layer_norm2."),
    (r"^blocks\.(\d+)\.attn\.qkv\.", r"encoder.layers.\1.self_attn.qkv."),
    (r"^blocks\.(\d+)\.attn\.proj\.", r"encoder.layers.\1.self_attn.projection."),
    (r"^blocks\.(\d+)\.mlp\.", r"encoder.layers.\1.mlp."),
    (r"^norm\.", "post_layernorm."),
]


class ImageRewardModel(torch.nn.Module):
    """BLIP ViT -> BERT with cross-attention on the image tokens -> MLP on the [CLS] state: the raw reward."""

    def __init__(self, vision_config: Any, text_config: Any) -> None:
        super().__init__()
        from transformers.models.blip.modeling_blip import BlipVisionModel
        from transformers.models.blip.modeling_blip_text import BlipTextModel

        self.visual_encoder = BlipVisionModel(vision_config)
        self.text_encoder = BlipTextModel(text_config, add_pooling_layer=False)
        width = text_config.hidden_size
        lin, drop = torch.nn.Linear, torch.nn.Dropout
        # The reference head: linear layers without activations, dropouts between them (no-ops in eval).
        self.mlp = torch.nn.Sequential(
            lin(width, 1024), drop(0.2), lin(1024, 128), drop(0.2), lin(128, 64), drop(0.1), lin(64, 16), lin(16, 1)
        )

    def image_embeds(self, pixels: torch.Tensor, *, gradient_checkpointing: bool = False) -> torch.Tensor:
        """The ViT's token states (N, 1 + patches, width) after its final LayerNorm."""
        vit = self.visual_encoder
        if not gradient_checkpointing:
            return vit(pixel_values=pixels).last_hidden_state
        from torch.utils.checkpoint import checkpoint

        hidden = vit.embeddings(pixels)
        for layer in vit.encoder.layers:  # recomputed in the backward pass instead of kept
            hidden = checkpoint(layer, hidden, use_reentrant=False)
        return vit.post_layernorm(hidden)

    def forward(
        self,
        pixels: torch.Tensor,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        *,
        gradient_checkpointing: bool = False,
    ) -> torch.Tensor:
        image_embeds = self.image_embeds(pixels, gradient_checkpointing=gradient_checkpointing)
        image_atts = torch.ones(image_embeds.shape[:-1], dtype=torch.long, device=image_embeds.device)
        text = self.text_encoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            encoder_hidden_states=image_embeds,
            encoder_attention_mask=image_atts,
        )
        cls = text.last_hidden_state[:, 0, :]
        return self.mlp(cls.to(self.mlp[0].weight.dtype)).squeeze(-1)  # the reference runs the head in float32


class ImageReward(PointwiseReward):
    """ImageReward: ``score = (MLP(BERT_cross(prompt, ViT(image))[CLS]) - 0.16717) / 1.03334``.

    Inputs: ``image`` and ``prompt`` (BERT-tokenised, at most 35 tokens). Unbounded; real weights give
    about -2..2 (the normalisation makes human-preferred images average about 0). Extra: ``raw`` (the MLP
    output before normalisation).

    ``model_path``: a directory or hub id holding ``ImageReward.pt`` (or ``ImageReward.safetensors``) and
    ``med_config.json`` (default ``THUDM/ImageReward``), or the weights file itself; options: :class:`Options`.
    """

    inputs = Inputs(("image", "prompt"), images="uint8")
    default_model: ClassVar[str] = "THUDM/ImageReward"
    default_tokenizer: ClassVar[str] = "bert-base-uncased"

    class Options(RewardOptions):
        tokenizer_path: WeightPath | None = None
        """The BERT tokenizer (default: ``model_path`` when it holds ``vocab.txt``, else ``bert-base-uncased``, as the
        reference)."""
        vision_heads: PositiveInt | None = None
        """Attention heads of the ViT (default width / 64: 16 for ViT-L)."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        tokenizer_path, vision_heads = self.options.tokenizer_path, self.options.vision_heads
        path = str(model_path or self.default_model)
        weights, med_config = _checkpoint_files(path)
        try:
            state = load_state_dict(weights)
        except InputError as exc:
            raise ConfigError(f"{exc.message} (see the model card: 'Checkpoint safety')", field="model_path") from None
        mapped = to_model_keys(state, source=weights)
        vision_config = vision_config_from(mapped, heads=vision_heads)
        text_config = text_config_from(med_config, encoder_width=vision_config.hidden_size)
        model = ImageRewardModel(vision_config, text_config)
        try:
            model.load_state_dict(mapped, strict=True)
        except RuntimeError as exc:
            raise ConfigError(
                f"'{weights}' does not fit the ImageReward architecture: {exc}", field="model_path"
            ) from None
        self.model = model.to(device=device).eval().requires_grad_(False)
        self.model.visual_encoder.to(self.dtype)
        self.model.text_encoder.to(self.dtype)
        self.model.mlp.to(torch.float64 if self.dtype == torch.float64 else torch.float32)  # float64: gradient checks
        self.tokenizer = _bert_tokenizer(
            tokenizer_path or (path if (Path(path) / "vocab.txt").is_file() else self.default_tokenizer)
        )
        self.preprocess_config = PreprocessConfig(
            size=vision_config.image_size,
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            resize_mode="shortest",
            interpolation="bicubic",
        )

    def __call__(self, image: Sequence[Any] | torch.Tensor, prompt: Sequence[str], **_: Any) -> RewardOutput:
        check_pairs(image=image, prompt=prompt)
        pixels = preprocess_images(image, self.preprocess_config, device=self.device, dtype=self.dtype)
        with torch.no_grad():
            raw = self._raw(pixels, prompt)
        return RewardOutput(((raw - RAW_MEAN) / RAW_STD).cpu(), extras={"raw": raw.cpu()})

    def score_pixels(
        self, pixels: torch.Tensor, prompt: Sequence[str], *, gradient_checkpointing: bool = False, **_: Any
    ) -> torch.Tensor:
        """Differentiable ImageReward of float pixels (B, 3, H, W) in [0, 1] -> (B,) (ReFL's use);
        ``gradient_checkpointing`` recomputes the ViT blocks in the backward pass."""
        check_pairs(image=pixels, prompt=prompt)
        x = preprocess_pixels(pixels.to(self.device), self.preprocess_config, dtype=self.dtype)
        return (self._raw(x, prompt, gradient_checkpointing=gradient_checkpointing) - RAW_MEAN) / RAW_STD

    def _raw(
        self, pixels: torch.Tensor, prompt: Sequence[str], *, gradient_checkpointing: bool = False
    ) -> torch.Tensor:
        for i, p in enumerate(prompt):
            if not isinstance(p, str):
                raise InputError(f"expected a string, got {type(p).__name__}", field="prompt", sample=i)
        tokens = self.tokenizer(
            list(prompt), padding="max_length", truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
        )
        return self.model(
            pixels,
            tokens["input_ids"].to(self.device),
            tokens["attention_mask"].to(self.device),
            gradient_checkpointing=gradient_checkpointing,
        )


# -------------------------------------------------------------------------------------------- loading
def _checkpoint_files(path: str) -> tuple[str, dict[str, Any]]:
    """(weights file, med_config) for a weights file, a directory or a hub id."""
    p = Path(path).expanduser()
    if p.is_file():
        weights, cfg_file = str(p), p.with_name("med_config.json")
    elif p.is_dir():
        name = next((n for n in ("ImageReward.safetensors", "ImageReward.pt") if (p / n).is_file()), None)
        weights = resolve_weights_file(p, name)
        cfg_file = p / "med_config.json"
    else:
        weights = resolve_weights_file(path, "ImageReward.pt")
        try:
            from huggingface_hub import hf_hub_download

            cfg_file = Path(hf_hub_download(path, "med_config.json"))
        except Exception:  # offline or absent: the published configuration
            cfg_file = None
    if cfg_file is not None and Path(cfg_file).is_file():
        try:
            return weights, json.loads(Path(cfg_file).read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ConfigError(f"'{cfg_file}' is not valid JSON: {exc}", field="model_path") from None
    return weights, dict(MED_CONFIG)


def to_model_keys(state: Mapping[str, torch.Tensor], *, source: str = "checkpoint") -> dict[str, torch.Tensor]:
    """ImageReward.pt names (``blip.visual_encoder.*``, ``blip.text_encoder.*``, ``mlp.layers.*``) ->
    :class:`ImageRewardModel` names. Unused BLIP projections are dropped; anything else is an error."""
    out, unknown = {}, []
    for key, value in state.items():
        if _UNUSED.search(key):
            continue
        if key.startswith("blip.visual_encoder."):
            rest = key[len("blip.visual_encoder.") :]
            for pattern, repl in _VISION_KEYS:
                if re.search(pattern, rest):
                    out["visual_encoder." + re.sub(pattern, repl, rest)] = value
                    break
            else:
                unknown.append(key)
        elif key.startswith("blip.text_encoder."):
            out["text_encoder." + key[len("blip.text_encoder.") :]] = value
        elif key.startswith("mlp.layers."):
            out["mlp." + key[len("mlp.layers.") :]] = value
        else:
            unknown.append(key)
    if unknown:
        raise ConfigError(
            f"'{source}' is not an ImageReward checkpoint: unexpected keys {unknown[:5]}"
            f"{' ...' if len(unknown) > 5 else ''}",
            field="model_path",
        )
    if "visual_encoder.embeddings.position_embedding" not in out:
        raise ConfigError(
            f"'{source}' has no blip.visual_encoder.* weights: not an ImageReward checkpoint", field="model_path"
        )
    return out


def vision_config_from(mapped: Mapping[str, torch.Tensor], *, heads: int | None = None):
    """BLIP ViT settings read from the weights' shapes (ViT-L/16 at 224 for the published checkpoint)."""
    from transformers import BlipVisionConfig

    pos = mapped["visual_encoder.embeddings.position_embedding"]
    width = int(pos.shape[-1])
    patch = int(mapped["visual_encoder.embeddings.patch_embedding.weight"].shape[-1])
    side = math.isqrt(int(pos.shape[1]) - 1)
    depth = len({k.split(".")[3] for k in mapped if k.startswith("visual_encoder.encoder.layers.")})
    mlp = int(mapped["visual_encoder.encoder.layers.0.mlp.fc1.weight"].shape[0])
    heads = heads if heads is not None else max(1, width // 64)
    if width % heads:
        raise ConfigError(f"vision_heads {heads} does not divide the ViT width {width}", field="kwargs.vision_heads")
    return BlipVisionConfig(
        hidden_size=width,
        intermediate_size=mlp,
        num_hidden_layers=depth,
        num_attention_heads=heads,
        image_size=side * patch,
        patch_size=patch,
        layer_norm_eps=1e-6,
        hidden_act="gelu",
        attention_dropout=0.0,
    )


def text_config_from(med: Mapping[str, Any], *, encoder_width: int):
    """transformers' BlipTextConfig from BLIP's ``med_config.json`` (a BertConfig with cross-attention)."""
    from transformers import BlipTextConfig

    keys = (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
        "hidden_act",
        "layer_norm_eps",
        "pad_token_id",
        "hidden_dropout_prob",
        "attention_probs_dropout_prob",
    )
    settings = {k: med.get(k, MED_CONFIG[k]) for k in keys}
    return BlipTextConfig(**settings, encoder_hidden_size=encoder_width)


def _bert_tokenizer(path: str):
    """BLIP's tokenizer: BERT's, plus ``[DEC]`` as bos and ``[ENC]`` as an extra special token (init_tokenizer)."""
    from transformers import BertTokenizer

    with loading(f"the BERT tokenizer '{path}'", field="kwargs.tokenizer_path"):
        tok = BertTokenizer.from_pretrained(path)
    tok.add_special_tokens({"bos_token": "[DEC]"})
    tok.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
    return tok


def convert_to_safetensors(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """One-time conversion of a trusted ``ImageReward.pt`` that ``torch.load(weights_only=True)`` refuses.

    Unpickles ``src`` with ``weights_only=False`` — run it only on a file from a source you trust — and
    writes its tensors to ``dst`` (``ImageReward.safetensors``), which then loads safely.
    """
    from safetensors.torch import save_file

    state = torch.load(str(src), map_location="cpu", weights_only=False)  # an explicit, documented opt-in
    state = state.get("state_dict", state) if isinstance(state, dict) else state
    tensors = {k: v.contiguous() for k, v in state.items() if isinstance(v, torch.Tensor)}
    save_file(tensors, str(dst))
    return Path(dst)
