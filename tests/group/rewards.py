"""Test-local base rewards for the groupwise wrappers, registered under test-only names on import.

``group_test_meta`` scores each sample with ``metadata["score"]`` and records the size of every
call it receives, so tests can count base evaluations. Imported by conftest.py and by the 2-rank
worker (dist_worker.py).
"""

from __future__ import annotations

import json
from typing import ClassVar

import numpy as np

from rewardzoo.errors import InputError
from rewardzoo.registry import register
from rewardzoo.rewards.base import Inputs, PointwiseReward, RewardOutput


@register("group_test_meta")
class MetaScore(PointwiseReward):
    """Score = metadata["score"]; counts calls and inputs."""

    inputs = Inputs(("metadata",))
    modality = "any"

    def __init__(self, model_path=None, device="cpu", dtype="float32", *, offset: float = 0.0) -> None:
        super().__init__(model_path, device, dtype)
        self.offset = offset
        self.calls: list[int] = []

    def __call__(self, metadata, **_):
        self.calls.append(len(metadata))
        values = []
        for i, m in enumerate(metadata):
            data = json.loads(m)
            if data.get("bad"):
                raise InputError("bad sample", field="metadata", sample=i)
            values.append(float(data["score"]) + self.offset)
        return RewardOutput(values, extras={"raw": values})


@register("group_test_meta_lower")
class MetaScoreLower(MetaScore):
    """Same score, declared lower-is-better (a distance, say)."""

    higher_is_better: ClassVar[bool] = False


@register("group_test_tensor_mean")
class TensorMean(PointwiseReward):
    """Mean pixel of a (3, H, W) float tensor; fails on anything else (checks the conversion)."""

    inputs = Inputs(("image",), images="float", frames="float", audio="tensor")
    modality = "image"

    def __call__(self, image, **_):
        import torch

        for img in image:
            if not (isinstance(img, torch.Tensor) and img.ndim == 3 and img.shape[0] == 3):
                raise TypeError(f"expected a (3, H, W) tensor, got {type(img).__name__}")
        return [float(img.mean()) for img in image]


@register("group_test_nan")
class NaNScore(PointwiseReward):
    inputs = Inputs(("metadata",))

    def __call__(self, metadata, **_):
        return [float("nan")] * len(metadata)


def meta_samples(groups, dataset=None):
    """[(group_id, score), ...] -> sample dicts."""
    return [{"metadata": {"score": s}, "group_id": g, **({"dataset": dataset} if dataset else {})} for g, s in groups]


@register("group_test_audio_peak")
class AudioPeak(PointwiseReward):
    """Peak |amplitude| x sample rate / 1000; needs ``audio_sample_rate`` next to ``audio``."""

    inputs = Inputs(("audio",), sample_rate=16000, mono=False)

    def __call__(self, audio, audio_sample_rate, **_):
        return [float(np.abs(a).max()) * sr / 1000 for a, sr in zip(audio, audio_sample_rate)]


@register("group_test_unsafe")
class NotThreadSafe(MetaScore):
    """Records how many calls run at once (a non-thread-safe model must never see more than one)."""

    thread_safe: ClassVar[bool] = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        import threading

        self._guard = threading.Lock()
        self.active = self.max_active = 0

    def __call__(self, metadata, **kw):
        import time

        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(0.005)
        try:
            return super().__call__(metadata, **kw)
        finally:
            with self._guard:
                self.active -= 1
