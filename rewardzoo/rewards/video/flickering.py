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

from ...shared.video import check_num_frames, check_temporal
from ..base import Inputs, PointwiseReward, RewardOutput


def temporal_flickering(video: torch.Tensor) -> float:
    """VBench flickering score of a float video (T, C, H, W) in [0, 1], T >= 2 (see module docstring)."""
    video = video.detach()
    if video.device.type != "cpu":
        mae = (video[1:] - video[:-1]).abs().mean(dtype=torch.float64)
    else:  # NumPy's elementwise kernels are ~10x faster than torch's here on a small CPU
        arr = video.float().numpy()
        mae = np.abs(arr[1:] - arr[:-1]).mean(dtype=np.float64)
    # the mean over all pairs equals the mean of per-pair MAEs (every pair has the same size)
    return float(1.0 - mae)  # (255 - 255 * mae) / 255


class TemporalFlickering(PointwiseReward):
    """VBench temporal flickering: ``(255 - mean_i MAE(f_i, f_{i+1})) / 255``.

    Inputs: ``video`` as a float tensor (T, 3, H, W) in [0, 1] (files, frame lists and arrays are
    converted). ``num_frames``: frames used (default None = every frame, as VBench; sampled frames
    measure change over a longer stride, which is no longer flicker). Range [0, 1], higher is
    steadier. A video needs at least 2 frames: one frame raises InputError (no temporal signal).
    Any change counts, motion included: VBench applies it to static-scene prompts.
    """

    inputs = Inputs(("video",), frames="float")

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        *,
        num_frames: int | None = None,
    ) -> None:
        super().__init__(model_path, device, dtype)
        self.num_frames = check_num_frames(num_frames)
        self.inputs = replace(self.inputs, num_frames=self.num_frames)

    def __call__(self, video: Sequence[torch.Tensor], **_: Any) -> RewardOutput:
        scores = []
        for i, frames in enumerate(video):
            check_temporal(frames, i)
            scores.append(temporal_flickering(frames))
        return RewardOutput(scores)
