"""The reward contract: output validation, chunking with tails, order, errors naming the reward."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from core_rewards import Broken, PromptLength, path

from rewardzoo import RewardOutput, RewardProcessor, Sample
from rewardzoo.errors import RewardExecutionError, RewardOutputError
from rewardzoo.rewards.base import validate_scores


@pytest.mark.parametrize("output", [[1.0, 2.0, 3.0], (1, 2, 3), np.array([1.0, 2.0, 3.0]),
                                    torch.tensor([1.0, 2.0, 3.0]), RewardOutput([1.0, 2.0, 3.0])])
def test_validate_accepts_one_score_per_input(output):
    scores, _ = validate_scores(output, 3, "r")
    np.testing.assert_array_equal(scores, [1.0, 2.0, 3.0])


@pytest.mark.parametrize("output, message", [
    (1.5, "bare scalar"), (np.float32(2.0), "bare scalar"), (torch.tensor(2.0), "bare scalar"),
    ([1.0, 2.0], "shape (2,) for 3 inputs"), ([[1.0], [2.0], [3.0]], "shape (3, 1)"),
    ([1.0, float("nan"), 3.0], "non-finite"), ([1.0, 2.0, float("inf")], "non-finite"),
    (["a", "b", "c"], "not numbers"), (None, "None"),
    (RewardOutput([1.0, 2.0, 3.0], extras={"x": [1.0]}), "extras['x']"),
])
def test_validate_rejects_bad_outputs_naming_the_reward(output, message):
    with pytest.raises(RewardOutputError, match=re.escape(message)) as info:
        validate_scores(output, 3, "my_reward")
    assert "my_reward" in str(info.value)


@pytest.mark.parametrize("n, batch_size, expected", [(10, 4, [4, 4, 2]), (3, 8, [3]), (8, 8, [8]), (1, 1, [1]),
                                                     (7, 1, [1] * 7)])
def test_pointwise_chunks_include_tails_and_keep_order(n, batch_size, expected):
    proc = RewardProcessor([{"name": "len", "reward_model": path(PromptLength), "batch_size": batch_size}])
    prompts = ["x" * (k * 7 % 11 + 1) for k in range(n)]
    result = proc([Sample(prompt=p) for p in prompts])
    assert PromptLength.calls == expected
    np.testing.assert_array_equal(result.rewards["len"], [len(p) for p in prompts])
    assert result.rewards["len"].dtype == np.float32


def test_scores_do_not_depend_on_batch_size():
    rng = np.random.default_rng(1)
    samples = [Sample(image=rng.random((24 + k, 32, 3)).astype(np.float32) * (k / 9), prompt="p") for k in range(9)]
    results = [RewardProcessor([{"name": "jpeg_incompressibility", "batch_size": b}])(samples) for b in (1, 3, 64)]
    for other in results[1:]:
        np.testing.assert_array_equal(results[0].rewards["jpeg_incompressibility"],
                                      other.rewards["jpeg_incompressibility"])


@pytest.mark.parametrize("mode, error, message", [
    ("nan", RewardOutputError, "non-finite"), ("inf", RewardOutputError, "non-finite"),
    ("short", RewardOutputError, "for 4 inputs"), ("scalar", RewardOutputError, "bare scalar"),
    ("raise", RewardExecutionError, "ZeroDivisionError: boom"),
])
def test_processor_names_the_stream_when_a_reward_misbehaves(mode, error, message):
    proc = RewardProcessor([{"name": "flaky", "reward_model": path(Broken), "kwargs": {"mode": mode}}])
    with pytest.raises(error, match=message) as info:
        proc([Sample(prompt="a")] * 4)
    assert "'flaky'" in str(info.value)


def test_only_declared_fields_reach_the_reward():
    proc = RewardProcessor([{"name": "len", "reward_model": path(PromptLength)}])
    proc([Sample(prompt="ab", image=np.zeros((4, 4, 3), np.uint8), dataset="d", group_id=1, metadata={"a": 1})])
    assert PromptLength.seen_fields == [{"prompt"}]
