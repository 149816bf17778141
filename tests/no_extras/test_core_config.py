"""Strict config parsing: every validation error names the entry and the field."""

from __future__ import annotations

import functools
import json
import textwrap

import pytest

from rewardzoo import load_config
from rewardzoo.catalog.resources import data_dir
from rewardzoo.core.resolve import parse_spec
from rewardzoo.errors import ConfigError
from rewardzoo.registry import builtin, example_config
from rewardzoo.spec.config import RewardSpec, json_schema


def test_yaml_file_with_eval_fallback_and_defaults(tmp_path):
    cfg_file = tmp_path / "r.yaml"
    cfg_file.write_text(
        textwrap.dedent("""
        rewards:
          - jpeg_compressibility
          - name: detail
            reward_model: jpeg_incompressibility
            dtype: bf16
            device: cpu
            batch_size: 4
            applicable_datasets: t2i
            weight: {t2i: 2}
            async_reward: true
            num_workers: 2
            kwargs: {quality: 90}
    """)
    )
    cfg = load_config(cfg_file)
    assert cfg.eval_rewards == cfg.rewards
    first, second = cfg.rewards
    assert first == RewardSpec(name="jpeg_compressibility", reward_model="jpeg_compressibility")
    assert (second.dtype, second.device, second.batch_size, second.applicable_datasets) == (
        "bfloat16",
        "cpu",
        4,
        ("t2i",),
    )
    assert second.weight == {"t2i": 2.0} and second.weight_for("t2i") == 2.0 and second.weight_for("x") == 0.0
    assert second.async_reward and second.num_workers == 2 and second.kwargs == {"quality": 90}


def test_empty_sections_of_an_entry_are_their_defaults():
    """YAML's ``kwargs:`` or ``limits:`` left empty is null: no options, no limits."""
    spec = load_config({"rewards": [{"name": "a", "kwargs": None, "limits": None, "streams": None}]}).rewards[0]
    assert (spec.kwargs, spec.limits, spec.streams, spec.environment) == ({}, {}, None, None)


def test_eval_rewards_are_independent():
    cfg = load_config(
        {"rewards": ["jpeg_compressibility"], "eval_rewards": [{"name": "e", "reward_model": "jpeg_incompressibility"}]}
    )
    assert [s.name for s in cfg.specs("train")] == ["jpeg_compressibility"]
    assert [s.name for s in cfg.specs("eval")] == ["e"]


@pytest.mark.parametrize(
    "entry, field, message",
    [
        ({"name": "a", "batch_sise": 4}, "batch_sise", "did you mean 'batch_size'"),
        ({"name": "a", "batch_size": 0}, "batch_size", "positive integer"),
        ({"name": "a", "batch_size": -3}, "batch_size", "positive integer"),
        ({"name": "a", "batch_size": 2.5}, "batch_size", "positive integer"),
        ({"name": "a", "num_workers": 0}, "num_workers", "positive integer"),
        ({"name": "a", "dtype": "float8"}, "dtype", "unknown dtype 'float8'"),
        ({"name": "a", "device": "gpu"}, "device", "unknown device 'gpu'"),
        ({"name": "a", "device": "cuda:x"}, "device", "unknown device"),
        ({"name": "a", "weight": "high"}, "weight", "finite number"),
        ({"name": "a", "weight": float("nan")}, "weight", "finite number"),
        (
            {"name": "a", "weight": {"t2i": 1}, "applicable_datasets": ["edit"]},
            "weight.t2i",
            "not in applicable_datasets",
        ),
        ({"name": "a", "weight": {"t2i": "x"}}, "weight.t2i", "finite number or a mapping"),
        ({"name": "a", "applicable_datasets": []}, "applicable_datasets", "non-empty list"),
        ({"name": "a", "applicable_datasets": [1]}, "applicable_datasets", "non-empty list"),
        ({"name": "a", "async_reward": "yes"}, "async_reward", "true or false"),
        ({"name": "a", "kwargs": [1]}, "kwargs", "mapping"),
        ({"name": "a", "kwargs": []}, "kwargs", "mapping"),  # falsy non-mappings are errors too, not {}
        ({"name": "a", "kwargs": ""}, "kwargs", "mapping"),
        ({"name": "a", "model_path": 3}, "model_path", "string"),
        ({"name": ""}, "name", "non-empty string"),
        ({"reward_model": "x"}, "name", "non-empty string"),
    ],
)
def test_invalid_entries(entry, field, message):
    with pytest.raises(ConfigError, match=message) as info:
        parse_spec(entry)
    assert info.value.field == field
    if entry.get("name"):
        assert info.value.entry == entry["name"] and f"entry '{entry['name']}'" in str(info.value)


