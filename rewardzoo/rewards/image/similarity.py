"""CLIP image-image similarity (CLIP-I): cosine between a generated image and its condition image(s).

``score_i = mean_j cos(E(image_i), E(condition_images_i[j]))`` — for editing (source image) and
subject-driven generation (reference images, as DreamBooth's CLIP-I metric).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from ...errors import InputError
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import ClipOptions, check_pairs, clip_reward_files, load_clip_backbone


class ClipImageSimilarity(PointwiseReward):
    """Mean CLIP cosine between ``image`` and each of its ``condition_images``; range [-1, 1].

    Inputs: ``image`` and ``condition_images`` (a list of one or more images per sample). A call's
    images are encoded in one batch and all its condition images in another. ``model_path``/``pretrained``/``backend`` as for
    ``clip_score`` (default open_clip ``ViT-B-32`` / ``openai``). The extras ``min_cosine`` and
    ``max_cosine`` report the spread over several condition images.
    """

    inputs = Inputs(("image", "condition_images"), images="uint8")
    default_model: ClassVar[str] = "ViT-B-32"

    Options = ClipOptions

    options: ClipOptions

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        pretrained, backend = self.options.pretrained, self.options.backend
        processor_path = self.options.processor_path
        self.backbone = load_clip_backbone(
            model_path or self.default_model,
            backend=backend,
            device=device,
            dtype=self.dtype,
            pretrained=pretrained,
            processor_path=processor_path,
        )

    weight_files = classmethod(clip_reward_files)  # the CLIP backbone's file

    def __call__(self, image: Sequence[Any] | torch.Tensor, condition_images: Sequence[Any], **_: Any) -> RewardOutput:
        n = check_pairs(image=image, condition_images=condition_images)
        flat, owner = _flatten(condition_images)
        img = self.backbone.encode_images(image)
        try:
            cond = self.backbone.encode_images(flat, field="condition_images")
        except InputError as exc:
            raise exc.located(indices=owner, field="condition_images") from None  # flat index -> its sample
        mean, lo, hi = self.formula(img, cond, owner, n)
        return RewardOutput(mean.cpu(), extras={"min_cosine": lo.cpu(), "max_cosine": hi.cpu()})

    def score_pixels(
        self, pixels: torch.Tensor, condition_images: Sequence[Any], *, gradient_checkpointing: bool = False, **_: Any
    ) -> torch.Tensor:
        """Differentiable CLIP-I of float pixels (B, 3, H, W) in [0, 1] -> (B,) (same model and :meth:`formula`).

        ``condition_images``: per sample one or a list of float tensors (3, H, W) in [0, 1] (references,
        preprocessed in float like ``pixels`` and detached: the gradient flows to ``pixels`` only).
        """
        n = check_pairs(image=pixels, condition_images=condition_images)
        flat, owner = _flatten(condition_images)
        img = self.backbone.encode_pixels(pixels, gradient_checkpointing=gradient_checkpointing)
        for j, c in enumerate(flat):
            if not isinstance(c, torch.Tensor) or c.ndim != 3 or not c.is_floating_point():
                raise InputError(
                    "the differentiable path takes condition images as float tensors (3, H, W) in "
                    f"[0, 1], got {type(c).__name__}",
                    field="condition_images",
                    sample=owner[j],
                )
        by_size: dict[tuple[int, ...], list[int]] = {}
        for j, c in enumerate(flat):
            by_size.setdefault(tuple(c.shape), []).append(j)
        cond = img.new_empty((len(flat), img.shape[-1]))
        for idx in by_size.values():
            feats = self.backbone.encode_pixels(torch.stack([flat[j].detach() for j in idx])).detach()
            cond = cond.index_copy(0, torch.tensor(idx, device=img.device), feats.to(cond.dtype))
        return self.formula(img, cond, owner, n)[0]

    @staticmethod
    def formula(
        img: torch.Tensor, cond: torch.Tensor, owner: Sequence[int], n: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mean, min, max) over each sample's condition images of ``cos(image, condition)``;
        ``owner[j]``: the sample of condition image ``j``."""
        idx = torch.tensor(list(owner), device=img.device)
        cos = (img[idx] * cond).sum(dim=-1)
        counts = torch.bincount(idx, minlength=n).to(cos.dtype)
        mean = torch.zeros(n, device=cos.device, dtype=cos.dtype).index_add(0, idx, cos) / counts
        lo = torch.full((n,), 2.0, device=cos.device, dtype=cos.dtype).scatter_reduce(
            0, idx, cos.detach(), reduce="amin"
        )
        hi = torch.full((n,), -2.0, device=cos.device, dtype=cos.dtype).scatter_reduce(
            0, idx, cos.detach(), reduce="amax"
        )
        return mean, lo, hi


def _flatten(condition_images: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """Every condition image of the call in one list, and the sample each belongs to."""
    flat: list[Any] = []
    owner: list[int] = []
    for i, conds in enumerate(condition_images):
        conds = list(conds) if isinstance(conds, (list, tuple)) else [conds]
        if not conds:
            raise InputError("empty list of condition images", field="condition_images", sample=i)
        flat.extend(conds)
        owner.extend([i] * len(conds))
    return flat, owner
