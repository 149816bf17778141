"""LAION aesthetic predictor v2 (improved-aesthetic-predictor, C. Schuhmann): an MLP on CLIP ViT-L/14.

``score = head(E / ||E||)`` with ``E`` the CLIP ViT-L/14 (OpenAI) image embedding and ``head`` the
linear stack 768 -> 1024 -> 128 -> 64 -> 16 -> 1 (dropout 0.2/0.2/0.1 between the first layers, no
activations). The head's parameter names are the official ones (``layers.0``, ``layers.2``,
``layers.4``, ``layers.6``, ``layers.7``), so the published ``sac+logos+ava1-l14-linearMSE.pth``
loads as is. Scores are roughly 1-10 (higher is more aesthetic).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import torch
from torch import nn

from ...errors import ConfigError, InputError
from ...shared.checkpoints import Checkpoint, resolve_checkpoint
from ...shared.weights import load_state_dict, strip_prefix
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import clip_weight_files, load_clip_backbone
from ..models.weights import resolve_weights_file
from ..options import RewardOptions, WeightPath

OFFICIAL_HEAD_URL = (
    "https://github.com/christophschuhmann/improved-aesthetic-predictor/raw/main/sac+logos+ava1-l14-linearMSE.pth"
)


class AestheticHead(nn.Module):
    """The v2 head: 768-1024-128-64-16-1 linear layers with the reference dropouts and names."""

    def __init__(self, input_dim: int = 768) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(input_dim, 1024),
            nn.Dropout(0.2),
            nn.Linear(1024, 128),
            nn.Dropout(0.2),
            nn.Linear(128, 64),
            nn.Dropout(0.1),
            nn.Linear(64, 16),
            nn.Linear(16, 1),
        )

    def forward(self, embedding: torch.Tensor) -> torch.Tensor:
        return self.layers(embedding).squeeze(-1)


def load_aesthetic_head(path: str) -> AestheticHead:
    """Build the head from a checkpoint with the reference parameter names (optionally prefixed)."""
    try:
        state = strip_prefix(load_state_dict(path), ("module.", "model."))
    except InputError as exc:
        raise ConfigError(exc.message, field="model_path") from None
    if "layers.0.weight" not in state:
        raise ConfigError(
            f"'{path}' is not a LAION aesthetic v2 head (no 'layers.0.weight'; keys: {sorted(state)[:6]})",
            field="model_path",
        )
    head = AestheticHead(int(state["layers.0.weight"].shape[1]))
    try:
        head.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ConfigError(f"'{path}' does not fit the 768-1024-128-64-16-1 head: {exc}", field="model_path") from None
    return head.eval().requires_grad_(False)


class LaionAesthetic(PointwiseReward):
    """LAION aesthetic v2: ``mlp(E / ||E||)`` on the CLIP ViT-L/14 image embedding, about 1-10.

    Inputs: ``image``. ``model_path``: the head (``.pth`` loaded with ``weights_only=True``, or
    ``.safetensors``; a local file, an https URL, or ``org/repo/file``; default: the official file in
    christophschuhmann/improved-aesthetic-predictor); options (the CLIP backbone the head was trained on):
    :class:`Options`. The head runs in float32.
    """

    inputs = Inputs(("image",), images="uint8")

    class Options(RewardOptions):
        clip_model: WeightPath = "ViT-L-14"
        """The CLIP backbone the head reads (an open_clip architecture, hub id or directory; ViT-L/14 as LAION's)."""
        clip_pretrained: WeightPath | None = "openai"
        """open_clip's weights tag or file for an architecture name."""
        backend: Literal["auto", "open_clip", "transformers"] = "auto"
        """Which library builds the backbone."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        clip_model, clip_pretrained, backend = (
            self.options.clip_model,
            self.options.clip_pretrained,
            self.options.backend,
        )
        self.head = load_aesthetic_head(resolve_weights_file(model_path or OFFICIAL_HEAD_URL)).to(device)
        self.backbone = load_clip_backbone(
            clip_model, backend=backend, device=device, dtype=self.dtype, pretrained=clip_pretrained
        )
        if self.backbone.embed_dim != self.head.layers[0].in_features:
            raise ConfigError(
                f"the head expects {self.head.layers[0].in_features}-d embeddings but '{clip_model}' "
                f"gives {self.backbone.embed_dim}-d ones",
                field="kwargs.clip_model",
            )

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """The head's file (held in float32) and the CLIP backbone's (:func:`~rewardzoo.rewards.models.clip.clip_weight_files`)."""
        head = replace(resolve_checkpoint(model_path or OFFICIAL_HEAD_URL), dtype="float32")
        backbone = clip_weight_files(
            cls.configured(kwargs, "clip_model"),
            backend=cls.configured(kwargs, "backend"),
            pretrained=cls.configured(kwargs, "clip_pretrained"),
        )
        return [head, *backbone]

    def __call__(self, image: Sequence[Any] | torch.Tensor, **_: Any) -> RewardOutput:
        emb = self.backbone.encode_images(image)
        with torch.no_grad():
            return RewardOutput(self.formula(emb).cpu())

    def score_pixels(self, pixels: torch.Tensor, *, gradient_checkpointing: bool = False, **_: Any) -> torch.Tensor:
        """Differentiable aesthetic score of float pixels (B, 3, H, W) in [0, 1] -> (B,) (same model,
        head and :meth:`formula` as a call; the head's weights are frozen)."""
        emb = self.backbone.encode_pixels(pixels, gradient_checkpointing=gradient_checkpointing)
        return self.formula(emb)

    def formula(self, emb: torch.Tensor) -> torch.Tensor:
        """The score from the L2-normalised CLIP embedding: ``head(E / ||E||)`` (the head runs in float32,
        or float64 for a float64 embedding)."""
        if emb.dtype != torch.float64:
            return self.head(emb)
        params = {k: v.double() for k, v in self.head.state_dict().items()}  # the head itself stays float32
        return torch.func.functional_call(self.head, params, (emb,))
