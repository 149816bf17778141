"""Model-free rewards for the per-sample adapters' tests (``reward_model: tests.integrations.per_sample_rewards:NAME``),
importable in the verl test environment too (numpy and rewardzoo only)."""

from __future__ import annotations

import numpy as np

from rewardzoo.rewards.base import GroupwiseReward, Inputs, PointwiseReward, RewardOutput


def words(text: str) -> float:
    """The tests' independent computation: whitespace-separated words."""
    return float(len(text.split()))


class Words(PointwiseReward):
    """Words in the completion; the size of the call it was scored in as the extra ``batch``. A completion
    holding the word ``fail_on`` raises (a backend failing on one sample)."""

    inputs = Inputs(("completion",))
    score_range = (0.0, 1e6)

    def __init__(self, model_path=None, device="cpu", dtype="float32", fail_on: str = "boom"):
        super().__init__(model_path, device, dtype)
        self.fail_on = fail_on

    def __call__(self, completion):
        if any(self.fail_on in c.split() for c in completion):
            raise ValueError("this completion explodes")
        return RewardOutput([words(c) for c in completion], {"batch": np.full(len(completion), len(completion), float)})


class CentredWords(GroupwiseReward):
    """Words in the completion minus the mean over its group."""

    inputs = Inputs(("completion", "group_id"))

    def __call__(self, completion, group_id):
        counts = np.array([words(c) for c in completion])
        return counts - counts.mean()
