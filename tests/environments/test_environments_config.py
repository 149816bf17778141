"""``environment:`` in a config: strict parsing, inheritance from the config, the JSON schema (the built
environments' CLI is tested on the environment test_environments_clash.py builds)."""

from __future__ import annotations

import sys

import pytest

from rewardzoo.core.resolve import load_config
from rewardzoo.errors import ConfigError
from rewardzoo.spec.config import EnvironmentSpec, json_schema, parse_environment


@pytest.mark.parametrize(
    "value, message",
    [
        ("python", "must be a mapping"),
        ({}, "either 'python'"),
        ({"python": "/x", "requirements": ["a"]}, "either 'python'"),
        ({"requirement": ["a"]}, "unknown key 'requirement' .*did you mean 'requirements'"),
        ({"requirements": []}, "non-empty list"),
        ({"requirements": ["ok", 3]}, "non-empty list"),
        ({"requirements": ["--index-url=http://x"]}, "not pip options"),
        ({"python": "/x", "system_site_packages": True}, "applies to a built environment"),
        ({"requirements": ["a"], "system_site_packages": "yes"}, "true or false"),
        ({"python": "/x", "start_timeout_s": 0}, "positive"),
        ({"python": "/x", "max_restarts": -1}, "non-negative"),
    ],
)
def test_bad_environments_name_the_entry_and_field(value, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config({"rewards": [{"name": "r", "reward_model": "x:Y", "environment": value}]})
    assert err.value.entry == "r" and err.value.field.split(".")[0] == "environment"  # or the key's own path


def test_entries_inherit_the_config_environment_and_null_opts_out():
    config = load_config(
        {
            "environment": {"requirements": "timm==0.6.13", "system_site_packages": True},
            "rewards": [
                {"name": "a"},
                {"name": "b", "environment": None},
                {"name": "c", "environment": {"python": sys.executable}},
            ],
            "eval_rewards": [{"name": "a"}],
        }
    )
    built = EnvironmentSpec(requirements=("timm==0.6.13",), system_site_packages=True)
    assert [s.environment for s in config.rewards] == [built, None, EnvironmentSpec(python=sys.executable)]
    assert config.eval_rewards[0].environment == built
    assert hash(built) == hash(EnvironmentSpec(requirements=("timm==0.6.13",), system_site_packages=True))
    assert load_config({"rewards": ["a"]}).rewards[0].environment is None
    with pytest.raises(ConfigError, match="field 'environment.python'"):
        load_config({"environment": {"python": ""}, "rewards": ["a"]})
    assert parse_environment(None) is None


def test_the_schema_describes_environments():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    good = {
        "environment": {"python": "/p"},
        "rewards": [
            {"name": "a", "environment": {"requirements": ["x<5"], "system_site_packages": True, "start_timeout_s": 9}},
            {"name": "b", "environment": None},
        ],
    }
    jsonschema.validate(good, schema)
    for bad in ({"python": "/p", "requirements": ["x"]}, {"pythn": "/p"}, {}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"rewards": [{"name": "a", "environment": bad}]}, schema)


def test_call_timeout_s_defaults_to_an_hour_and_null_lifts_it():
    def env(**extra):
        config = load_config({"rewards": [{"name": "r", "environment": {"python": "/x", **extra}}]})
        return config.rewards[0].environment

    assert env().call_timeout_s == 3600.0 and env(call_timeout_s=None).call_timeout_s is None
    assert env(call_timeout_s="90").call_timeout_s == 90.0 and env(call_timeout_s=90) != env()
    for bad in (0, -1, "soon", True, float("inf")):
        with pytest.raises(ConfigError, match="positive finite number") as err:
            env(call_timeout_s=bad)
        assert (err.value.entry, err.value.field) == ("r", "environment.call_timeout_s")
    jsonschema = pytest.importorskip("jsonschema")
    for good in (None, 0.5, 600):
        jsonschema.validate(
            {"rewards": [{"name": "a", "environment": {"python": "/p", "call_timeout_s": good}}]}, json_schema()
        )
    for bad in (0, "soon"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(
                {"rewards": [{"name": "a", "environment": {"python": "/p", "call_timeout_s": bad}}]}, json_schema()
            )
