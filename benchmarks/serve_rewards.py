"""Rewards whose calls cost a fixed time whatever their size, as a GPU model below saturation or a served judge
does: ``FixedCostPerCall`` (images) for ``bench_serve.py``'s batching figure, ``FixedCostText`` (prompts) for
``bench_overlap.py``'s served judge."""

from __future__ import annotations

import time

import numpy as np

from rewardzoo.rewards.base import Inputs, PointwiseReward


class FixedCostPerCall(PointwiseReward):
    """Score = mean pixel value / 255, in [0, 1], after ``call_ms`` milliseconds per call."""

    inputs = Inputs(("image",))
    score_range = (0.0, 1.0)

    def __init__(self, model_path=None, device="cpu", dtype="float32", call_ms: float = 20.0):
        super().__init__(model_path, device, dtype)
        self.call_s = call_ms / 1000

    def __call__(self, image, **_):
        time.sleep(self.call_s)
        return [float(np.asarray(img).mean()) / 255 for img in image]


class FixedCostText(PointwiseReward):
    """Score = len(prompt), after ``call_ms`` milliseconds per call (a served judge's latency, text only)."""

    inputs = Inputs(("prompt",))

    def __init__(self, model_path=None, device="cpu", dtype="float32", call_ms: float = 300.0):
        super().__init__(model_path, device, dtype)
        self.call_s = call_ms / 1000

    def __call__(self, prompt, **_):
        time.sleep(self.call_s)
        return [float(len(p)) for p in prompt]
