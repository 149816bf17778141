"""The reward index: each reward's record is the front matter of its model card.

``model_cards/<name>.md`` (shipped inside the package) says what a reward is — implementation
(``module:Class``), summary, modality, kind, extra, ``higher_is_better``, ``score_range``, whether
weights must be downloaded, licence, reference, the precision ``dtype: auto`` picks (``default_dtype``) and
where the reference sets it (``dtype_source``, required of a shipped card that downloads weights) — and holds
its example config under ``## How to configure``. This module indexes the shipped cards without importing any reward module;
:func:`resolve` imports one when it is built.

Besides the shipped cards, a reward comes from:

- a third-party package: an entry point in the group ``rewardzoo.rewards`` (``name = "pkg.mod:Class"``)
  plus a card ``<name>.md`` shipped in the package (found among the distribution's files, preferably
  in a ``model_cards`` folder, without importing the package);
- user code: :func:`register`;
- a Python path in a config (``pkg.mod:Class`` or ``pkg.mod.Class``).

Rewards without a card take their metadata from optional class attributes (``higher_is_better``,
``score_range``, ``modality``) or the defaults.
"""

from __future__ import annotations

import importlib.util
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from .catalog.extras import extra_modules
from .errors import ConfigError, MissingExtraError, RegistryError, did_you_mean
from .rewards.info import KINDS, MODALITIES, PER_INSTANCE, RewardInfo
from .shared.device import canonical_dtype
from .shared.imports import import_path, split_path

#: The kinds a card may state: an instance's, or that each instance decides its own.
CARD_KINDS = (*KINDS, PER_INSTANCE)
DEVICE_KINDS = ("cpu", "cuda", "mps")
#: Facts a card states; a class with a card must not state them again.
CARD_FACTS = ("modality", "higher_is_better", "score_range", "extra")


# ------------------------------------------------------------------------------------------ records
def info_from_card(
    meta: Mapping[str, Any], card: Path, *, source: str = "rewardzoo", implementation: str | None = None
) -> RewardInfo:
    """Validate a card's front matter into a :class:`RewardInfo`; RegistryError names the card and key."""

    def bad(key: str, why: str) -> RegistryError:
        return RegistryError(f"model card '{card}': '{key}' {why}")

    def get(key: str, types: tuple[type, ...], default: Any = ...) -> Any:
        if key not in meta:
            if default is ...:
                raise bad(key, "is missing")
            return default
        value = meta[key]
        if not isinstance(value, types) or (bool in (type(value),) and bool not in types):
            raise bad(key, f"must be {' or '.join(t.__name__ for t in types)}, got {value!r}")
        return value

    name = get("name", (str,))
    impl = implementation or get("implementation", (str,))
    if ":" not in impl:
        raise bad("implementation", f"must be 'module:Class', got {impl!r}")
    kind = get("kind", (str,))
    if kind not in CARD_KINDS:
        raise bad("kind", f"must be one of {CARD_KINDS}, got {kind!r}")
    modality = get("modality", (str,))
    if modality not in MODALITIES and source == "rewardzoo":
        raise bad("modality", f"must be one of {MODALITIES}, got {modality!r}")
    extra = get("extra", (str, type(None)))
    if extra is not None and extra not in extra_modules() and source == "rewardzoo":
        raise bad("extra", f"must be one of {sorted(extra_modules())} or null, got {extra!r}")
    bounds = get("score_range", (list,))
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise bad("score_range", f"must be [low, high], got {bounds!r}") from None
    if not lo < hi or math.isnan(lo) or math.isnan(hi):
        raise bad("score_range", f"must have low < high, got {bounds!r}")
    download = get("download", (bool,))
    dtype_source = get("dtype_source", (str, type(None)), None)
    if dtype_source is not None and (not dtype_source.strip() or "\n" in dtype_source.strip()):
        raise bad("dtype_source", f"must be one non-empty line, got {dtype_source!r}")
    if dtype_source is None and download and source == "rewardzoo":
        raise bad(
            "dtype_source",
            "is missing: a card that loads weights says where its reference sets the precision "
            "`dtype: auto` picks (repo@commit file lines: what it does)",
        )
    devices = get("devices", (list, type(None)), None)
    if devices is not None and (not devices or any(d not in DEVICE_KINDS for d in devices)):
        raise bad("devices", f"must be a non-empty list of {DEVICE_KINDS}, got {devices!r}")
    return RewardInfo(
        name=name.lower(),
        implementation=impl,
        summary=get("summary", (str,)),
        modality=modality,
        kind=kind,
        extra=extra,
        higher_is_better=get("higher_is_better", (bool,)),
        score_range=(lo, hi),
        download=download,
        devices=tuple(devices) if devices else None,
        license=get("license", (str,), None),
        reference=get("reference", (dict,), None),
        card=card,
        source=source,
        differentiable=get("differentiable", (bool,), False),
        default_dtype=_default_dtype(get("default_dtype", (dict, type(None)), None), bad),
        default_dtype_when=_default_dtype_when(get("default_dtype_when", (dict, type(None)), None), bad),
        dtype_source=dtype_source.strip() if dtype_source else None,
        add_ons=_add_ons(get("add_ons", (list, type(None)), None), bad),
        typical_range=_typical_range(get("typical_range", (list, type(None)), None), (lo, hi), bad),
        prompt_conditioned=get("prompt_conditioned", (bool, type(None)), None),
        near_constant_in_group=get("near_constant_in_group", (bool,), False),
        prefers_still_video=get("prefers_still_video", (bool,), False),
        prompt_blind_when=_prompt_blind(get("prompt_blind_when", (dict, type(None)), None), bad),
        model_free=get("model_free", (bool,), False),
        activation_per_sample=_activation(get("activation_per_sample", (str, int, type(None)), None), bad),
    )


