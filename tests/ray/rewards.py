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


class TinyLinear(PointwiseReward):
    """A tiny torch model on its resolved device: score = a seeded linear map of the image's mean colour, with
    the colour's norm as an extra; at construction it writes ``marker``: its device and CUDA_VISIBLE_DEVICES."""

    inputs = Inputs(("image",), images="float")
    modality = "image"

    def __init__(self, model_path=None, device="cpu", dtype="float32", marker: str = ""):
        import torch

        super().__init__(model_path, device, dtype)
        torch.manual_seed(0)
        self.model = torch.nn.Linear(3, 1).to(device)
        if marker:
            Path(marker).write_text(f"{device} {os.environ.get('CUDA_VISIBLE_DEVICES', '')}")

    def __call__(self, image, **_):
        import torch

        from rewardzoo.rewards.base import RewardOutput

        colour = torch.stack([im.reshape(3, -1).mean(1) for im in image]).float()
        with torch.no_grad():
            scores = self.model(colour.to(self.device))[:, 0].double().cpu().numpy()
        return RewardOutput(scores, {"norm": colour.norm(dim=1).double().numpy()})
