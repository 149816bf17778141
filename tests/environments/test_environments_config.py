"""``environment:`` in a config: strict parsing, inheritance from the config, the JSON schema, and the built
environments' CLI (``rewardzoo env build|list|remove``)."""

from __future__ import annotations

import json
import sys

import pytest

from rewardzoo.config import EnvironmentSpec, json_schema, load_config, parse_environment
from rewardzoo.errors import ConfigError


@pytest.mark.parametrize("value, message", [
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
])
def test_bad_environments_name_the_entry_and_field(value, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config({"rewards": [{"name": "r", "reward_model": "x:Y", "environment": value}]})
    assert (err.value.entry, err.value.field) in {("r", "environment"), ("r", "environment.start_timeout_s")}


def test_entries_inherit_the_config_environment_and_null_opts_out():
    config = load_config({"environment": {"requirements": "timm==0.6.13", "system_site_packages": True},
                          "rewards": [{"name": "a"}, {"name": "b", "environment": None},
                                      {"name": "c", "environment": {"python": sys.executable}}],
                          "eval_rewards": [{"name": "a"}]})
    built = EnvironmentSpec(requirements=("timm==0.6.13",), system_site_packages=True)
    assert [s.environment for s in config.rewards] == [built, None, EnvironmentSpec(python=sys.executable)]
    assert config.eval_rewards[0].environment == built
    assert hash(built) == hash(EnvironmentSpec(requirements=("timm==0.6.13",), system_site_packages=True))
    assert load_config({"rewards": ["a"]}).rewards[0].environment is None
    with pytest.raises(ConfigError, match="field 'environment'"):
        load_config({"environment": {"python": ""}, "rewards": ["a"]})
    assert parse_environment(None) is None


def test_the_schema_describes_environments():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    good = {"environment": {"python": "/p"}, "rewards": [
        {"name": "a", "environment": {"requirements": ["x<5"], "system_site_packages": True, "start_timeout_s": 9}},
        {"name": "b", "environment": None}]}
    jsonschema.validate(good, schema)
    for bad in ({"python": "/p", "requirements": ["x"]}, {"pythn": "/p"}, {}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"rewards": [{"name": "a", "environment": bad}]}, schema)


def test_env_build_list_and_remove(tmp_path, monkeypatch, capsys):
    """A built environment that sees the parent's packages and adds one the parent has: nothing to download."""
    from rewardzoo.cli import main
    from rewardzoo.environments.venvs import environment_key

    monkeypatch.setenv("REWARDZOO_ENVS", str(tmp_path / "envs"))
    config = tmp_path / "config.yaml"
    config.write_text("rewards:\n  - name: a\n    reward_model: tests.environments.worker_rewards:Length\n"
                      "    environment: {requirements: [pyyaml], system_site_packages: true}\n")
    key = environment_key(load_config(config).rewards[0].environment)
    assert main(["env", "build", str(config)]) == 0
    out = capsys.readouterr()
    python = tmp_path / "envs" / key / "bin" / "python"
    assert out.out.split("\t")[:2] == [key, str(python)] and python.exists()
    assert "building the environment requirements=[pyyaml], system_site_packages" in out.err
    assert main(["env", "build", str(config)]) == 0  # built already: reused, nothing said
    assert "building" not in capsys.readouterr().err
    assert main(["env", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["key"], r["requirements"], r["system_site_packages"], r["path"]) for r in rows] == [
        (key, ["pyyaml"], True, str(tmp_path / "envs" / key))]
    assert main(["env", "list"]) == 0 and key in capsys.readouterr().out
    assert main(["env", "remove", "nokey"]) == 2 and "no built environment matches 'nokey'" in capsys.readouterr().err
    assert main(["env", "remove", key[:6]]) == 0
    assert not (tmp_path / "envs" / key).exists()
    assert main(["env", "list"]) == 0 and "no built environments" in capsys.readouterr().out