def _prompt_blind(
    value: dict[str, Any] | None, bad: Callable[[str, str], RegistryError]
) -> dict[str, tuple[Any, ...]] | None:
    """A card's ``prompt_blind_when``: ``{option: [values]}``."""
    if value is None:
        return None
    if not value or any(not isinstance(k, str) or not isinstance(v, list) or not v for k, v in value.items()):
        raise bad("prompt_blind_when", f"must map option names to non-empty lists of values, got {value!r}")
    return {k: tuple(v) for k, v in value.items()}


def _activation(value: str | int | None, bad: Callable[[str, str], RegistryError]) -> int | None:
    """A card's ``activation_per_sample``: a memory size (``350MiB``) or ``unknown``."""
    if value is None or value == "unknown":
        return None
    from .shared.checkpoints import parse_size  # here: no shipped card gives one, and `import rewardzoo` stays light

    try:
        return parse_size(value)
    except ValueError as exc:
        raise bad("activation_per_sample", f"must be a memory size such as 350MiB, or unknown: {exc}") from None


def _typical_range(
    value: list[Any] | None, bounds: tuple[float, float], bad: Callable[[str, str], RegistryError]
) -> tuple[float, float] | None:
    """A card's ``typical_range`` ``[low, high]``: finite, low < high, inside its ``score_range``."""
    if value is None:
        return None
    try:
        lo, hi = (float(b) for b in value)
    except (TypeError, ValueError):
        raise bad("typical_range", f"must be [low, high], got {value!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi and bounds[0] <= lo and hi <= bounds[1]):
        raise bad("typical_range", f"must be finite with low < high inside score_range {list(bounds)}, got {value!r}")
    return lo, hi


def _add_ons(value: list[Any] | None, bad: Callable[[str, str], RegistryError]) -> tuple[str, ...]:
    """A card's ``add_ons`` list of module names."""
    if value is not None and (not value or not all(isinstance(m, str) and m.isidentifier() for m in value)):
        raise bad("add_ons", f"must be a non-empty list of module names, got {value!r}")
    return tuple(value or ())


def _default_dtype(value: Mapping[str, Any] | None, bad: Callable[[str, str], RegistryError]) -> dict[str, str] | None:
    """A card's ``default_dtype`` mapping (device kind -> dtype name), validated and canonical."""
    if value is None:
        return None
    out = {}
    for kind, name in value.items():
        if kind not in DEVICE_KINDS:
            raise bad("default_dtype", f"keys must be device kinds {DEVICE_KINDS}, got {kind!r}")
        try:
            out[kind] = canonical_dtype(name)
        except ValueError as exc:
            raise bad("default_dtype", str(exc)) from None
    return out


def _default_dtype_when(
    value: Mapping[str, Any] | None, bad: Callable[[str, str], RegistryError]
) -> dict[str, dict[Any, dict[str, str]]] | None:
    """A card's ``default_dtype_when``: ``{option: {value: default_dtype mapping}}``, each inner mapping validated as
    ``default_dtype``."""
    if value is None:
        return None
    if any(not isinstance(v, Mapping) or not v for v in value.values()):
        raise bad("default_dtype_when", f"must map option names to {{value: {{device kind: dtype}}}}, got {value!r}")
    out: dict[str, dict[Any, dict[str, str]]] = {}
    for option, per_value in value.items():
        for choice, table in per_value.items():
            if not isinstance(table, Mapping):
                raise bad("default_dtype_when", f"{option}: {choice!r} must map device kinds to dtypes, got {table!r}")
            out.setdefault(str(option), {})[choice] = _default_dtype(table, bad) or {}
    return out


def info_for_class(cls: type, name: str | None = None, *, source: str = "python path") -> RewardInfo:
    """The record of a reward class: its card's when one is indexed for it, else from the class."""
    target = f"{cls.__module__}:{cls.__qualname__}"
    for found in _index().values():
        if found.implementation == target:
            return found
    return RewardInfo.of_class(cls, name, source=source)


# ------------------------------------------------------------------------------------------- index
_LOCK = threading.Lock()
_BUILTIN: dict[str, RewardInfo] | None = None
_PLUGINS: dict[str, RewardInfo] | None = None
_USER: dict[str, tuple[type, RewardInfo]] = {}
T = TypeVar("T", bound=type)


def builtin() -> dict[str, RewardInfo]:
    """The rewards whose cards ship with rewardzoo, by name."""
    global _BUILTIN
    with _LOCK:
        if _BUILTIN is None:
            from .catalog.resources import card_files, read_card_file

            found = {}
            for path in card_files():
                info = info_from_card(read_card_file(path)[0], path)
                if info.name != path.stem:
                    raise RegistryError(f"model card '{path}' is named '{info.name}'; the file must be {info.name}.md")
                found[info.name] = info
            _BUILTIN = found
        return _BUILTIN


def plugins() -> dict[str, RewardInfo]:
    """Rewards published by installed packages under the entry-point group ``rewardzoo.rewards``."""
    global _PLUGINS
    with _LOCK:
        if _PLUGINS is None:
            from importlib.metadata import entry_points

            found = {}
            for ep in entry_points(group="rewardzoo.rewards"):
                found[ep.name.lower()] = _plugin_info(ep)
            _PLUGINS = found
        return _PLUGINS


def _plugin_info(ep: Any) -> RewardInfo:
    from .catalog.resources import find_plugin_card, read_card_file

    dist = getattr(ep, "dist", None)
    source = f"plugin {dist.metadata['Name']}" if dist is not None else "plugin"
    card = find_plugin_card(ep)
    if card is None:
        return RewardInfo(
            name=ep.name.lower(),
            implementation=_as_target(ep.value),
            summary="(no model card)",
            modality="any",
            kind="pointwise",
            extra=None,
            higher_is_better=True,
            score_range=(-math.inf, math.inf),
            download=False,
            source=source,
        )
    meta = read_card_file(card)[0]
    return info_from_card({**meta, "name": ep.name}, card, source=source, implementation=_as_target(ep.value))


def _index() -> dict[str, RewardInfo]:
    """Every named reward: shipped cards, then plugins, then user registrations (first name wins)."""
    out = dict(builtin())
    for name, info in plugins().items():
        out.setdefault(name, info)
    for name, (_, info) in _USER.items():
        out.setdefault(name, info)
    return out


def register(name: str, **facts: Any) -> Callable[[T], T]:
    """Class decorator: make a user reward available under ``name`` (lowercased) in configs.

    ``facts`` override what the class states (``higher_is_better``, ``score_range``, ``modality``,
    ``summary``), for rewards that have no model card.
    """
    key = name.lower()
    allowed = {"higher_is_better", "score_range", "modality", "summary"}
    if set(facts) - allowed:
        raise RegistryError(f"register() takes {sorted(allowed)}, not {sorted(set(facts) - allowed)}")

    def deco(cls: T) -> T:
        if key in builtin():
            raise RegistryError(f"cannot register '{key}': a built-in reward has that name")
        info = info_for_class(cls, key, source="user")
        if "score_range" in facts:
            facts["score_range"] = tuple(float(b) for b in facts["score_range"])
        _USER[key] = (cls, replace(info, **facts))
        return cls

    return deco


def info(name: str) -> RewardInfo | None:
    """The record of a named reward (None for a Python path that no card describes)."""
    return _index().get(name.lower())


def entries() -> dict[str, RewardInfo]:
    """Every named reward's record, sorted by name."""
    return dict(sorted(_index().items()))


def card_path(name: str) -> Path:
    """The model card of a named reward (shipped or from a plugin)."""
    found = info(name)
    if found is None or found.card is None:
        names = [n for n, e in entries().items() if e.card is not None]
        raise RegistryError(f"no model card for '{name}'{did_you_mean(name.lower(), names)}")
    return found.card


def read_card(name: str) -> tuple[dict[str, Any], str]:
    """(front matter, markdown body) of a named reward's model card."""
    from .catalog.resources import read_card_file

    return read_card_file(card_path(name))


def example_config(name: str) -> dict[str, Any]:
    """A reward's example config (from its card's How-to-configure section), as ``load_config`` takes it."""
    from .catalog.resources import example_yaml, load_yaml_text

    data = load_yaml_text(example_yaml(read_card(name)[1], name))
    if not isinstance(data, dict):
        raise ConfigError(f"the example config in the model card of '{name}' is not a mapping")
    return data


def missing_modules(extra: str | None, add_ons: Sequence[str] = ()) -> list[str]:
    """The modules of ``extra`` (:func:`rewardzoo.catalog.extras.extra_modules`), then ``add_ons`` (a reward's
    :attr:`~rewardzoo.rewards.info.RewardInfo.add_ons`), that cannot be imported (checked without importing)."""
    wanted = dict.fromkeys([*extra_modules().get(extra or "", ()), *add_ons])
    return [m for m in wanted if importlib.util.find_spec(m) is None]


def extra_installed(extra: str | None, add_ons: Sequence[str] = ()) -> bool:
    """True when every module of ``extra`` (and every one of ``add_ons``) can be imported, checked without
    importing."""
    return not missing_modules(extra, add_ons)


def row(entry: RewardInfo) -> dict[str, Any]:
    """A JSON-ready listing row (``rewardzoo list --json``)."""
    return dict(
        name=entry.name,
        modality=entry.modality,
        kind=entry.kind,
        extra=entry.extra,
        higher_is_better=entry.higher_is_better,
        score_range=list(entry.score_range),
        download=entry.download,
        installed=extra_installed(entry.extra, entry.add_ons),
        summary=entry.summary,
        implementation=entry.implementation,
        source=entry.source,
    )


def list_rewards(modality: str | None = None) -> list[dict[str, Any]]:
    """Listing rows as dicts (name, modality, kind, extra, higher_is_better, score_range, installed, ...)."""
    return [row(e) for e in entries().values() if not modality or e.modality == modality]


def _as_target(path: str) -> str:
    return "{}:{}".format(*split_path(path))


@dataclass(frozen=True)
class Found:
    """What the registry knows of one configured reward name, from one look-up (:func:`find`).

    ``target``: the implementation path (``module:Class``) it resolves to; ``card``: its record (a card, a plugin,
    a registration; None for a Python path no card describes); ``registered``: the class a user registered under
    the name. Nothing is imported until :meth:`load_class`.
    """

    name: str
    target: str
    card: RewardInfo | None
    registered: type | None = None

    def load_class(self) -> type:
        """Import and return the reward class (MissingExtraError names the extra that provides a missing module)."""
        if self.registered is not None:
            return self.registered
        try:
            cls: type = import_path(self.target)
            return cls
        except RegistryError as exc:
            cause = exc.__cause__
            module_name = split_path(self.target)[0]
            if isinstance(cause, ModuleNotFoundError):
                missing = (cause.name or "").split(".")[0]
                if missing and missing != module_name.split(".")[0]:
                    extra = self.card.extra if self.card is not None else _extra_for(missing)
                    raise MissingExtraError(self.name, missing, extra) from cause
            raise RegistryError(f"reward '{self.name}': {exc}") from cause

    def record(self, cls: type) -> RewardInfo:
        """The record a built instance of ``cls`` carries as ``reward.info``: the card's, else the class's."""
        if self.card is not None:
            return self.card
        return info_for_class(cls, self.name.rsplit(":", 1)[-1].rsplit(".", 1)[-1])


def find(name: str) -> Found:
    """Everything the registry knows of a reward name or Python path, in one look-up; RegistryError (with a
    did-you-mean) for a name that is neither registered nor a Python path."""
    index = _index()
    found = index.get(name.lower())
    if found is not None:
        registered = _USER.get(name.lower())
        return Found(name, found.implementation, found, registered[0] if registered else None)
    if ":" in name or "." in name:
        target = _as_target(name)
        return Found(name, target, next((e for e in index.values() if e.implementation == target), None))
    raise RegistryError(
        f"unknown reward '{name}'{did_you_mean(name.lower(), index)}; `rewardzoo list` shows all rewards"
    )


def canonical_target(name: str) -> str:
    """The implementation path a reward name resolves to (card, plugin, user or Python path)."""
    return find(name).target


def lookup(name: str) -> RewardInfo | None:
    """The record of a reward named by a registered name, or by the Python path of a class with a card."""
    try:
        return find(name).card
    except RegistryError:
        return None


def describe(name: str, cls: type) -> RewardInfo:
    """The record a built instance of ``cls``, configured as ``name``, carries as ``reward.info``."""
    return find(name).record(cls)


def resolve(name: str) -> type:
    """Import and return the reward class for a registered name or a Python path."""
    return find(name).load_class()


def _extra_for(module: str) -> str | None:
    for extra, mods in extra_modules().items():
        if module in mods:
            return extra
    return None
