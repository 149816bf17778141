"""Reference rewards as configuration: the table of reference packages, ``reference:`` on an entry, and the
pairs ``compare-reference`` builds (no model is built here; tests/verifiers and tests/environments score)."""

from __future__ import annotations

import sys

import pytest

from rewardzoo.core.resolve import load_config, parse_spec
from rewardzoo.errors import ConfigError
from rewardzoo.jobs.compare_reference import REFERENCE_SUFFIX, find_spec, reference_specs
from rewardzoo.registry import extra_installed, info
from rewardzoo.rewards.base import Reward
from rewardzoo.rewards.references import HPSV2, IMAGE_REWARD, REFERENCES
from rewardzoo.shared.imports import import_path


def test_every_reference_belongs_to_a_shipped_reward_and_says_why_or_how_it_runs():
    assert {"image_reward", "hpsv2"} <= {n for n, r in REFERENCES.items() if r.runs}
    for name, ref in REFERENCES.items():
        assert info(name) is not None, name
        assert len(ref.why) > 40 and ref.package.split()[0] in ref.package
        if ref.runs:
            assert ref.requirements
            assert ref.environment() == {"requirements": list(ref.requirements), "system_site_packages": True}
            if extra_installed(info(name).extra):  # the wrapper imports without its package (with the extra)
                assert issubclass(import_path(ref.wrapper), Reward)
        else:
            assert not ref.requirements


def test_reference_true_takes_the_known_wrapper_and_builds_its_environment():
    spec = parse_spec({"name": "ir", "reward_model": "image_reward", "model_path": "/w", "reference": True})
    assert spec.reward_model == IMAGE_REWARD.wrapper and spec.model_path == "/w"
    assert spec.environment.requirements == IMAGE_REWARD.requirements and spec.environment.system_site_packages
    # the reward name is the entry's name when it names no reward_model
    assert parse_spec({"name": "hpsv2", "reference": True}).reward_model == HPSV2.wrapper
    # the entry's own environment wins; a mapping overrides the wrapper; environment: null runs it here
    own = parse_spec(
        {"name": "ir", "reward_model": "image_reward", "reference": True, "environment": {"python": sys.executable}}
    )
    assert own.environment.python == sys.executable and own.reward_model == IMAGE_REWARD.wrapper
    mine = parse_spec(
        {
            "name": "ir",
            "reward_model": "image_reward",
            "reference": {"reward_model": "my.mod:Ref", "environment": None, "kwargs": {"a": 1}},
        }
    )
    assert (mine.reward_model, mine.environment, dict(mine.kwargs)) == ("my.mod:Ref", None, {"a": 1})
    plain = parse_spec({"name": "ir", "reward_model": "image_reward", "reference": False})
    assert plain.reward_model == "image_reward" and plain.environment is None
    config = load_config({"rewards": [{"name": "ir", "reward_model": "image_reward", "reference": True}]})
    assert config.rewards[0].reward_model == IMAGE_REWARD.wrapper


@pytest.mark.parametrize(
    "entry, match",
    [
        ({"name": "a", "reward_model": "jpeg_compressibility", "reference": True}, "has no reference package"),
        (
            {"name": "a", "reward_model": "hpsv3", "reference": True},
            r"has no wrapper here: resolves only with transformers==4\.45\.2",
        ),
        ({"name": "a", "reward_model": "image_reward", "reference": "yes"}, "must be true, false or a mapping"),
        (
            {"name": "a", "reward_model": "image_reward", "reference": {"wrapper": "x:Y"}},
            "unknown key 'wrapper'.*reward_model, environment, kwargs",
        ),
    ],
)
def test_bad_references_are_config_errors_naming_the_entry_and_the_field(entry, match):
    with pytest.raises(ConfigError, match=match) as caught:
        parse_spec(entry)
    assert caught.value.entry == "a" and caught.value.field == "reference"


def test_the_schema_takes_reference_entries():
    jsonschema = pytest.importorskip("jsonschema")
    from rewardzoo.spec.config import json_schema

    validator = jsonschema.Draft202012Validator(json_schema())
    for value in (True, {"reward_model": "m:C", "environment": None}, {"environment": {"python": "/p"}}):
        validator.validate({"rewards": [{"name": "a", "reference": value}]})
    assert not validator.is_valid({"rewards": [{"name": "a", "reference": {"bogus": 1}}]})


def test_compare_reference_pairs_the_entry_in_process_with_its_reference():
    spec = load_config(
        {
            "environment": {"python": sys.executable},
            "rewards": [
                {
                    "name": "ir",
                    "reward_model": "image_reward",
                    "model_path": "/w",
                    "device": "cpu",
                    "batch_size": 3,
                    "applicable_datasets": ["t2i"],
                    "kwargs": {"k": 1},
                }
            ],
        }
    ).rewards[0]
    ours, ref = reference_specs(spec)
    assert ours.environment is None and ours.applicable_datasets is None  # rewardzoo's side: here, every sample
    assert (ours.reward_model, ours.model_path, dict(ours.kwargs)) == ("image_reward", "/w", {"k": 1})
    assert ref.name == "ir" + REFERENCE_SUFFIX and ref.reward_model == IMAGE_REWARD.wrapper
    assert (ref.model_path, ref.device, ref.batch_size, dict(ref.kwargs)) == ("/w", "cpu", 3, {"k": 1})
    assert ref.environment.requirements == IMAGE_REWARD.requirements
    _, here = reference_specs(spec, {"reward_model": "m:C", "environment": None})
    assert (here.reward_model, here.environment) == ("m:C", None)
    with pytest.raises(ConfigError, match="has no reference package") as caught:
        reference_specs(parse_spec({"name": "jpeg", "reward_model": "jpeg_compressibility"}))
    assert caught.value.entry == "jpeg"  # the user's entry, not the reference stream's name
    with pytest.raises(ConfigError, match="no entry 'irr'.*did you mean 'ir'.*its entries: ir"):
        find_spec([spec], "irr")
