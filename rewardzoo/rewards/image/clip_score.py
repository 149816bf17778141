"""CLIPScore (Hessel et al., 2021): image-text alignment from CLIP embeddings.

``score = w * max(cos(E_image, E_text), 0)`` with ``w = 2.5`` per sample, where the caption is
``prefix + prompt`` (Hessel et al. use ``"A photo depicts "``). torchmetrics reports ``100 * cos``
and clamps only after averaging over the batch; a reward needs the per-sample clamp.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import ClipOptions, check_pairs, clip_reward_files, load_clip_backbone


class ClipScore(PointwiseReward):
    """CLIPScore: ``2.5 * max(cos(image, prefix + prompt), 0)``.

    Inputs: ``image`` (tensors (3, H, W) in [0, 1] from the processor; direct calls also take PIL,
    NumPy, a list of mixed sizes or one (N, C, H, W) tensor) and ``prompt`` (one string per image).
    Range [0, 2.5]; the raw cosine is reported as the extra ``cosine``.

    ``model_path``: an open_clip architecture (default ``ViT-B-32`` with ``pretrained: openai``), an
    open_clip hub id or hub-style directory, or a transformers CLIPModel directory/hub id
    (``backend: transformers``). See :func:`rewardzoo.rewards.models.clip.load_clip_backbone`.
    """

    inputs = Inputs(("image", "prompt"), images="uint8")
    w: ClassVar[float] = 2.5
    default_model: ClassVar[str] = "ViT-B-32"

    class Options(ClipOptions):
        prefix: str = "A photo depicts "
        """Prepended to each prompt (the CLIPScore paper's)."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        pretrained, backend = self.options.pretrained, self.options.backend
        processor_path = self.options.processor_path
        self.prefix = self.options.prefix
        self.backbone = load_clip_backbone(
            model_path or self.default_model,
            backend=backend,
            device=device,
            dtype=self.dtype,
            pretrained=pretrained,
            processor_path=processor_path,
        )

    weight_files = classmethod(clip_reward_files)  # the CLIP backbone's file

    def __call__(self, image: Sequence[Any] | torch.Tensor, prompt: Sequence[str], **_: Any) -> RewardOutput:
        check_pairs(image=image, prompt=prompt)
        text = self._text(prompt)
        img = self.backbone.encode_images(image)
        score, cos = self.formula(img, text)
        return RewardOutput(score.cpu(), extras={"cosine": cos.cpu()})

    def score_pixels(
        self, pixels: torch.Tensor, prompt: Sequence[str], *, gradient_checkpointing: bool = False, **_: Any
    ) -> torch.Tensor:
        """Differentiable CLIPScore of float pixels (B, 3, H, W) in [0, 1] -> (B,), on the pixels' graph
        (same model and :meth:`formula` as a call; preprocessing in float, see ``ClipBackbone.encode_pixels``)."""
        check_pairs(image=pixels, prompt=prompt)
        text = self._text(prompt)
        img = self.backbone.encode_pixels(pixels, gradient_checkpointing=gradient_checkpointing)
        return self.formula(img, text)[0]

    def _text(self, prompt: Sequence[str]) -> torch.Tensor:
        return self.backbone.encode_text([self.prefix + p if isinstance(p, str) else p for p in prompt])

    def formula(self, img: torch.Tensor, text: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(score, cosine) from L2-normalised image and text features: ``w * max(cos, 0)``."""
        cos = (img * text).sum(dim=-1)
        return self.w * cos.clamp(min=0.0), cos
