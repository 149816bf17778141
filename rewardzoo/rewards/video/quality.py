"""Video quality: ``image_quality`` (a pyiqa no-reference metric, its own scale) averaged over frames, or, for the
Q-Align rows, Q-Align's own video rating (all sampled frames in one question).

- Frame average (every metric but ``qalign`` / ``qalign_aesthetic``; DeQA-Score has no video scorer):
  ``score = mean_t net(frame_t)``.
- Q-Align's video scorer (``QAlignVideoScorer``; pyiqa's ``score(videos, task_, input_="video")``):
  ``score = sum_k softmax(l)_k * w_k`` as for an image, asked ``How would you rate the {task} of this video?``
  with the visual tokens of every sampled frame in place of the one image (:meth:`.iqa_qalign.QAlignScorer.videos`).

Frames: ``num_frames`` uniformly spaced ones (the engine samples them), or Q-Align's ``load_video``: one frame a
second, frames ``int(fps * i)`` for ``i < int(T / fps)``, ``fps`` the ``fps`` option or else each video's own rate
(a file's, or the sample's ``video_fps``). The Q-Align rows sample one frame a second by default, as Q-Align's video
scorer does; ``num_frames`` given explicitly samples that many instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

import torch

from ...errors import ConfigError, InputError
from ...shared.video import float_frames
from ..base import Inputs, RewardOutput
from ..options import PositiveNumber, model_validator
from .frame_scores import FrameAverage

DEFAULT_NUM_FRAMES = 8


@runtime_checkable
class VideoRater(Protocol):
    """A network that rates whole videos (``image_quality``'s Q-Align scorer, ``QAlignScorer.videos``)."""

    def videos(self, videos: Sequence[torch.Tensor]) -> torch.Tensor: ...


def one_per_second(total: int, fps: float) -> list[int]:
    """Q-Align's ``load_video`` frame choice: ``int(fps * i)`` for ``i`` in ``range(int(total / fps))``."""
    return [int(fps * i) for i in range(int(total / fps))]


class VideoQuality(FrameAverage):
    """``image_quality`` over a video: the mean over sampled frames of ``pyiqa_net(frame_t)`` on the metric's scale,
    or, for ``metric: qalign`` / ``qalign_aesthetic``, Q-Align's video rating of all sampled frames at once (1-5).

    Inputs: ``video``. ``model_path``, ``metric`` and ``arch`` are those of ``image_quality`` (the same loaded
    instance as an equal entry); options: :class:`Options` (``frame_batch_size``: frame average only).
    """

    frame_reward = "image_quality"
    inputs = Inputs(("video",), frames="native")

    class Options(FrameAverage.Options):
        fps: PositiveNumber | None = None
        """The videos' frame rate for Q-Align's one frame a second (then ``num_frames`` stays unset or null); null:
        each video's own (a file's, or the sample's ``video_fps``), which the Q-Align rows use by default."""

        @model_validator(mode="after")
        def _fps_or_num_frames(self) -> VideoQuality.Options:
            if self.fps is not None and self.num_frames not in (None, DEFAULT_NUM_FRAMES):
                raise ConfigError(
                    f"kwargs.fps samples one frame a second as Q-Align does; drop kwargs.num_frames "
                    f"(got {self.num_frames!r}) or set it to null",
                    field="kwargs.num_frames",
                )
            return self

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.fps = self.options.fps
        if self.fps is not None:  # with fps every frame arrives
            self.num_frames = None
            self.inputs = replace(self.inputs, num_frames=None)
        # the inner image_quality's network, when its metric rates videos as one (Q-Align); else the frame average
        inner = self.image_reward
        net = getattr(inner, "net", None) if getattr(getattr(inner, "variant", None), "video", False) else None
        self.qalign = net if isinstance(net, VideoRater) else None
        # Q-Align's own video scorer: one frame a second at the video's rate, unless num_frames was chosen
        self.per_second = (
            self.qalign is not None and self.fps is None and "num_frames" not in self.options.model_fields_set
        )
        if self.per_second:
            self.num_frames = None
            self.inputs = replace(self.inputs, num_frames=None, frame_rate=True)

    def __call__(self, video: Sequence[torch.Tensor], **fields: Sequence[Any]) -> RewardOutput:
        if self.fps is not None:
            video = [self.one_per_second(v, self.fps, i) for i, v in enumerate(video)]
        elif self.per_second:
            rates = fields.pop("video_fps", None) or [None] * len(video)
            video = [self.one_per_second(v, self.rate_of(rate, i), i) for i, (v, rate) in enumerate(zip(video, rates))]
        if self.qalign is None:
            return super().__call__(video, **fields)
        for i, v in enumerate(video):
            if int(v.shape[0]) == 0:
                raise InputError("the video has no frames", reward=self.name, field="video", sample=i)
        return RewardOutput(self.qalign.videos([float_frames(v) for v in video]).tolist())

    def rate_of(self, rate: float | None, sample: int) -> float:
        """A video's own frame rate; InputError naming the sample when it has none."""
        if rate is None:
            raise InputError(
                "Q-Align's video scorer samples one frame a second and this video states no frame rate (an array or "
                "frames): give the sample's video_fps, or kwargs.fps for every video, or kwargs.num_frames",
                reward=self.name,
                field="video_fps",
                sample=sample,
            )
        return float(rate)

    def one_per_second(self, video: torch.Tensor, fps: float, sample: int) -> torch.Tensor:
        """The frames Q-Align's ``load_video`` keeps; InputError for a video shorter than a second."""
        total = int(video.shape[0])
        keep = one_per_second(total, fps)
        if not keep:
            raise InputError(
                f"{total} frames at fps {fps:g} is less than one second: Q-Align's sampling keeps a frame a "
                "second and needs at least one",
                reward=self.name,
                field="video",
                sample=sample,
            )
        return video[torch.tensor(keep)]
