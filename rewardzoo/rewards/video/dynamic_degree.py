"""VBench dynamic degree: how much the video moves, from RAFT optical flow between consecutive frames.

Per frame pair (VBench's steps, reimplemented): the two frames as float 0-255 tensors, padded with
edge replication to multiples of 8 (centred, as RAFT's ``InputPadder``), RAFT flow (20 refinement
iterations), the flow magnitude ``sqrt(u^2 + v^2)`` at every pixel of the padded frame, and the mean of
its largest ``int(0.05 * H * W)`` values. VBench's verdict: with ``thres = 6 * min(H, W) / 256`` and
``count_num = round(4 * n / 16)`` (n = frames used), the video moves when at least ``count_num`` pairs
exceed ``thres`` (checked pair by pair as VBench does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

from ...errors import ConfigError, InputError
from ...shared.heap import release_heap
from ...shared.video import check_temporal
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import PositiveInt, PositiveNumber, RewardOptions
from .vbench import to_vbench_range

RAFT_ITERS = 20  # VBench calls RAFT with iters=20


def pad_to_8(image1: torch.Tensor, image2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Replicate-pad (N, 3, H, W) images to multiples of 8, centred (RAFT's InputPadder, 'sintel' mode)."""
    h, w = image1.shape[-2:]
    pad_h = (((h // 8) + 1) * 8 - h) % 8
    pad_w = (((w // 8) + 1) * 8 - w) % 8
    pad = [pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2]
    return F.pad(image1, pad, mode="replicate"), F.pad(image2, pad, mode="replicate")


def top5_mean_magnitude(flow: torch.Tensor) -> float:
    """Mean of the largest 5 % (``int(0.05 * H * W)``) flow magnitudes of one flow field (2, H, W)."""
    rad = torch.sqrt(flow[0].double() ** 2 + flow[1].double() ** 2).flatten()
    cut = int(rad.numel() * 0.05)
    return float(torch.sort(rad, descending=True).values[:cut].mean())


def moves(scores: Sequence[float], height: int, width: int, count: int) -> bool:
    """VBench's verdict for per-pair scores of a video with ``count`` frames of ``height x width``."""
    thres = 6.0 * (min(height, width) / 256.0)
    count_num = round(4 * (count / 16.0))
    hits = 0
    for s in scores:
        if s > thres:
            hits += 1
        if hits >= count_num:
            return True
    return False


def frame_stride(fps: float | None) -> int:
    """VBench keeps every ``max(1, round(fps / 8))``-th frame (about 8 frames a second); every frame without fps."""
    return 1 if fps is None else max(1, round(fps / 8))


class DynamicDegree(PointwiseReward):
    """VBench dynamic degree on torchvision RAFT flow; score = mean over frame pairs of the top-5 % flow magnitude.

    ``model_path``: a local torchvision RAFT state dict (``.pth`` / ``.safetensors``) for ``arch``; options:
    :class:`Options`. Extras: ``dynamic`` (VBench's binary verdict, 1.0 / 0.0),
    ``threshold``. Range [0, inf) pixels; higher = more motion.
    """

    inputs = Inputs(("video",), frames="native")

    class Options(RewardOptions):
        arch: Literal["large", "small"] = "large"
        """The RAFT architecture of ``model_path``: ``large`` (VBench's RAFT) or ``small``."""
        fps: PositiveNumber | None = None
        """The videos' frame rate: keep every ``max(1, round(fps / 8))``-th frame as VBench does; null: every frame
        given."""
        iters: PositiveInt = RAFT_ITERS
        """RAFT's flow updates per pair (VBench: 20)."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        arch, fps = self.options.arch, self.options.fps
        if not model_path:
            raise ConfigError(
                "video_dynamic_degree needs model_path: a torchvision RAFT state dict "
                "(e.g. Raft_Large_Weights.C_T_V1 saved with torch.save)",
                field="model_path",
            )
        from torchvision.models.optical_flow import raft_large, raft_small

        from ...shared.weights import load_state_dict, loading, strip_prefix

        self.fps = fps
        # the frames VBench keeps are all a file's decoding converts and holds (a 30 fps clip: a quarter of them)
        self.inputs = replace(self.inputs, frame_step=frame_stride(fps))
        self.iters = self.options.iters
        model = (raft_large if arch == "large" else raft_small)(weights=None, progress=False)
        with loading(f"a torchvision RAFT-{arch} state dict from '{model_path}'"):
            state = strip_prefix(load_state_dict(model_path), ("module.",))
            model.load_state_dict(state, strict=True)
        self.model = self.hold(model.to(self.device, self.dtype).eval())

    def pair_scores(self, frames: torch.Tensor) -> list[float]:
        """Top-5 % flow magnitude of each consecutive pair of frames (T, 3, H, W), uint8 or float in [0, 1];
        each frame becomes VBench's 0-255 floats when its pair comes (never the whole video at once)."""
        out: list[float] = []
        prev = None
        for t in range(int(frames.shape[0])):
            cur = to_vbench_range(frames[t : t + 1].to(self.device))
            a, prev = prev, cur
            if a is None:
                continue
            i1, i2 = pad_to_8(a, cur)
            # torchvision's RAFT takes images in [-1, 1]: the same 2 * (x / 255) - 1 VBench's RAFT applies inside
            # only the last of the num_flow_updates flows is scored: the others (each the size of a float frame pair)
            # are dropped before the next pair's forward instead of living through it
            flow = self.model(
                (2 * (i1 / 255.0) - 1).to(self.dtype),
                (2 * (i2 / 255.0) - 1).to(self.dtype),
                num_flow_updates=self.iters,
            )[-1]
            out.append(top5_mean_magnitude(flow[0].float()))
            del flow, i1, i2, a
            # RAFT's buffers differ in size from pair to pair: glibc would keep the freed ones fragmented and the
            # process would grow over the pairs (0.2 GB over one pair's 1.9 GB at 720p, 7 pairs); a pair takes seconds
            release_heap()
        return out

    @torch.inference_mode()
    def __call__(self, video: Sequence[torch.Tensor], **_: Any) -> RewardOutput:
        scores, verdicts, thresholds = [], [], []
        for i, frames in enumerate(video):  # every frame_stride(fps)-th frame (self.inputs.frame_step)
            check_temporal(frames, i)
            if min(frames.shape[-2:]) < 121:  # padded to 128: RAFT's correlation pyramid needs 128 a side
                raise InputError(
                    f"RAFT needs frames of at least 128 pixels a side after padding to a multiple of "
                    f"8, got {tuple(frames.shape[-2:])}",
                    field="video",
                    sample=i,
                )
            per_pair = self.pair_scores(frames)
            h, w = frames.shape[-2:]
            scores.append(float(np.mean(per_pair)))
            verdicts.append(1.0 if moves(per_pair, int(h), int(w), int(frames.shape[0])) else 0.0)
            thresholds.append(6.0 * min(int(h), int(w)) / 256.0)
        return RewardOutput(scores, extras={"dynamic": verdicts, "threshold": thresholds})
