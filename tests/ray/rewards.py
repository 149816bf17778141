"""Test rewards of the Ray engine tests: one that kills its own actor once, one that is slow."""

from __future__ import annotations

import os
import time
from pathlib import Path

from rewardzoo.rewards.base import Inputs, PointwiseReward


class KillOnce(PointwiseReward):
    """Score = len(prompt); the first call anywhere (no ``marker`` file yet) creates the marker and kills its process."""

    inputs = Inputs(("prompt",))
    modality = "text"

    def __init__(self, model_path=None, device="cpu", dtype="float32", marker: str = ""):
        super().__init__(model_path, device, dtype)
        self.marker = marker

    def __call__(self, prompt, **_):
        if not Path(self.marker).exists():
            Path(self.marker).write_text("killed")
            os._exit(1)
        return [float(len(p)) for p in prompt]


class SlowLength(PointwiseReward):
    """Score = len(prompt), after ``delay`` seconds per call."""

    inputs = Inputs(("prompt",))
    modality = "text"

    def __init__(self, model_path=None, device="cpu", dtype="float32", delay: float = 0.2):
        super().__init__(model_path, device, dtype)
        self.delay = delay

    def __call__(self, prompt, **_):
        time.sleep(self.delay)
        return [float(len(p)) for p in prompt]
