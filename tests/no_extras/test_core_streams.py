"""Named streams (rewardzoo.core.streams): the config's ``streams:``, the total and the advantages they give,
checked against the formulas re-computed here in NumPy, and one model call per batch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewardzoo import RewardProcessor, Sample, load_config
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.base import Inputs, PointwiseReward, RewardOutput
from rewardzoo.spec.config import StreamSpec, json_schema, parse_spec

PATH = "tests.no_extras.test_core_streams:ThreeAxes"


class ThreeAxes(PointwiseReward):
    """A multi-output reward: the prompt "a,b,c" gives the streams a, b, c (c may be "nan") and the score
    a + b; counts its calls."""

    inputs = Inputs(("prompt",))
    modality = "text"
    score_range = (-math.inf, math.inf)
    streams = ("a", "b", "c")
    calls: list[int] = []

    def __call__(self, prompt, **_):
        type(self).calls.append(len(prompt))
        values = np.array([[float(x) for x in p.split(",")] for p in prompt])
        return RewardOutput(values[:, 0] + values[:, 1], extras={k: values[:, i] for i, k in enumerate("abc")})


def batch(rng, groups=3, size=4):
    values = rng.normal(size=(groups * size, 3)) * [1.0, 3.0, 0.5] + [2.0, -1.0, 0.0]
    samples = [
        Sample(prompt=",".join(f"{v:.6f}" for v in row), group_id=f"g{i // size}") for i, row in enumerate(values)
    ]
    return samples, np.array([[float(f"{v:.6f}") for v in row] for row in values]), np.arange(len(values)) // size


def z_population(v, groups):
    out = np.zeros(len(v))
    for g in np.unique(groups):
        m = groups == g
        out[m] = (v[m] - v[m].mean()) / max(v[m].std(), 1e-6)
    return out


def z_unbiased(v, groups):  # Pref-GRPO's _compute_adv: (x - mean) / (torch std (unbiased) + 1e-8)
    out = np.zeros(len(v))
    for g in np.unique(groups):
        m = groups == g
        x = v[m]
        out[m] = (x - x.mean()) / (math.sqrt(((x - x.mean()) ** 2).sum() / (len(x) - 1)) + 1e-8)
    return out


ENTRY = {
    "name": "axes",
    "reward_model": PATH,
    "weight": 2.0,
    "streams": {
        "a": {"weight": 1.0, "normalize": "group"},
        "b": {"weight": 0.5, "normalize": "group_unbiased"},
        "c": 3.0,
    },
}


def test_the_total_and_sum_advantages_are_the_formula_recomputed_with_one_call_per_batch():
    rng = np.random.default_rng(0)
    samples, v, groups = batch(rng)
    ThreeAxes.calls.clear()
    proc = RewardProcessor([dict(ENTRY, batch_size=64), {"name": "plain", "reward_model": PATH, "weight": 0.25}])
    result = proc(samples)
    assert ThreeAxes.calls == [12, 12]  # one call per entry: the streams cost no second forward
    normalised = 2.0 * (1.0 * z_population(v[:, 0], groups) + 0.5 * z_unbiased(v[:, 1], groups))
    raw = 2.0 * 3.0 * v[:, 2] + 0.25 * (v[:, 0] + v[:, 1])
    np.testing.assert_allclose(result.total, raw + normalised, rtol=1e-5, atol=1e-5)
    for k, name in enumerate("abc"):
        np.testing.assert_allclose(result.streams["axes"][name], v[:, k], rtol=1e-6)
    np.testing.assert_allclose(result.rewards["axes"], v[:, 0] + v[:, 1], rtol=1e-5)  # the score itself stays
    # sum: the not-yet-normalised part normalised in its group (flow_grpo's), the normalised streams added as they are
    raw_adv = np.zeros(len(raw))
    for g in np.unique(groups):
        m = groups == g
        raw_adv[m] = (raw[m] - raw[m].mean()) / (raw[m].std() + 1e-4)
    np.testing.assert_allclose(result.advantages("sum"), raw_adv + normalised, rtol=1e-4, atol=1e-4)


def test_results_combined_by_an_adapter_or_cut_into_rows_keep_their_streams():
    from rewardzoo.integrations.common import combined_result
    from rewardzoo.integrations.gather import result_row

    rng = np.random.default_rng(2)
    samples, v, groups = batch(rng)
    parts = [RewardProcessor([ENTRY])(samples), RewardProcessor([{"name": "plain", "reward_model": PATH}])(samples)]
    result = combined_result(parts)  # as an adapter's per-function results are put back together
    normalised = 2.0 * (1.0 * z_population(v[:, 0], groups) + 0.5 * z_unbiased(v[:, 1], groups))
    raw = 2.0 * 3.0 * v[:, 2] + (v[:, 0] + v[:, 1])
    raw_adv = np.zeros(len(raw))
    for g in np.unique(groups):
        m = groups == g
        raw_adv[m] = (raw[m] - raw[m].mean()) / (raw[m].std() + 1e-4)
    np.testing.assert_allclose(result.advantages("sum"), raw_adv + normalised, rtol=1e-4, atol=1e-4)
    row = result_row(result, 5)
    np.testing.assert_allclose(row.streams["axes"]["b"], v[5:6, 1], rtol=1e-6)
    assert row.stream_settings == result.stream_settings


def test_gdpo_treats_each_stream_as_a_reward_of_its_own():
    rng = np.random.default_rng(1)
    samples, v, groups = batch(rng)
    result = RewardProcessor([ENTRY, {"name": "plain", "reward_model": PATH, "weight": 0.25}])(samples)
    combined = (
        2.0 * 1.0 * z_population(v[:, 0], groups)
        + 2.0 * 0.5 * z_population(v[:, 1], groups)
        + 2.0 * 3.0 * z_population(v[:, 2], groups)
        + 0.25 * z_population(v[:, 0] + v[:, 1], groups)
    )
    want = (combined - combined.mean()) / max(combined.std(), 1e-6)
    np.testing.assert_allclose(result.advantages("gdpo"), want, rtol=1e-4, atol=1e-4)


def test_a_missing_stream_value_abstains_from_its_group_statistics():
    samples = [Sample(prompt=p, group_id="g") for p in ("1,0,1", "2,0,nan", "4,0,3", "7,0,8")]
    entry = {"name": "axes", "reward_model": PATH, "streams": {"c": {"normalize": "group"}}}
    result = RewardProcessor([entry])(samples)
    c = np.array([1.0, 3.0, 8.0])
    z = (c - c.mean()) / c.std()
    np.testing.assert_allclose(result.total, [z[0], np.nan, z[1], z[2]], rtol=1e-5)


def test_an_unknown_stream_names_the_entry_the_stream_and_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        RewardProcessor([{"name": "axes", "reward_model": PATH, "streams": {"alignmnet": 1.0}}])
    text = str(err.value)
    assert "axes" in text and "alignmnet" in text and "a, b, c" in text and err.value.field == "streams.alignmnet"
    with pytest.raises(ConfigError, match="no named streams"):
        RewardProcessor([{"name": "p", "reward_model": "tests.no_extras.rewards:PromptLength", "streams": {"x": 1}}])


@pytest.mark.parametrize(
    ("streams", "field"),
    [
        ({"a": {"weight": "high"}}, "streams.a.weight"),
        ({"a": {"normalize": "batch"}}, "streams.a.normalize"),
        ({"a": {"wieght": 1}}, "streams.a.wieght"),
        ({"a": [1]}, "streams.a"),
        ({}, "streams"),
        ([1, 2], "streams"),
    ],
)
def test_bad_stream_settings_are_config_errors_naming_the_entry_and_field(streams, field):
    with pytest.raises(ConfigError) as err:
        parse_spec({"name": "axes", "reward_model": PATH, "streams": streams})
    assert err.value.field == field and "axes" in str(err.value)


def test_streams_parse_from_yaml_and_the_schema_knows_them(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "rewards:\n  - name: axes\n    reward_model: " + PATH + "\n"
        "    streams: {a: {weight: 1.0, normalize: group}, b: 0.5}\n"
    )
    spec = load_config(path).rewards[0]
    assert spec.streams == {"a": StreamSpec(1.0, "group"), "b": StreamSpec(0.5, "none")}
    entry = json_schema()["properties"]["rewards"]["items"]["oneOf"][1]
    streams = entry["properties"]["streams"]["anyOf"][0]  # or null
    assert streams["additionalProperties"]["oneOf"][1]["properties"]["normalize"]["enum"] == [
        "none",
        "group",
        "group_unbiased",
    ]


def test_a_normalised_stream_needs_group_ids():
    samples = [Sample(prompt="1,2,3"), Sample(prompt="2,3,4")]
    with pytest.raises(InputError) as err:
        RewardProcessor([{"name": "axes", "reward_model": PATH, "streams": {"a": {"normalize": "group"}}}])(samples)
    assert err.value.field == "group_id" and "axes" in str(err.value)
    plain = RewardProcessor([{"name": "axes", "reward_model": PATH, "streams": {"a": 1.0, "b": 2.0}}])(samples)
    np.testing.assert_allclose(plain.total, [1 + 4, 2 + 6])
