"""Test rewards for the serving tests: slow on purpose (to fill the server's queue), slow to load, failing to load,
and held in flight until the test releases it."""

from __future__ import annotations

import time
from pathlib import Path

from rewardzoo.rewards.base import Inputs, PointwiseReward


class SlowLength(PointwiseReward):
    """Score = len(prompt), after ``delay`` seconds per call."""

    inputs = Inputs(("prompt",))
    modality = "text"

    def __init__(self, model_path=None, device="cpu", dtype="float32", delay: float = 0.3):
        super().__init__(model_path, device, dtype)
        self.delay = delay

    def __call__(self, prompt, **_):
        time.sleep(self.delay)
        return [float(len(p)) for p in prompt]


class SlowToLoad(PointwiseReward):
    """Score = len(prompt); construction takes ``load_s`` seconds (a large model loading)."""

    inputs = Inputs(("prompt",))
    modality = "text"

    def __init__(self, model_path=None, device="cpu", dtype="float32", load_s: float = 3.0):
        super().__init__(model_path, device, dtype)
        time.sleep(load_s)

    def __call__(self, prompt, **_):
        return [float(len(p)) for p in prompt]


class FailsToLoad(PointwiseReward):
    """Construction fails, as a reward with missing weights does."""

    inputs = Inputs(("prompt",))
    modality = "text"

    def __init__(self, model_path=None, device="cpu", dtype="float32"):
        super().__init__(model_path, device, dtype)
        raise FileNotFoundError("no weights at /nowhere/model.safetensors")

    def __call__(self, prompt, **_):
        raise AssertionError("never called")


class HeldLength(PointwiseReward):
    """Score = len(prompt); each call touches ``started`` and then waits (at most ``hold_s``) until ``release``
    exists: a request the test keeps in flight for as long as it needs."""

    inputs = Inputs(("prompt",))
    modality = "text"

    def __init__(
        self, model_path=None, device="cpu", dtype="float32", started: str = "", release: str = "", hold_s: float = 60.0
    ):
        super().__init__(model_path, device, dtype)
        self.started, self.release, self.hold_s = Path(started), Path(release), hold_s

    def __call__(self, prompt, **_):
        self.started.touch()
        deadline = time.monotonic() + self.hold_s
        while not self.release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return [float(len(p)) for p in prompt]


class ImageWidth(PointwiseReward):
    """Score = the image's width (PIL images: nothing converted, so the server's memory is its decoding's)."""

    inputs = Inputs(("image",), images="pil")
    modality = "image"

    def __call__(self, image, **_):
        return [float(im.width) for im in image]


class ImageMean(PointwiseReward):
    """Score = the mean of the image in [0, 1] (float images: converting holds float32 RGB, 12 bytes per pixel)."""

    inputs = Inputs(("image",), images="float")
    modality = "image"

    def __call__(self, image, **_):
        return [float(im.mean()) for im in image]
