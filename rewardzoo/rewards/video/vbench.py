"""VBench's frame transforms and frame sampling, for the ``preset: vbench`` option of the video rewards.

VBench (Huang et al., CVPR 2024) decodes 8-bit frames into a float32 tensor that still holds 0-255
values, resizes that tensor with torchvision's ``Resize(..., antialias=False)`` (bilinear for DINO,
bicubic plus a centre crop for CLIP), and only then divides by 255 and normalises. The functions here
do the same steps in the same order on rewardzoo's float frames in [0, 1]: the frames are first put
back on VBench's 0-255 integer grid (``round(x * 255)``, exact for frames decoded from 8-bit video).
Reimplemented from the description of VBench's pipeline; no VBench code is used.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as TF

from ...errors import ConfigError
from ..options import PositiveInt, RewardOptions, model_validator

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class FrameOptions(RewardOptions):
    """The frame-sampling options of the video rewards that read sampled frames (``num_frames``)."""

    num_frames: PositiveInt | None = 8
    """Frames sampled uniformly from each video (null: every frame)."""


class VBenchOptions(FrameOptions):
    """:class:`FrameOptions` with ``preset: vbench``, which scores every frame: ``num_frames`` stays at its default
    or null."""

    preset: Literal["vbench"] | None = None
    """``vbench``: VBench's own preprocessing on every frame; null: rewardzoo's defaults."""

    @model_validator(mode="after")
    def _every_frame(self) -> VBenchOptions:
        default = type(self).model_fields["num_frames"].default
        if self.preset == "vbench" and self.num_frames not in (None, default):
            raise ConfigError(
                f"preset: vbench scores every frame as VBench does; drop kwargs.num_frames "
                f"(got {self.num_frames!r}) or set it to null",
                field="kwargs.num_frames",
            )
        return self

    def sampled_frames(self) -> int | None:
        """The frames a call samples: ``num_frames``, or every frame (None) with ``preset: vbench``."""
        return None if self.preset == "vbench" else self.num_frames


def to_vbench_range(frames: torch.Tensor) -> torch.Tensor:
    """Frames (T, 3, H, W), float in [0, 1] or uint8 -> float32 holding VBench's 8-bit values 0..255."""
    if frames.dtype == torch.uint8:
        return frames.to(torch.float32)
    return frames.to(torch.float32).mul(255.0).round_().clamp_(0.0, 255.0)


def vbench_transform(
    frames: torch.Tensor,
    *,
    size: int,
    interpolation: str,
    crop: bool,
    mean: tuple[float, float, float],
    std: tuple[float, float, float],
    uint8: bool = False,
) -> torch.Tensor:
    """VBench's ``dino_transform`` (bilinear, no crop) / ``clip_transform`` (bicubic, centre crop) on frames in
    [0, 1] or uint8.

    Order as VBench: resize the float 0-255 tensor (shorter side ``size``, ``antialias=False``, no
    clamping), centre crop, divide by 255, normalise with ``mean`` / ``std``. Returns float32.
    ``uint8=True``: the resize runs on a uint8 tensor instead (VBench's CLIP-T reads frames with decord as
    uint8; torchvision then clamps and rounds the resized values back to 8 bits).
    """
    from ...shared.video import frame_batches

    mode = {"bilinear": InterpolationMode.BILINEAR, "bicubic": InterpolationMode.BICUBIC}[interpolation]
    parts = []
    for chunk in frame_batches(frames):  # the full-resolution float frames a few at a time (resizes are per frame)
        x = chunk if uint8 and chunk.dtype == torch.uint8 else to_vbench_range(chunk)
        if uint8:
            x = x.to(torch.uint8)
        x = TF.resize(x, size, interpolation=mode, antialias=False)
        if crop:
            x = TF.center_crop(x, size)
        x = x.float() / 255.0
        parts.append(TF.normalize(x, mean, std))
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def middle_indices(num_frames: int, total: int) -> list[int]:
    """VBench's ``sample="middle"`` frame choice: ``min(num_frames, total)`` equal intervals over the
    ``total`` frames, the midpoint of each (``(start + end) // 2`` of ``np.linspace`` bounds cast to int,
    ``end`` inclusive); a video shorter than ``num_frames`` repeats its last index up to ``num_frames``."""
    n = min(num_frames, total)
    bounds = np.linspace(start=0, stop=total, num=n + 1).astype(int)
    picked = [int((bounds[i] + bounds[i + 1] - 1) // 2) for i in range(n)]
    return picked + [picked[-1]] * (num_frames - len(picked))
