"""DDPO-style ``reward_fn(images, prompts, prompt_metadata) -> (rewards, metadata)`` (kvablack/ddpo-pytorch,
TRL's former DDPOTrainer)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core.loader import RewardLoader
from ..core.processor import RewardProcessor
from .common import ConfigSource, image_samples, require_scored, specs_of


def ddpo_reward_fn(
    config: ConfigSource, split: str = "train", loader: RewardLoader | None = None, *, dataset_key: str | None = None
) -> Callable[..., tuple[np.ndarray, dict]]:
    """``reward_fn(images, prompts, prompt_metadata) -> (total (B,) float32, {"rewards": ..., "applied": ...})``.

    ``images``: float (B, 3, H, W) in [0, 1] (tensor or array) or a list of images. ``dataset_key``: the
    key of ``prompt_metadata`` that holds each sample's dataset (for ``applicable_datasets`` routing).
    Every image must get at least one reward (DDPO has no notion of "not applicable"): a sample no
    reward applies to is an error. Use: ``config.reward_fn = rewardzoo.integrations.ddpo_reward_fn("r.yaml")``.
    """
    processor = RewardProcessor(specs_of(config, split), loader or RewardLoader())

    def reward_fn(images, prompts, prompt_metadata=None):
        result = processor(image_samples(images, prompts, prompt_metadata, dataset_key))
        require_scored(result)
        return result.total, {"rewards": result.rewards, "applied": result.applied}

    reward_fn.processor = processor  # type: ignore[attr-defined]  # (its rewards, their residency)
    return reward_fn
