"""ImageReward through the ``image-reward`` package's own API (``ImageReward.load``, ``model.score``), for the
environment :data:`~rewardzoo.rewards.references.IMAGE_REWARD` names (the package does not import beside
transformers 5)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

from ...shared.media import to_pil_rgb
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import check_pairs


class ReferenceImageReward(PointwiseReward):
    """The package's ``ImageReward.score(prompt, image)``, one sample at a time as the package scores.

    ``model_path``: a directory holding ``ImageReward.pt`` and ``med_config.json`` (rewardzoo's
    ``image_reward`` reads the same directory), or None for the package's own download of
    ``ImageReward-v1.0``. Inputs ``image`` and ``prompt``; the same normalised score as ``image_reward``. The
    package runs in float32 as published (``dtype`` is not applied); :meth:`load_model` is the one place that
    builds the model (the tests build the package's model around tiny weights there).
    """

    inputs = Inputs(("image", "prompt"))
    modality: ClassVar[str] = "image"
    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float]] = (float("-inf"), float("inf"))

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32") -> None:
        super().__init__(model_path, device, dtype)
        self.model = self.load_model(model_path, device)

    def load_model(self, model_path: str | None, device: str) -> Any:
        """The package's model, loaded by the package (``ImageReward.load``)."""
        import ImageReward as RM

        if model_path is None:
            return RM.load("ImageReward-v1.0", device=device)
        return RM.load(
            os.path.join(model_path, "ImageReward.pt"),
            device=device,
            med_config=os.path.join(model_path, "med_config.json"),
        )

    def __call__(self, image: Sequence[Any], prompt: Sequence[str], **_: Any) -> RewardOutput:
        import torch

        check_pairs(image=image, prompt=prompt)
        with torch.no_grad():
            return RewardOutput([float(self.model.score(p, to_pil_rgb(img))) for p, img in zip(prompt, image)])
