"""CLIP image-image similarity (CLIP-I): cosine between a generated image and its condition image(s).

``score_i = mean_j cos(E(image_i), E(condition_images_i[j]))`` — for editing (source image) and
subject-driven generation (reference images, as DreamBooth's CLIP-I metric).
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import torch

from ...errors import InputError
from ...shared.clip import check_pairs, load_clip_backbone
from ..base import Inputs, PointwiseReward, RewardOutput


class ClipImageSimilarity(PointwiseReward):
    """Mean CLIP cosine between ``image`` and each of its ``condition_images``; range [-1, 1].

    Inputs: ``image`` and ``condition_images`` (a list of one or more images per sample). All images
    of a call are encoded in one batch. ``model_path``/``pretrained``/``backend`` as for
    ``clip_score`` (default open_clip ``ViT-B-32`` / ``openai``). The extras ``min_cosine`` and
    ``max_cosine`` report the spread over several condition images.
    """

    inputs = Inputs(("image", "condition_images"), images="uint8")
    default_model: ClassVar[str] = "ViT-B-32"

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", *,
                 pretrained: str | None = "openai", backend: str = "auto", processor_path: str | None = None) -> None:
        super().__init__(model_path, device, dtype)
        self.backbone = load_clip_backbone(model_path or self.default_model, backend=backend, device=device,
                                           dtype=self.dtype, pretrained=pretrained, processor_path=processor_path)

    def __call__(self, image: Sequence[Any] | torch.Tensor, condition_images: Sequence[Any], **_: Any) -> RewardOutput:
        n = check_pairs(image=image, condition_images=condition_images)
        flat: list[Any] = []
        owner: list[int] = []
        for i, conds in enumerate(condition_images):
            conds = list(conds) if isinstance(conds, (list, tuple)) else [conds]
            if not conds:
                raise InputError("empty list of condition images", field="condition_images", sample=i)
            flat.extend(conds)
            owner.extend([i] * len(conds))
        img = self.backbone.encode_images(image)
        try:
            cond = self.backbone.encode_images(flat, field="condition_images")
        except InputError as exc:
            raise exc.located(indices=owner, field="condition_images") from None  # flat index -> its sample
        idx = torch.tensor(owner, device=img.device)
        cos = (img[idx] * cond).sum(dim=-1)
        counts = torch.bincount(idx, minlength=n).to(cos.dtype)
        mean = torch.zeros(n, device=cos.device).index_add_(0, idx, cos) / counts
        lo = torch.full((n,), 2.0, device=cos.device).scatter_reduce(0, idx, cos, reduce="amin")
        hi = torch.full((n,), -2.0, device=cos.device).scatter_reduce(0, idx, cos, reduce="amax")
        return RewardOutput(mean.cpu(), extras={"min_cosine": lo.cpu(), "max_cosine": hi.cpu()})
