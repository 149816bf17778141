"""PickScore (Kirstain et al., 2023): a CLIP ViT-H/14 fine-tuned on Pick-a-Pic human preferences.

``score = scale * logit_scale.exp() * cos(E_image, E_text)``, the diagonal of transformers'
``logits_per_image`` times ``scale``. The default ``scale = 1/26`` follows flow_grpo and Flow-Factory
(their PickScore reward divides by 26); ``scale: 1`` gives the raw PickScore of the paper (the card's
``typical_range`` says what real weights score). A softmax over candidates of one prompt turns raw scores into
preference probabilities; that is a groupwise use left to the group rewards.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch

from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import check_pairs, load_clip_backbone
from ..options import PositiveNumber, RewardOptions, WeightPath


def _has_processor_files(path: str) -> bool:
    p = Path(path)
    return (
        p.is_dir()
        and any((p / f).is_file() for f in ("preprocessor_config.json", "processor_config.json"))
        and any((p / f).is_file() for f in ("tokenizer.json", "vocab.json"))
    )


class PickScore(PointwiseReward):
    """PickScore: ``scale * exp(logit_scale) * cos(image, prompt)`` with transformers CLIP.

    Inputs: ``image`` (tensors from the processor, or PIL/arrays in direct calls) and ``prompt``.
    Range unbounded in principle; the card's ``typical_range`` gives a sourced range on real weights.
    The raw cosine is reported as the extra ``cosine``.

    ``model_path``: transformers CLIPModel (default ``yuvalkirstain/PickScore_v1``); options: :class:`Options`.
    """

    inputs = Inputs(("image", "prompt"), images="uint8")
    default_model: ClassVar[str] = "yuvalkirstain/PickScore_v1"
    default_processor: ClassVar[str] = "laion/CLIP-ViT-H-14-laion2B-s32B-b79K"

    class Options(RewardOptions):
        processor_path: WeightPath | None = None
        """Tokenizer and image-processor configs (default: ``model_path`` when it holds them, else
        ``laion/CLIP-ViT-H-14-laion2B-s32B-b79K``, as PickScore's own card says)."""
        scale: PositiveNumber = 1 / 26
        """Multiplies the score: ``1/26`` as flow_grpo and Flow-Factory; ``1`` gives the raw PickScore."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        path = str(model_path or self.default_model)
        processor_path = self.options.processor_path
        processor = processor_path or (path if _has_processor_files(path) else self.default_processor)
        self.scale = self.options.scale
        self.backbone = load_clip_backbone(
            path, backend="transformers", device=device, dtype=self.dtype, processor_path=processor
        )
        self.logit_scale = self.backbone.logit_scale

    def __call__(self, image: Sequence[Any] | torch.Tensor, prompt: Sequence[str], **_: Any) -> RewardOutput:
        check_pairs(image=image, prompt=prompt)
        text = self.backbone.encode_text(prompt)
        img = self.backbone.encode_images(image)
        score, cos = self.formula(img, text)
        return RewardOutput(score.cpu(), extras={"cosine": cos.cpu()})

    def score_pixels(
        self, pixels: torch.Tensor, prompt: Sequence[str], *, gradient_checkpointing: bool = False, **_: Any
    ) -> torch.Tensor:
        """Differentiable PickScore of float pixels (B, 3, H, W) in [0, 1] -> (B,) (same model and :meth:`formula`)."""
        check_pairs(image=pixels, prompt=prompt)
        text = self.backbone.encode_text(prompt)
        img = self.backbone.encode_pixels(pixels, gradient_checkpointing=gradient_checkpointing)
        return self.formula(img, text)[0]

    def formula(self, img: torch.Tensor, text: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(score, cosine) from L2-normalised features: ``scale * exp(logit_scale) * cos``."""
        cos = (img * text).sum(dim=-1)
        return self.scale * self.logit_scale * cos, cos
