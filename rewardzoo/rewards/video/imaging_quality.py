"""Video imaging quality: the mean over frames of ``imaging_quality`` (MUSIQ through pyiqa, /100).

The per-frame computation is VBench's (``vbench/imaging_quality.py``): 8-bit values as float 0-255,
the ``longer`` resize to 512 without antialias, /255, pyiqa's MUSIQ. ``preset: vbench`` scores every
frame as VBench does; the default samples ``num_frames`` (8) uniformly, like the other frame averages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ...shared.video import float_frames, frame_batches
from ..base import Inputs, RewardOutput
from .frame_scores import FrameAverage


class VideoImagingQuality(FrameAverage):
    """Mean over sampled frames of ``imaging_quality``: ``mean_t MUSIQ(resize(frame_t)) / 100``, about 0-1.

    Inputs: ``video``. ``num_frames`` (default 8; null = all), ``frame_batch_size``; ``preset: vbench``:
    every frame, as VBench's imaging quality. ``model_path``, ``resize`` and ``arch`` are those of
    ``imaging_quality`` (default pyiqa's ``musiq-spaq`` checkpoint, VBench's). Range unbounded, about 0-1.
    """

    frame_reward = "imaging_quality"
    inputs = Inputs(("video",), frames="native")

    def vbench(self, video: Sequence[torch.Tensor], **_: Any) -> RewardOutput:
        """VBench imaging quality: every frame through the image reward's MUSIQ (VBench's preprocessing),
        the per-video mean of the 0-100 scores, divided by 100 (VBench divides the mean over videos;
        the division is linear, so each video's share is the same)."""
        musiq = self.inner_part("musiq")
        scores = []
        for frames in video:
            parts = [musiq(float_frames(chunk)) for chunk in frame_batches(frames, self.frame_batch_size)]
            scores.append(float(torch.cat(parts).mean()) / 100.0)
        return RewardOutput(scores)
