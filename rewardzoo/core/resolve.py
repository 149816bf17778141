"""Config resolution: what a user names as a config, read and checked against the registry.

The value types and their strict parsing are in :mod:`rewardzoo.spec.config`; this module adds what needs the
layers above them: a shipped config's or a reward's name (the catalog), ``reference:`` entries (the reference
rewards) and the check that an eval entry names a reward, not a training stream. Every entry point reads a
config through :func:`resolve_config`, and every spec given as a mapping through :func:`parse_spec`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError, UnknownConfigError, did_you_mean
from ..spec import config as values
from ..spec.config import ConfigSource, EnvironmentSpec, RewardConfig, RewardSpec

_CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def _expand_reference(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    from ..rewards.references import reference_entry

    return reference_entry(raw)


def parse_spec(raw: Any, where: str = "reward", environment: EnvironmentSpec | None = None) -> RewardSpec:
    """:func:`rewardzoo.spec.config.parse_spec` with ``reference:`` entries resolved."""
    return values.parse_spec(raw, where, environment, _expand_reference)


def parse_specs(
    entries: Any, section: str = "rewards", environment: EnvironmentSpec | None = None
) -> tuple[RewardSpec, ...]:
    """:func:`rewardzoo.spec.config.parse_specs` with ``reference:`` entries resolved."""
    return values.parse_specs(entries, section, environment, _expand_reference)


def load_config(source: str | os.PathLike[str] | Mapping[str, Any]) -> RewardConfig:
    """Parse a YAML file (``yaml.safe_load``), a shipped config by its name (``load_config("demo")``, as the command
    line reads it) or an already loaded mapping into a :class:`RewardConfig`."""
    data = source if isinstance(source, Mapping) else values.read_config_file(_shipped_or_path(source))
    config = values.parse_config(data, _expand_reference)
    _check_stream_references(config.rewards, config.eval_rewards)
    return config


def _shipped_or_path(source: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """A shipped config's file when ``source`` is its name (not a file here, no config suffix), else ``source``."""
    name = os.fspath(source)
    if Path(name).is_file() or name.endswith(_CONFIG_SUFFIXES) or not name.isidentifier():
        return source
    from ..catalog.resources import data_dir

    shipped = data_dir("configs") / f"{name}.yaml"
    return shipped if shipped.is_file() else source


def _check_stream_references(train: tuple[RewardSpec, ...], evals: tuple[RewardSpec, ...]) -> None:
    """An eval entry whose reward_model is a training stream's name (not a reward) is a likely mix-up."""
    from ..registry import lookup

    streams = {s.name: s for s in train}
    for spec in evals:
        target = streams.get(spec.reward_model)
        if target is not None and target.reward_model != spec.reward_model and lookup(spec.reward_model) is None:
            raise ConfigError(
                f"'{spec.reward_model}' is the name of a stream in 'rewards', not a reward; use its "
                f"reward_model '{target.reward_model}' (or repeat that entry in eval_rewards)",
                entry=spec.name,
                field="reward_model",
            )


def config_source(
    source: ConfigSource, *, reward: Literal["example", "entry"] = "example"
) -> RewardConfig | str | os.PathLike[str] | Path | Mapping[str, Any]:
    """What ``source`` names, not yet loaded: a path as given (an existing file, or a name ending in .yaml, .yml
    or .json); else a shipped use-case config (its path); else a reward's config. A reward name gives its model
    card's example config (``reward="example"``: the CLI, the server, the report) or a one-entry config with the
    reward's defaults (``reward="entry"``: :func:`rewardzoo.differentiable`, which also takes Python paths). A
    mapping or a :class:`RewardConfig` is returned as it is. A name that is none of these is an
    :class:`~rewardzoo.errors.UnknownConfigError` suggesting close shipped configs and reward names."""
    if isinstance(source, (RewardConfig, Mapping)):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise ConfigError(
            f"a config is a YAML path, a shipped config or reward name, a mapping or a RewardConfig, "
            f"got {type(source).__name__}"
        )
    name = os.fspath(source)
    if Path(name).is_file() or name.endswith(_CONFIG_SUFFIXES):
        return source
    from ..catalog.resources import data_dir
    from ..registry import entries, example_config, info

    shipped = data_dir("configs") / f"{name}.yaml"
    if shipped.is_file():
        return shipped
    if reward == "entry":
        return {"rewards": [{"name": name}]}  # the registry names an unknown reward (with its did-you-mean)
    if info(name) is not None:
        return example_config(name)
    known = [p.stem for p in data_dir("configs").glob("*.yaml")] + list(entries())
    raise UnknownConfigError(
        f"config '{name}' is neither a file, a shipped config nor a reward name{did_you_mean(name, known)}"
    )


def resolve_config(source: ConfigSource, *, reward: Literal["example", "entry"] = "example") -> RewardConfig:
    """The :class:`RewardConfig` that ``source`` names (see :func:`config_source`)."""
    found = config_source(source, reward=reward)
    return found if isinstance(found, RewardConfig) else load_config(found)
