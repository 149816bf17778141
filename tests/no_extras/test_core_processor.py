"""Processor behaviour: dataset gating, NaN padding, applied lists, weights, groups, field checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rewardzoo import RewardProcessor, Sample
from rewardzoo.errors import InputError, RewardExecutionError

from .rewards import CenteredLength, MetadataValue, PromptLength, path

LEN = path(PromptLength)
META = path(MetadataValue)


def _samples():
    return [
        Sample(prompt="a" * (i + 1), dataset=d, metadata={"value": 10 * i})
        for i, d in enumerate(["t2i", "edit", "t2i", "video", "edit"])
    ]


def test_gating_nan_padding_applied_lists_and_weighted_total():
    proc = RewardProcessor(
        [
            {
                "name": "len",
                "reward_model": LEN,
                "applicable_datasets": ["t2i", "edit"],
                "weight": {"t2i": 2.0, "edit": 0.5},
            },
            {"name": "meta", "reward_model": META, "applicable_datasets": ["edit", "video"], "weight": -1.0},
            {"name": "everywhere", "reward_model": LEN, "weight": 0.25, "kwargs": {"factor": 3.0}},
        ]
    )
    samples = _samples()
    res = proc(samples)
    lengths = np.array([len(s.prompt) for s in samples], dtype=float)
    values = np.array([10.0 * i for i in range(5)])
    np.testing.assert_array_equal(res.rewards["len"], [1, 2, 3, np.nan, 5])
    np.testing.assert_array_equal(res.rewards["meta"], [np.nan, 10, np.nan, 30, 40])
    np.testing.assert_array_equal(res.rewards["everywhere"], 3 * lengths)
    assert res.applied == [
        ["len", "everywhere"],
        ["len", "meta", "everywhere"],
        ["len", "everywhere"],
        ["meta", "everywhere"],
        ["len", "meta", "everywhere"],
    ]
    expected = (
        np.array(
            [2 * lengths[0], 0.5 * lengths[1] - values[1], 2 * lengths[2], -values[3], 0.5 * lengths[4] - values[4]]
        )
        + 0.25 * 3 * lengths
    )
    np.testing.assert_allclose(res.total, expected, rtol=1e-6)
    assert res.total.dtype == np.float32 and all(v.dtype == np.float32 for v in res.rewards.values())
    assert PromptLength.calls.count(4) == 1  # the gated stream saw only its 4 samples


def test_total_is_nan_where_no_reward_applies_and_records_are_json_ready():
    proc = RewardProcessor([{"name": "len", "reward_model": LEN, "applicable_datasets": ["t2i"]}])
    res = proc([Sample(prompt="abc", dataset="t2i"), Sample(prompt="abcd", dataset="other")])
    assert res.total[0] == 3 and np.isnan(res.total[1])
    assert res.applied == [["len"], []]
    assert res.records() == [
        {"rewards": {"len": 3.0}, "total": 3.0, "applied": ["len"]},
        {"rewards": {"len": None}, "total": None, "applied": []},
    ]
    json.dumps(res.records(), allow_nan=False)


def test_no_applicable_sample_means_no_call():
    proc = RewardProcessor([{"name": "len", "reward_model": LEN, "applicable_datasets": ["t2i"]}])
    res = proc([Sample(prompt="abc", dataset="x")])
    assert PromptLength.calls == [] and np.isnan(res.rewards["len"][0])


def test_missing_required_field_names_reward_field_and_sample():
    proc = RewardProcessor([{"name": "quality", "reward_model": "jpeg_compressibility"}])
    with pytest.raises(InputError) as info:
        proc([Sample(image=np.zeros((8, 8, 3), np.uint8)), Sample(prompt="no image")])
    err = info.value
    assert (err.reward, err.field, err.sample) == ("quality", "image", 1)
    assert "sample 1" in str(err) and "'image'" in str(err) and "'quality'" in str(err)


def test_missing_field_on_a_gated_out_sample_is_fine():
    proc = RewardProcessor(
        [{"name": "quality", "reward_model": "jpeg_compressibility", "applicable_datasets": ["img"]}]
    )
    res = proc([Sample(image=np.zeros((8, 8, 3), np.uint8), dataset="img"), Sample(prompt="text", dataset="txt")])
    assert np.isfinite(res.rewards["quality"][0]) and np.isnan(res.rewards["quality"][1])


def test_bad_media_is_reported_with_location():
    proc = RewardProcessor([{"name": "q", "reward_model": "jpeg_compressibility"}])
    with pytest.raises(
        InputError, match=r"sample 1, field 'image', reward 'q': float image values must be in \[0, 1\]"
    ):
        proc([Sample(image=np.zeros((8, 8, 3))), Sample(image=-np.ones((8, 8, 3)))])


def test_groupwise_gets_complete_groups_and_scores_follow_input_order():
    proc = RewardProcessor([{"name": "centered", "reward_model": path(CenteredLength), "batch_size": 1}])
    prompts = ["aaaa", "b", "cc", "dddddd", "e", "fff"]
    gids = ["g1", 7, "g1", 7, "g1", "7"]  # 7 and "7" are different groups
    res = proc([Sample(prompt=p, group_id=g) for p, g in zip(prompts, gids)])
    assert CenteredLength.groups == [["g1", "g1", "g1"], [7, 7], ["7"]]
    lengths = np.array([len(p) for p in prompts], float)
    expected = np.empty(6)
    for members in ([0, 2, 4], [1, 3], [5]):
        expected[members] = lengths[members] - lengths[members].mean()
    np.testing.assert_allclose(res.rewards["centered"], expected)


def test_groupwise_without_group_id_is_a_clear_error():
    proc = RewardProcessor([{"name": "centered", "reward_model": path(CenteredLength)}])
    with pytest.raises(InputError, match="sample 1, field 'group_id', reward 'centered'"):
        proc([Sample(prompt="a", group_id=1), Sample(prompt="b")])


@pytest.mark.parametrize("gid", [1.5, True, [1]])
def test_group_ids_must_be_int_or_str(gid):
    with pytest.raises(InputError, match="group_id must be an int or a str"):
        Sample(prompt="a", group_id=gid)


def test_samples_may_be_dicts_and_unknown_keys_are_errors():
    proc = RewardProcessor([{"name": "len", "reward_model": LEN}])
    assert proc([{"prompt": "abc"}]).rewards["len"][0] == 3
    with pytest.raises(InputError, match="sample 0, field 'promt': unknown field .*did you mean 'prompt'"):
        proc([{"promt": "abc"}])


@pytest.mark.parametrize("metadata", [{"value": 4.5}, '{"value": 4.5}'])
def test_metadata_reaches_rewards_as_json_string(metadata):
    res = RewardProcessor([{"name": "m", "reward_model": META}])([Sample(metadata=metadata)])
    assert res.rewards["m"][0] == 4.5


def test_invalid_metadata_json_is_an_input_error():
    with pytest.raises(InputError, match="field 'metadata'.*not valid JSON"):
        RewardProcessor([{"name": "m", "reward_model": META}])([Sample(metadata="{oops")])


def test_an_image_over_pils_pixel_limit_is_an_input_error_naming_reward_field_and_sample(tmp_path, monkeypatch):
    from PIL import Image

    Image.new("RGB", (64, 64), "red").save(tmp_path / "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # 4096 pixels > 2 x limit: DecompressionBombError
    proc = RewardProcessor(["jpeg_compressibility"])
    with pytest.raises(InputError) as info:
        proc([Sample(image=np.zeros((8, 8, 3), np.uint8)), Sample(image=str(tmp_path / "big.png"))])
    assert (info.value.reward, info.value.field, info.value.sample) == ("jpeg_compressibility", "image", 1)


def test_an_unexpected_conversion_failure_names_reward_field_and_sample(monkeypatch):
    from rewardzoo.core import fields

    def broken(value, sample, reward):
        if value == "abc":
            raise RuntimeError("backend exploded")
        return value

    monkeypatch.setitem(fields.CONVERTERS, "prompt", broken)
    proc = RewardProcessor([{"name": "len", "reward_model": LEN}])
    with pytest.raises(
        RewardExecutionError, match=r"reward 'len'.*field 'prompt'.*backend exploded \(sample 1\)"
    ) as info:
        proc([Sample(prompt="x"), Sample(prompt="abc")])
    assert isinstance(info.value.__cause__, RuntimeError) and info.value.samples == (1,)
