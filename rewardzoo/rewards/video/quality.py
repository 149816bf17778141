"""Video quality: the mean over frames of ``image_quality`` (a pyiqa no-reference metric, its own scale)."""

from __future__ import annotations

from ..base import Inputs
from .frame_scores import FrameAverage


class VideoQuality(FrameAverage):
    """Mean over sampled frames of ``image_quality``: ``mean_t pyiqa_net(frame_t)`` on the metric's scale.

    Inputs: ``video``. ``num_frames`` (default 8; null = all), ``frame_batch_size``. ``model_path``,
    ``metric`` and ``arch`` are those of ``image_quality`` (the same loaded instance as an equal entry).
    """

    frame_reward = "image_quality"
    inputs = Inputs(("video",), frames="float")
