"""Group-relative advantages: hand computations, flow_grpo's and Flow-Factory's own normalisation code."""

from __future__ import annotations

import numpy as np
import pytest

from rewardzoo import RewardProcessor, Sample, load_config
from rewardzoo.core.api import build_processors
from rewardzoo.errors import ConfigError, InputError

from ..clients import client_module
from .rewards import MetadataValue, path


def _result(values_a, values_b, groups, *, datasets=None, weights=(1.0, 0.5), gated=None):
    """Two metadata-valued rewards 'a' and 'b'; ``gated``: b applies only to dataset 'x'."""
    specs = [
        {"name": "a", "reward_model": path(MetadataValue), "weight": weights[0]},
        {"name": "b", "reward_model": path(_BValue), "weight": weights[1], "applicable_datasets": gated},
    ]
    datasets = datasets or [None] * len(groups)
    samples = [
        Sample(metadata={"value": a, "b": b}, group_id=g, dataset=d)
        for a, b, g, d in zip(values_a, values_b, groups, datasets)
    ]
    return RewardProcessor(specs)(samples)


class _BValue(MetadataValue):
    """metadata["b"]."""

    def __call__(self, metadata, **_):
        import json

        return np.array([json.loads(m)["b"] for m in metadata], dtype=np.float64)


A = [1.0, 3.0, 2.0, 7.0, 7.0, 4.0, 0.0]
B = [10.0, 0.0, 5.0, 1.0, 2.0, 9.0, 3.0]
G = [0, 0, 0, 1, 1, 1, "1"]  # "1" is its own group of one


def _hand_sum(total, groups):
    out = np.zeros(len(total))
    for g in set(map(lambda x: (type(x), x), groups)):
        idx = [i for i, k in enumerate(groups) if (type(k), k) == g]
        t = np.asarray(total)[idx]
        out[idx] = (t - t.mean()) / (t.std() + 1e-4)
    return out


def test_sum_mode_normalises_the_weighted_total_per_group():
    res = _result(A, B, G)
    total = np.array(A) + 0.5 * np.array(B)
    np.testing.assert_allclose(res.advantages("sum"), _hand_sum(total, G), rtol=1e-5, atol=1e-6)


def test_sum_mode_equals_flow_grpos_per_prompt_stat_tracker():
    stat_tracking = client_module("flow_grpo", "flow_grpo.stat_tracking")
    prompts = ["p0", "p0", "p0", "p1", "p1", "p1", "p2"]
    res = _result(A, B, G)
    tracker = stat_tracking.PerPromptStatTracker(global_std=False)
    theirs = tracker.update(prompts, res.total.astype(np.float64))
    np.testing.assert_allclose(res.advantages("sum", group_by=prompts), theirs, rtol=1e-5, atol=1e-6)


def test_gdpo_mode_by_hand():
    res = _result(A, B, G)
    groups = [[0, 1, 2], [3, 4, 5], [6]]
    combined = np.zeros(7)
    for values, w in ((np.array(A), 1.0), (np.array(B), 0.5)):
        for idx in groups:
            v = values[idx]
            combined[idx] += w * (v - v.mean()) / max(v.std(), 1e-6)
    expected = (combined - combined.mean()) / max(combined.std(), 1e-6)
    np.testing.assert_allclose(res.advantages("gdpo"), expected, rtol=1e-5, atol=1e-6)


def test_gdpo_mode_equals_flow_factorys_advantage_processor():
    pytest.importorskip("torch")
    advantage = client_module("flow_factory", "flow_factory.advantage.advantage_processor")
    import torch
    from accelerate import Accelerator

    class Sampled:  # the one attribute compute_gdpo reads from Flow-Factory's samples
        def __init__(self, unique_id):
            self.unique_id, self.extra_kwargs = unique_id, {}

    groups = [0, 0, 0, 1, 1, 1, 2, 2]
    a, b = A + [5.0], B + [4.0]
    res = _result(a, b, groups)
    processor = advantage.AdvantageProcessor(
        Accelerator(cpu=True),
        reward_weights={"a": 1.0, "b": 0.5},
        group_size=3,
        sampler_type="group_contiguous",
        verbose=False,
    )
    theirs = processor.compute_gdpo(
        [Sampled(g) for g in groups], {"a": torch.tensor(a), "b": torch.tensor(b)}, store_to_samples=False
    )
    np.testing.assert_allclose(res.advantages("gdpo"), theirs.numpy(), rtol=1e-5, atol=1e-5)


def test_abstentions_are_left_out_and_never_nan():
    # b applies only to dataset x: in group 0 it applies to two members, in group 1 to none
    datasets = ["x", "x", "y", "y", "y", "y", "y"]
    res = _result(A, B, G, datasets=datasets, gated=["x"])
    gdpo = res.advantages("gdpo")
    assert np.isfinite(gdpo).all()
    combined = np.zeros(7)
    for idx in ([0, 1, 2], [3, 4, 5], [6]):
        v = np.array(A)[idx]
        combined[idx] += (v - v.mean()) / max(v.std(), 1e-6)
    bx = np.array(B)[[0, 1]]
    combined[[0, 1]] += 0.5 * (bx - bx.mean()) / max(bx.std(), 1e-6)
    np.testing.assert_allclose(gdpo, (combined - combined.mean()) / max(combined.std(), 1e-6), rtol=1e-5, atol=1e-6)
    total = np.array(A) + np.where(np.array(datasets) == "x", 0.5 * np.array(B), 0.0)
    np.testing.assert_allclose(res.advantages("sum"), _hand_sum(total, G), rtol=1e-5, atol=1e-6)


def test_an_unscored_sample_gets_zero_and_is_left_out():
    specs = [{"name": "a", "reward_model": path(MetadataValue), "applicable_datasets": ["x"]}]
    samples = [Sample(metadata={"value": v}, group_id=0, dataset=d) for v, d in ((1.0, "x"), (3.0, "x"), (9.0, "z"))]
    res = RewardProcessor(specs)(samples)
    for mode in ("sum", "gdpo"):
        adv = res.advantages(mode)
        assert adv[2] == 0.0 and np.isfinite(adv).all()
    np.testing.assert_allclose(res.advantages("sum")[:2], [-1 / (1 + 1e-4), 1 / (1 + 1e-4)], rtol=1e-6)


def test_the_config_sets_the_default_mode_and_groups_are_required():
    cfg = load_config(
        {
            "rewards": [
                {"name": "a", "reward_model": path(MetadataValue)},
                {"name": "b", "reward_model": path(_BValue), "weight": 0.5},
            ],
            "advantage": "gdpo",
        }
    )
    train, _ = build_processors(cfg)
    res = train([Sample(metadata={"value": a, "b": b}, group_id=g) for a, b, g in zip(A, B, G)])
    np.testing.assert_array_equal(res.advantages(), res.advantages("gdpo"))
    with pytest.raises(ConfigError, match="advantage"):
        load_config({"rewards": ["loudness"], "advantage": "mean"})
    ungrouped = RewardProcessor([{"name": "a", "reward_model": path(MetadataValue)}])([Sample(metadata={"value": 1})])
    with pytest.raises(InputError, match="group"):
        ungrouped.advantages()
    np.testing.assert_array_equal(ungrouped.advantages(group_by=["p"]), [0.0])
