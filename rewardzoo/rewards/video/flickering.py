"""Temporal flickering (VBench), a model-free video reward.

``score = (255 - mean_i MAE(frame_i, frame_{i+1})) / 255`` with MAE the mean absolute difference of
two consecutive frames on 0-255 pixel values, averaged over all T - 1 pairs (VBench
``temporal_flickering``). 1.0 means no change between frames; alternating black and white
frames give 0.0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from ...shared.video import check_temporal
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import PositiveInt
from .vbench import FrameOptions

#: Elements of one frame chunk's differences (int16 or float32): bounds the working memory (~16-32 MB).
CHUNK_ELEMENTS = 1 << 23


def temporal_flickering(video: torch.Tensor) -> float:
    """VBench flickering score of a video (T, C, H, W), T >= 2 (see module docstring).

    A uint8 video (0-255) is scored exactly: the absolute differences are summed as integers, a few
    frames at a time, and ``(255 - sum / count) / 255`` is VBench's formula on those values. A float
    video in [0, 1] is scored as ``1 - mean |f_{i+1} - f_i|`` (float32 differences, float64 sums), also a
    few frames at a time: no full-video copy either way.
    """
    video = video.detach()
    n = int(video.shape[0])
    per_frame = max(1, video[0].numel())
    step = max(1, CHUNK_ELEMENTS // per_frame)
    exact = video.dtype == torch.uint8
    total: int | float = 0 if exact else 0.0
    for s in range(0, n - 1, step):
        a, b = video[s : min(s + step, n - 1)], video[s + 1 : min(s + step, n - 1) + 1]
        total += _abs_diff_sum(a, b, exact)
    count = (n - 1) * per_frame
    if exact:
        return (255.0 - total / count) / 255.0  # int / int: the correctly rounded mean
    return float(1.0 - total / count)  # (255 - 255 * mae) / 255


def _abs_diff_sum(a: torch.Tensor, b: torch.Tensor, exact: bool) -> Any:
    """``sum |b - a|``: a Python int for uint8 frames (int16 differences), a float64 sum for float ones."""
    if a.device.type != "cpu":
        if exact:
            return int((b.to(torch.int16) - a.to(torch.int16)).abs_().sum(dtype=torch.int64))
        return float((b.float() - a.float()).abs_().sum(dtype=torch.float64))
    # NumPy's elementwise kernels are ~10x faster than torch's here on a small CPU
    x, y = a.numpy(), b.numpy()
    if exact:
        d = np.subtract(y, x, dtype=np.int16)
        return int(np.abs(d, out=d).sum(dtype=np.int64))
    d = np.subtract(y, x, dtype=np.float32)
    return float(np.abs(d, out=d).sum(dtype=np.float64))


class TemporalFlickering(PointwiseReward):
    """VBench temporal flickering: ``(255 - mean_i MAE(f_i, f_{i+1})) / 255``.

    Inputs: ``video`` in its native form (T, 3, H, W): uint8 for 8-bit sources (files, frame lists, uint8
    arrays), scored exactly on integers a few frames at a time (peak memory about the decoded 8-bit video),
    or a float tensor in [0, 1] at full precision; options: :class:`Options`. Range [0, 1], higher is
    steadier. A video needs at least 2 frames: one frame raises InputError (no temporal signal).
    Any change counts, motion included: VBench applies it to static-scene prompts.
    """

    inputs = Inputs(("video",), frames="native")

    class Options(FrameOptions):
        num_frames: PositiveInt | None = None
        """Frames used (null: every frame, as VBench; sampled frames measure change over a longer stride, which is
        no longer flicker)."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.num_frames = self.options.num_frames
        self.inputs = replace(self.inputs, num_frames=self.num_frames)

    def __call__(self, video: Sequence[torch.Tensor], **_: Any) -> RewardOutput:
        scores = []
        for i, frames in enumerate(video):
            check_temporal(frames, i)
            scores.append(temporal_flickering(frames))
        return RewardOutput(scores)
