"""Weight schedules (``weight: {schedule: linear|cosine|step, ...}``): strict parsing, and the weight each
sample gets at the trainer's step against the formulas written out here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewardzoo.core.processor import RewardProcessor
from rewardzoo.core.resolve import load_config
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.spec.sample import Sample

LENGTH = "tests.no_extras.rewards:PromptLength"


def expected(kind: str, start: float, end: float, steps: int, after: int, step: int) -> float:
    """The schedule formulas, independently: hold ``start`` until ``after``, reach ``end`` at ``after + steps``."""
    if step <= after:
        return start
    if step >= after + steps:
        return end
    frac = (step - after) / steps
    if kind == "linear":
        return start + frac * (end - start)
    if kind == "cosine":
        return start + (end - start) * (1 - math.cos(math.pi * frac)) / 2
    return start


@pytest.mark.parametrize("kind", ["linear", "cosine", "step"])
@pytest.mark.parametrize("after", [0, 7])
def test_each_sample_gets_the_scheduled_weight_at_the_step(kind, after):
    start, end, steps = 0.25, 2.0, 20
    config = load_config(
        {
            "rewards": [
                {"name": "fixed", "reward_model": LENGTH},
                {
                    "name": "ramp",
                    "reward_model": LENGTH,
                    "kwargs": {"factor": 2.0},
                    "weight": {"schedule": kind, "start": start, "end": end, "steps": steps, "after": after},
                },
            ]
        }
    )
    prompts = ["a", "abc", "abcdef"]
    with RewardProcessor(config.rewards) as processor:
        for step in [0, 3, after, after + 1, after + 5, after + 10, after + 19, after + 20, after + 500]:
            result = processor([Sample(prompt=p) for p in prompts], step=step)
            w = expected(kind, start, end, steps, after, step)
            assert result.step == step
            np.testing.assert_allclose(result.weights["ramp"], [w] * 3, rtol=1e-6)
            np.testing.assert_allclose(result.weights["fixed"], [1.0] * 3)
            lengths = np.array([len(p) for p in prompts], dtype=np.float64)
            np.testing.assert_allclose(result.total, lengths + w * 2 * lengths, rtol=1e-6)


def test_per_dataset_schedules_and_numbers():
    config = load_config(
        {
            "rewards": [
                {
                    "name": "len",
                    "reward_model": LENGTH,
                    "applicable_datasets": ["a", "b"],
                    "weight": {"a": {"schedule": "linear", "start": 0, "end": 1, "steps": 10}, "b": 3},
                }
            ]
        }
    )
    with RewardProcessor(config.rewards) as processor:
        result = processor(
            [Sample(prompt="xx", dataset="a"), Sample(prompt="xx", dataset="b"), Sample(prompt="xx", dataset="c")],
            step=4,
        )
    np.testing.assert_allclose(result.weights["len"], [0.4, 3.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose(result.total[:2], [0.8, 6.0], rtol=1e-6)
    assert np.isnan(result.total[2])


def test_a_scheduled_weight_without_a_step_is_an_error_naming_the_entry():
    config = load_config(
        {
            "rewards": [
                {
                    "name": "ramp",
                    "reward_model": LENGTH,
                    "weight": {"schedule": "cosine", "start": 0, "end": 1, "steps": 5},
                }
            ]
        }
    )
    with RewardProcessor(config.rewards) as processor:
        with pytest.raises(ConfigError, match="ramp.*weight.*step") as info:
            processor([Sample(prompt="x")])
        assert info.value.entry == "ramp"
        with pytest.raises(InputError, match="step"):
            processor([Sample(prompt="x")], step=-1)
        with pytest.raises(InputError, match="step"):
            processor([Sample(prompt="x")], step=1.5)


@pytest.mark.parametrize(
    "weight, field, message",
    [
        ({"schedule": "exp", "start": 0, "end": 1, "steps": 5}, "weight.schedule", "linear, cosine, step"),
        ({"schedule": "linear", "start": 0, "steps": 5}, "weight.end", "needs 'end'"),
        ({"schedule": "linear", "start": 0, "end": 1, "steps": 0}, "weight.steps", "positive integer"),
        ({"schedule": "linear", "start": 0, "end": 1, "steps": 2.5}, "weight.steps", "positive integer"),
        ({"schedule": "linear", "start": 0, "end": 1, "steps": 5, "after": -1}, "weight.after", "non-negative integer"),
        ({"schedule": "linear", "start": "x", "end": 1, "steps": 5}, "weight.start", "finite number"),
        ({"schedule": "linear", "start": 0, "end": float("nan"), "steps": 5}, "weight.end", "finite number"),
        (
            {"schedule": "linear", "start": 0, "end": 1, "steps": 5, "step": 3},
            "weight.step",
            "unknown key 'step'.*did you mean 'steps'",
        ),
        ({"t2i": {"schedule": "cosine", "start": 0, "end": 1}}, "weight.t2i.steps", "needs 'steps'"),
    ],
)
def test_bad_schedules_name_the_entry_and_field(weight, field, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config({"rewards": [{"name": "ramp", "reward_model": LENGTH, "weight": weight}]})
    assert info.value.entry == "ramp" and info.value.field == field


def test_the_json_schema_accepts_a_schedule():
    jsonschema = pytest.importorskip("jsonschema")
    from rewardzoo.spec.config import json_schema

    ok = {
        "rewards": [
            {"name": "a", "weight": {"schedule": "step", "start": 1, "end": 0, "steps": 100, "after": 5}},
            {"name": "b", "weight": {"x": {"schedule": "linear", "start": 0, "end": 1, "steps": 3}}},
        ]
    }
    jsonschema.validate(ok, json_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"rewards": [{"name": "a", "weight": {"schedule": "exp", "start": 1, "end": 0, "steps": 1}}]}, json_schema()
        )