def test_duplicate_names_and_top_level_errors():
    with pytest.raises(ConfigError, match="duplicate reward name 'a'"):
        load_config({"rewards": ["a", {"name": "a"}]})
    with pytest.raises(ConfigError, match="unknown top-level key 'reward'.*did you mean 'rewards'"):
        load_config({"reward": []})
    with pytest.raises(ConfigError, match="needs 'rewards', a non-empty list"):
        load_config({"eval_rewards": []})
    with pytest.raises(ConfigError, match="must be a non-empty list"):
        load_config({"rewards": {"name": "a"}})


def test_yaml_is_loaded_safely(tmp_path):
    bad = tmp_path / "evil.yaml"
    bad.write_text("rewards: !!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_schema_accepts_every_shipped_config_and_rejects_bad_ones():
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    configs = sorted(data_dir("configs").glob("*.yaml"))
    assert configs
    for path in configs:
        validator.validate(yaml.safe_load(path.read_text()))
        load_config(path)  # and our own parser agrees
    for bad in (
        {"rewards": [{"name": "a", "batch_size": 0}]},
        {"rewards": [{"name": "a", "bogus": 1}]},
        {"rewardz": []},
        {"rewards": [{"name": "a", "device": "gpu"}]},
    ):
        assert not validator.is_valid(bad), bad
    json.dumps(schema)


#: Card examples the declared options refuse (the conversion's bug, to fix in the reward or its card)
REFUSED_EXAMPLES: dict[str, str] = {}  # name -> why its card's example config is refused (none is)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=REFUSED_EXAMPLES[n], strict=True))
        if n in REFUSED_EXAMPLES
        else n
        for n in sorted(builtin())
    ],
)
def test_every_card_example_config_is_valid_against_the_schema_with_its_options(name):
    """The shipped examples (each card's config) against the schema, each entry's kwargs against its reward's
    declared options: the generated option schemas accept what the cards tell users to write."""
    jsonschema = pytest.importorskip("jsonschema")
    errors = [e.message for e in jsonschema.Draft202012Validator(_schema()).iter_errors(example_config(name))]
    assert not errors, errors[:3]


@functools.cache
def _schema() -> dict:
    return json_schema()


def test_the_schema_gives_each_entry_the_options_of_the_reward_it_names():
    """An entry's ``kwargs`` is checked against the options its reward declares (rewardzoo/catalog/options.json),
    whether the entry names the reward by ``reward_model`` or by ``name``; a reward declaring none takes any."""
    from rewardzoo.catalog.options import catalog

    rules = json_schema()["properties"]["rewards"]["items"]["oneOf"][1]["allOf"]
    named = [r["if"]["anyOf"][0]["properties"]["reward_model"]["const"] for r in rules]
    assert named == sorted(catalog()) and "pickscore" in named
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json_schema())
    for entry in (
        {"name": "p", "reward_model": "pickscore", "kwargs": {"scale": 1, "processor_path": "/w"}},
        {"name": "pickscore", "kwargs": {"scale": 0.5}},
        {"name": "c", "reward_model": "tests.no_extras.rewards:PromptLength", "kwargs": {"anything": [1, 2]}},
        {"name": "pickscore", "reward_model": "tests.no_extras.rewards:PromptLength", "kwargs": {"bogus": 1}},
    ):
        validator.validate({"rewards": [entry]})
    composite = next(n for n, found in sorted(catalog().items()) if found.get("passes_on"))
    own = catalog()[composite]["rows"][0]["name"]  # a composite takes other keys (its inner reward's options) too
    validator.validate({"rewards": [{"name": composite, "kwargs": {"clip_model_of_the_inner_reward": 1}}]})
    assert not validator.is_valid({"rewards": [{"name": composite, "kwargs": {own: {"not": "its type"}}}]})
    for entry in (
        {"name": "p", "reward_model": "pickscore", "kwargs": {"scale": -1}},
        {"name": "p", "reward_model": "pickscore", "kwargs": {"scael": 1}},
        {"name": "pickscore", "kwargs": {"scale": "big"}},
    ):
        assert not validator.is_valid({"rewards": [entry]}), entry
