"""The reward contract: output validation, chunking with tails, order, errors naming the reward."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rewardzoo import RewardOutput, RewardProcessor, Sample
from rewardzoo.errors import RewardExecutionError, RewardOutputError
from rewardzoo.rewards.base import validate_scores

from ..optional import torch
from .rewards import Broken, MetadataValue, PromptLength, path


@pytest.mark.parametrize(
    "output",
    [
        [1.0, 2.0, 3.0],
        (1, 2, 3),
        np.array([1.0, 2.0, 3.0]),
        *([torch.tensor([1.0, 2.0, 3.0])] if torch else []),
        RewardOutput([1.0, 2.0, 3.0]),
    ],
)
def test_validate_accepts_one_score_per_input(output):
    scores, _ = validate_scores(output, 3, "r")
    np.testing.assert_array_equal(scores, [1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    "output, message",
    [
        (1.5, "bare scalar"),
        (np.float32(2.0), "bare scalar"),
        *([(torch.tensor(2.0), "bare scalar")] if torch else []),
        ([1.0, 2.0], "shape (2,) for 3 inputs"),
        ([[1.0], [2.0], [3.0]], "shape (3, 1)"),
        ([1.0, float("nan"), 3.0], "non-finite"),
        ([1.0, 2.0, float("inf")], "non-finite"),
        (["a", "b", "c"], "not numbers"),
        (None, "None"),
        (RewardOutput([1.0, 2.0, 3.0], extras={"x": [1.0]}), "extras['x']"),
    ],
)
def test_validate_rejects_bad_outputs_naming_the_reward(output, message):
    with pytest.raises(RewardOutputError, match=re.escape(message)) as info:
        validate_scores(output, 3, "my_reward")
    assert "my_reward" in str(info.value)


@pytest.mark.parametrize(
    "n, batch_size, expected", [(10, 4, [4, 4, 2]), (3, 8, [3]), (8, 8, [8]), (1, 1, [1]), (7, 1, [1] * 7)]
)
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
        np.testing.assert_array_equal(
            results[0].rewards["jpeg_incompressibility"], other.rewards["jpeg_incompressibility"]
        )


@pytest.mark.parametrize(
    "mode, error, message",
    [
        ("nan", RewardOutputError, "non-finite"),
        ("inf", RewardOutputError, "non-finite"),
        ("short", RewardOutputError, "for 4 inputs"),
        ("scalar", RewardOutputError, "bare scalar"),
        ("raise", RewardExecutionError, "ZeroDivisionError: boom"),
    ],
)
def test_processor_names_the_stream_when_a_reward_misbehaves(mode, error, message):
    proc = RewardProcessor([{"name": "flaky", "reward_model": path(Broken), "kwargs": {"mode": mode}}])
    with pytest.raises(error, match=message) as info:
        proc([Sample(prompt="a")] * 4)
    assert "'flaky'" in str(info.value)


def test_only_declared_fields_reach_the_reward():
    proc = RewardProcessor([{"name": "len", "reward_model": path(PromptLength)}])
    proc([Sample(prompt="ab", image=np.zeros((4, 4, 3), np.uint8), dataset="d", group_id=1, metadata={"a": 1})])
    assert PromptLength.seen_fields == [{"prompt"}]


# ------------------------------------------------------------------------------------- score ranges
class UnitValue(MetadataValue):
    """metadata["value"], declared in [0, 1] (a reward without a card states its range on the class)."""

    score_range = (0.0, 1.0)


def _unit_samples(values):
    return [Sample(metadata={"value": v}) for v in values]


def test_a_score_outside_the_declared_range_is_an_error_naming_the_reward():
    proc = RewardProcessor([{"name": "unit", "reward_model": path(UnitValue), "batch_size": 2}])
    with pytest.raises(
        RewardOutputError, match=r"reward 'unit'.*1\.5.*outside its declared score_range \[0\.0, 1\.0\]"
    ):
        proc(_unit_samples([0.2, 0.4, 1.5]))
    with pytest.raises(RewardOutputError, match="outside"):
        proc(_unit_samples([-0.01]))


def test_rounding_beyond_a_bound_is_set_to_the_bound():
    proc = RewardProcessor([{"name": "unit", "reward_model": path(UnitValue)}])
    result = proc(_unit_samples([1.0 + 1e-9, -1e-9, 0.5]))
    np.testing.assert_array_equal(result.rewards["unit"], np.float32([1.0, 0.0, 0.5]))


def test_the_card_range_is_what_the_engine_enforces(monkeypatch):
    from rewardzoo.rewards.audio.clipping import AudioClipping

    proc = RewardProcessor([{"name": "clip", "reward_model": "audio_clipping"}])
    assert proc.rewards["clip"].info.score_range == (0.0, 1.0) and proc.rewards["clip"].info.source == "rewardzoo"
    monkeypatch.setattr(AudioClipping, "__call__", lambda self, audio, **_: [2.0] * len(audio))
    with pytest.raises(RewardOutputError, match="reward 'clip'.*outside its declared score_range"):
        proc([Sample(audio=np.zeros((1, 100), np.float32), audio_sample_rate=16000)])


def test_an_option_that_would_leave_the_declared_range_is_refused():
    from rewardzoo.errors import ConfigError

    with pytest.raises(ConfigError, match="entry 'jpeg', field 'kwargs.scale'"):
        RewardProcessor([{"name": "jpeg", "reward_model": "jpeg_compressibility", "kwargs": {"scale": -1}}])


def test_a_group_wrapper_checks_its_base_against_the_base_range():
    proc = RewardProcessor([{"name": "rank", "reward_model": "group_rank", "kwargs": {"base": path(UnitValue)}}])
    with pytest.raises(RewardOutputError, match="base.*outside its declared score_range"):
        proc([Sample(metadata={"value": v}, group_id=0) for v in (0.1, 7.0)])
