"""Reward configuration: strict YAML/dict parsing into :class:`RewardSpec` lists.

```yaml
rewards:                      # training rewards
  - name: aesthetic           # stream name (unique within the list)
    reward_model: laion_aesthetic   # registry name or Python path; defaults to `name`
    model_path: /weights/aesthetic  # hub id or local directory/file, reward-specific
    dtype: bfloat16           # auto (default: the card's default_dtype for the device, else float32),
                              # float32, float16, bfloat16 (+ fp32/fp16/bf16)
    device: auto              # auto (CUDA when available), cpu, cuda, cuda:N, mps
    batch_size: 16
    applicable_datasets: [t2i]      # null = every dataset
    weight: {t2i: 1.0}        # number, or dataset -> number (keys within applicable_datasets); either may be a
                              # schedule over the trainer's step: {schedule: linear, start: 0.0, end: 1.0, steps: 1000}
    async_reward: false
    num_workers: 1
    kwargs: {}                # passed to the reward's constructor
    limits: {seconds: 600}    # input limits (seconds of audio, frames, pixels); null lifts one
    offload: none             # between reward phases: none (stay resident), cpu (weights in CPU memory),
                              # drop (weights freed, re-read on wake); see docs/residency.md
    ray: {num_gpus: 0.1, replicas: 2}   # on Ray (serve --ray, score --engine ray): a deployment / stage of its
                              # own with these resources (num_gpus, num_cpus, replicas, max_ongoing_requests)
    environment: {python: /opt/envs/ir/bin/python}   # run in a worker process of another environment, or
    # environment: {requirements: ["transformers<5"], system_site_packages: true}  (built once, cached)
    reference: true           # score with the reward's reference package instead (its own environment)
    streams:                  # a multi-output reward's named outputs (one model call), each weighted and, if
      alignment: {weight: 1.0, normalize: group}   # asked, normalised within its group before the sum;
      style: 0.5              # a number is the weight (normalize: none); see StreamSpec
eval_rewards: [...]           # optional; falls back to `rewards`
advantage: sum                # or gdpo: how result.advantages() combines the rewards
monitor: {log: monitor.jsonl, window: 20}   # optional: RewardMonitor's log and alarm thresholds
environment: {...}            # optional: the environment of every entry that names none (null: in process)
```
A bare string entry (``- jpeg_compressibility``) is shorthand for ``{name: jpeg_compressibility}``.

The value types and their strict parsing (importing only :mod:`rewardzoo.errors` and :mod:`rewardzoo.shared`);
:mod:`rewardzoo.core.resolve` resolves what needs the registry (names, ``reference:`` entries).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Union

from ..errors import ConfigError, did_you_mean
from ..shared.device import DTYPE_ALIASES, canonical_dtype, valid_device
from ..shared.files import read_utf8
from ..shared.options import positive_float, positive_int
from .monitor import MonitorSettings, parse_monitor
from .placement import RayPlacement, parse_ray

SCHEDULES = ("linear", "cosine", "step")
SCHEDULE_KEYS = ("schedule", "start", "end", "steps", "after")


@dataclass(frozen=True)
class WeightSchedule:
    """A weight that changes with the trainer's step: ``start`` until step ``after``, ``end`` from step
    ``after + steps`` on, and in between, with progress ``p = (step - after) / steps`` in [0, 1]:

    - ``linear``: ``start + (end - start) * p``;
    - ``cosine``: ``end + (start - end) * (1 + cos(pi * p)) / 2`` (flat at both ends);
    - ``step``: ``start`` while ``p < 1``, then ``end`` (a switch at step ``after + steps``).

    ``steps`` >= 1 and ``after`` >= 0 are integers; ``start`` and ``end`` finite numbers (any sign).
    """

    schedule: str
    start: float
    end: float
    steps: int
    after: int = 0

    def at(self, step: int) -> float:
        """The weight at trainer step ``step`` (an integer >= 0)."""
        p = min(1.0, max(0.0, (step - self.after) / self.steps))
        if self.schedule == "linear":
            return self.start + (self.end - self.start) * p
        if self.schedule == "cosine":
            return self.end + (self.start - self.end) * (1.0 + math.cos(math.pi * p)) / 2.0
        return self.start if p < 1.0 else self.end


Weight = float | WeightSchedule

#: How a stream's values enter the total: as they are, or normalised within the sample's group (``group_id``):
#: ``group``, ``(v - mean_g) / max(std_g, 1e-6)`` with the population std (GDPO's, rewardzoo.core.advantages);
#: ``group_unbiased``, ``(v - mean_g) / (std_g + 1e-8)`` with the unbiased std (Pref-GRPO's ``_compute_adv``).
NORMALIZE_MODES = ("none", "group", "group_unbiased")
STREAM_KEYS = ("weight", "normalize")


@dataclass(frozen=True)
class StreamSpec:
    """One named output stream of a multi-output reward (a value its call reports beside the score, e.g.
    ``unified_reward_2``'s ``alignment``): its ``weight`` in the entry's contribution and whether it is
    normalised within the group first (:data:`NORMALIZE_MODES`). The reward declares the valid names
    (``Reward.streams``); an entry with ``streams:`` contributes ``sum_d w_d v_d`` (``v_d`` raw or normalised)
    instead of its score, times the entry's own weight."""

    weight: float = 1.0
    normalize: str = "none"


@dataclass(frozen=True)
class RewardSpec:
    """One configured reward stream. ``name`` identifies the stream; ``reward_model`` the implementation."""

    name: str
    reward_model: str
    model_path: str | None = None
    dtype: str = "auto"
    device: str = "auto"
    batch_size: int = 16
    applicable_datasets: tuple[str, ...] | None = None
    #: a number, a :class:`WeightSchedule`, or a mapping dataset -> either
    weight: Weight | Mapping[str, Weight] = 1.0
    async_reward: bool = False
    num_workers: int = 1
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    limits: Mapping[str, float | int | None] = field(default_factory=dict)
    environment: EnvironmentSpec | None = None
    offload: str = "none"
    #: a multi-output reward's named streams (None: the entry contributes its score)
    streams: Mapping[str, StreamSpec] | None = None
    #: the entry's ``ray:`` block (rewardzoo.spec.placement); None: placed with the entries that have none
    ray: RayPlacement | None = None

    def applies_to(self, dataset: str | None) -> bool:
        """Whether samples of ``dataset`` are scored by this reward."""
        return self.applicable_datasets is None or dataset in self.applicable_datasets

    @property
    def scheduled(self) -> bool:
        """Whether the weight (or one of its per-dataset weights) follows a schedule over the trainer's step."""
        values = self.weight.values() if isinstance(self.weight, Mapping) else [self.weight]
        return any(isinstance(w, WeightSchedule) for w in values)

    def weight_for(self, dataset: str | None, step: int | None = None) -> float:
        """Weight of this reward in the total for a sample of ``dataset`` (mapping misses weigh 0) at trainer
        step ``step``; a scheduled weight needs the step (ConfigError naming the entry without it)."""
        weight = self.weight.get(dataset or "", 0.0) if isinstance(self.weight, Mapping) else self.weight
        if isinstance(weight, WeightSchedule):
            if step is None:
                raise ConfigError(
                    "the weight follows a schedule over the trainer's step; pass the step "
                    "(processor(samples, step=...); the trainer adapters pass their global step)",
                    entry=self.name,
                    field="weight",
                )
            return weight.at(step)
        return float(weight)


@dataclass(frozen=True)
class RewardConfig:
    """Training and evaluation reward lists; ``eval_rewards`` falls back to ``rewards``. ``advantage``:
    how ``result.advantages()`` combines several rewards (``sum`` or ``gdpo``, see rewardzoo.core.advantages);
    ``monitor``: the ``monitor:`` section (:class:`~rewardzoo.monitor.MonitorSettings`), None when absent."""

    rewards: tuple[RewardSpec, ...]
    eval_rewards: tuple[RewardSpec, ...]
    advantage: str = "sum"
    monitor: MonitorSettings | None = None

    def specs(self, split: str = "train") -> tuple[RewardSpec, ...]:
        if split not in ("train", "eval"):
            raise ConfigError(f"split must be 'train' or 'eval', got '{split}'")
        return self.rewards if split == "train" else self.eval_rewards


@dataclass(frozen=True)
class EnvironmentSpec:
    """The Python environment an entry's rewards run in, in a worker process (rewardzoo.environments).

    Either ``python``: an existing interpreter (a path); or ``requirements`` (pip requirement strings) and
    ``system_site_packages`` (the parent's packages visible under the child's own): a venv rewardzoo builds
    once under its cache folder. ``start_timeout_s`` bounds a worker's start-up (models built);
    ``call_timeout_s`` how long one call waits for the worker's answer (None: for ever) before the worker is
    killed (the call is not retried: a hang would repeat); ``max_restarts`` how often a worker that died or
    was killed is started again over a run; ``shared_memory: false`` sends the media through the socket even on
    the same host (for comparison)."""

    python: str | None = None
    requirements: tuple[str, ...] = ()
    system_site_packages: bool = False
    start_timeout_s: float = 300.0
    #: An hour: far beyond one batch of any reward a trainer waits for (calls are chunks of batch_size),
    #: short enough that a hung worker becomes an error instead of a run that never ends.
    call_timeout_s: float | None = 3600.0
    max_restarts: int = 3
    shared_memory: bool = True

    def describe(self) -> str:
        """How errors name the environment."""
        if self.python is not None:
            return f"environment python={self.python}"
        return f"environment requirements=[{', '.join(self.requirements)}]" + (
            ", system_site_packages" if self.system_site_packages else ""
        )


ENVIRONMENT_KEYS = (
    "python",
    "requirements",
    "system_site_packages",
    "start_timeout_s",
    "call_timeout_s",
    "max_restarts",
    "shared_memory",
)


def parse_environment(value: Any, entry: str | None = None) -> EnvironmentSpec | None:
    """An ``environment:`` mapping (of an entry or a whole config) as an :class:`EnvironmentSpec`; None for null."""
    if value is None or isinstance(value, EnvironmentSpec):
        return value

    def err(msg: str) -> ConfigError:
        return ConfigError(msg, entry=entry, field="environment")

    if not isinstance(value, Mapping):
        raise err("must be a mapping: {python: /path/to/python} or {requirements: [...], system_site_packages: ...}")
    for key in value:
        if key not in ENVIRONMENT_KEYS:
            raise err(
                f"unknown key '{key}'{did_you_mean(str(key), ENVIRONMENT_KEYS)}; keys: {', '.join(ENVIRONMENT_KEYS)}"
            )
    python, requirements = value.get("python"), value.get("requirements")
    if (python is None) == (requirements is None):
        raise err("name either 'python' (an existing interpreter) or 'requirements' (a venv rewardzoo builds)")
    if python is not None and (not isinstance(python, str) or not python.strip()):
        raise err(f"'python' must be the path of an interpreter, got {python!r}")
    if requirements is not None:
        if isinstance(requirements, str):
            requirements = [requirements]
        if (
            not isinstance(requirements, list)
            or not requirements
            or not all(isinstance(r, str) and r.strip() for r in requirements)
        ):
            raise err("'requirements' must be a non-empty list of pip requirement strings")
        if any(r.strip().startswith("-") for r in requirements):
            raise err("'requirements' are requirement strings, not pip options")
    ssp, shm = value.get("system_site_packages", False), value.get("shared_memory", True)
    if not isinstance(ssp, bool) or not isinstance(shm, bool):
        raise err("'system_site_packages' and 'shared_memory' are true or false")
    if python is not None and "system_site_packages" in value:
        raise err("'system_site_packages' applies to a built environment ('requirements'), not to 'python'")
    timeout = positive_float(value.get("start_timeout_s", 300.0), "environment.start_timeout_s", entry=entry)
    call_timeout = value.get("call_timeout_s", EnvironmentSpec.call_timeout_s)
    if call_timeout is not None:  # null: no bound
        call_timeout = positive_float(call_timeout, "environment.call_timeout_s", entry=entry)
    restarts = value.get("max_restarts", 3)
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
        raise err(f"'max_restarts' must be a non-negative integer, got {restarts!r}")
    return EnvironmentSpec(
        python=python,
        requirements=tuple(r.strip() for r in requirements or ()),
        system_site_packages=ssp,
        start_timeout_s=timeout,
        call_timeout_s=call_timeout,
        max_restarts=restarts,
        shared_memory=shm,
    )


SPEC_FIELDS = tuple(f.name for f in fields(RewardSpec))
#: The keys of a config entry: the spec's fields and ``reference`` (rewardzoo.rewards.references).
ENTRY_KEYS = (*SPEC_FIELDS, "reference")
TOP_LEVEL = ("rewards", "eval_rewards", "advantage", "monitor", "environment")


def read_config_file(path: str | os.PathLike[str]) -> Any:
    """The data of a YAML (or JSON) config file, read with ``yaml.safe_load`` after its aliases are bounded."""
    import yaml

    path = Path(path)
    text = read_utf8(path, "config", ConfigError)
    try:
        check_aliases(yaml.compose(text, Loader=yaml.SafeLoader), f"'{path}'")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"'{path}' is not valid YAML: {exc}") from None
    except RecursionError:  # PyYAML's composer recurses once per level, before any depth can be checked
        raise ConfigError(f"'{path}' does not parse: its YAML nests deeper than {MAX_DEPTH} levels") from None


#: The ways ``result.advantages()`` combines several rewards (:mod:`rewardzoo.core.advantages`).
ADVANTAGE_MODES = ("sum", "gdpo")


def check_mode(mode: Any, field: str = "advantage") -> str:
    """``mode`` if it is one of :data:`ADVANTAGE_MODES`, else a :class:`~rewardzoo.errors.ConfigError`."""
    if mode not in ADVANTAGE_MODES:
        raise ConfigError(f"must be one of {', '.join(ADVANTAGE_MODES)}, got {mode!r}", field=field)
    return str(mode)


#: Expands an entry's ``reference:`` key into the entry it stands for (resolution, above this layer).
ExpandEntry = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def parse_config(data: Any, expand: ExpandEntry | None = None) -> RewardConfig:
    """Validate a loaded config mapping into a :class:`RewardConfig` (no registry look-up: the names are
    resolved by :func:`rewardzoo.core.resolve.load_config`)."""
    if not isinstance(data, Mapping):
        raise ConfigError("a reward config is a mapping with a 'rewards' list")
    for key in data:
        if key not in TOP_LEVEL:
            raise ConfigError(f"unknown top-level key '{key}'{did_you_mean(str(key), TOP_LEVEL)}")
    if "rewards" not in data:
        raise ConfigError("the config has no 'rewards' list")
    environment = parse_environment(data.get("environment"))
    train = parse_specs(data["rewards"], "rewards", environment, expand)
    evals = (
        parse_specs(data["eval_rewards"], "eval_rewards", environment, expand)
        if data.get("eval_rewards") is not None
        else train
    )
    monitor = parse_monitor(data["monitor"]) if data.get("monitor") is not None else None
    return RewardConfig(train, evals, check_mode(data.get("advantage", "sum")), monitor)


#: The most values a config may hold once its YAML aliases are expanded (a real one holds a few hundred).
MAX_VALUES = 100_000
#: Levels of nesting a config may have (a reward config needs a handful; a deep one only exhausts the stack).
MAX_DEPTH = 100


def check_aliases(node: Any, where: str) -> None:
    """Refuse a YAML node graph whose aliases recurse or expand past :data:`MAX_VALUES` values, before
    anything is built from it (``a: &x [*x]``, or nested aliases that make a 1 kB file a billion leaves)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(n: Any) -> int:
        key = id(n)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise ConfigError(f"{where}: a YAML alias refers to a node that contains it (a recursive anchor)")
        if len(open_nodes) >= MAX_DEPTH:
            raise ConfigError(f"{where} does not parse: its YAML nests deeper than {MAX_DEPTH} levels")
        open_nodes.add(key)
        children = n.value if isinstance(n.value, list) else []
        total = 1
        for child in children:
            total += sum(size(c) for c in child) if isinstance(child, tuple) else size(child)
            if total > MAX_VALUES:
                raise ConfigError(
                    f"{where}: its YAML aliases expand to more than {MAX_VALUES} values; "
                    "write the values out instead of nesting aliases"
                )
        open_nodes.discard(key)
        sizes[key] = total
        return total

    if node is not None:
        size(node)


def _check_kwargs_size(value: Any, name: str) -> None:
    """Python configs can share and nest objects too: the same bound on the values kwargs expand to."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise ConfigError(
                f"kwargs expand to more than {MAX_VALUES} values (shared or recursive containers)",
                entry=name,
                field="kwargs",
            )
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def parse_specs(
    entries: Any,
    section: str = "rewards",
    environment: EnvironmentSpec | None = None,
    expand: ExpandEntry | None = None,
) -> tuple[RewardSpec, ...]:
    """Validate a list of reward entries; errors name the entry and the field. ``environment``: the config's,
    for entries that name none."""
    if not isinstance(entries, list):
        raise ConfigError(f"'{section}' must be a list of reward entries")
    if not entries:
        raise ConfigError(
            f"'{section}' is empty: name at least one reward (a config that scores nothing "
            "would give every sample a null total)"
        )
    specs, seen = [], set()
    for i, raw in enumerate(entries):
        spec = parse_spec(raw, f"{section}[{i}]", environment, expand)
        if spec.name in seen:
            raise ConfigError(f"duplicate reward name '{spec.name}' in '{section}'", entry=spec.name, field="name")
        seen.add(spec.name)
        specs.append(spec)
    return tuple(specs)


def parse_spec(
    raw: Any, where: str = "reward", environment: EnvironmentSpec | None = None, expand: ExpandEntry | None = None
) -> RewardSpec:
    """Validate one reward entry (a mapping, or a bare name). ``environment``: the config's, used when the
    entry has no ``environment`` key (``environment: null`` runs it in process); ``expand``: what turns a
    ``reference:`` entry into the entry it stands for (without it, such an entry is an error)."""
    if isinstance(raw, str):
        raw = {"name": raw}
    if isinstance(raw, RewardSpec):
        return raw
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: a reward entry is a mapping or a name, got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: every reward entry needs a non-empty string 'name'", field="name")
    if "reference" in raw:  # scored by the reward's reference package, in its own environment
        if expand is None:
            raise ConfigError(
                "a 'reference' entry is resolved by load_config or the processor, not parsed alone",
                entry=name,
                field="reference",
            )
        raw = expand(raw)
    for key in raw:
        if key not in ENTRY_KEYS:
            raise ConfigError(f"unknown key{did_you_mean(str(key), ENTRY_KEYS)}", entry=name, field=str(key))

    def err(fld: str, msg: str) -> ConfigError:
        return ConfigError(msg, entry=name, field=fld)

    reward_model = raw.get("reward_model", name)
    if not isinstance(reward_model, str) or not reward_model:
        raise err("reward_model", "must be a registry name or a Python path")
    model_path = raw.get("model_path")
    if model_path is not None and not isinstance(model_path, str):
        raise err("model_path", f"must be a string, got {type(model_path).__name__}")
    try:
        dtype = raw.get("dtype", "auto")
        dtype = "auto" if dtype == "auto" else canonical_dtype(dtype)
    except ValueError as exc:
        raise err("dtype", str(exc)) from None
    device = raw.get("device", "auto")
    if not isinstance(device, str) or not valid_device(device):
        raise err("device", f"unknown device '{device}'; use auto, cpu, cuda, cuda:N or mps")
    batch_size = int(positive_int(raw.get("batch_size", 16), "batch_size", entry=name) or 0)
    num_workers = int(positive_int(raw.get("num_workers", 1), "num_workers", entry=name) or 0)
    async_reward = raw.get("async_reward", False)
    if not isinstance(async_reward, bool):
        raise err("async_reward", "must be true or false")
    datasets = raw.get("applicable_datasets")
    if datasets is not None:
        if isinstance(datasets, str):
            datasets = [datasets]
        if not isinstance(datasets, list) or not datasets or not all(isinstance(d, str) for d in datasets):
            raise err("applicable_datasets", "must be null or a non-empty list of dataset names")
        datasets = tuple(datasets)
    weight = _weight(raw.get("weight", 1.0), datasets, err)
    kwargs = raw.get("kwargs")
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise err("kwargs", "must be a mapping of constructor keyword arguments")
    _check_kwargs_size(kwargs, name)
    limits = _limits(raw.get("limits"), err, name)
    own = parse_environment(raw["environment"], name) if "environment" in raw else environment
    offload = raw.get("offload", "none")
    if offload not in OFFLOAD_MODES:
        raise err(
            "offload",
            f"must be one of {', '.join(OFFLOAD_MODES)}, got {offload!r}{did_you_mean(str(offload), OFFLOAD_MODES)}",
        )
    streams = parse_streams(raw.get("streams"), name)
    ray = parse_ray(raw["ray"], name) if raw.get("ray") is not None else None
    return RewardSpec(
        name=name,
        reward_model=reward_model,
        model_path=model_path,
        dtype=dtype,
        device=device,
        batch_size=batch_size,
        applicable_datasets=datasets,
        weight=weight,
        async_reward=async_reward,
        num_workers=num_workers,
        kwargs=dict(kwargs),
        limits=limits,
        environment=own,
        offload=offload,
        streams=streams,
        ray=ray,
    )


def parse_streams(value: Any, entry: str | None = None) -> dict[str, StreamSpec] | None:
    """An entry's ``streams:`` mapping: stream name -> ``{weight, normalize}`` or a bare weight (normalize
    ``none``); None for null. The names are checked against the reward's own by the processor
    (:func:`rewardzoo.core.streams.resolve_streams`), which needs the reward."""
    if value is None:
        return None

    def err(fld: str, msg: str) -> ConfigError:
        return ConfigError(msg, entry=entry, field=fld)

    if not isinstance(value, Mapping) or not value:
        raise err("streams", "must be a non-empty mapping of stream name -> {weight, normalize} (or a weight)")
    out: dict[str, StreamSpec] = {}
    for name, setting in value.items():
        if not isinstance(name, str) or not name:
            raise err("streams", f"stream names are strings, got {name!r}")
        if isinstance(setting, StreamSpec):
            out[name] = setting
            continue
        if _number(setting):
            setting = {"weight": setting}
        if not isinstance(setting, Mapping):
            raise err(f"streams.{name}", f"must be a weight or a mapping {{weight, normalize}}, got {setting!r}")
        for key in setting:
            if key not in STREAM_KEYS:
                raise err(
                    f"streams.{name}.{key}",
                    f"unknown stream key{did_you_mean(str(key), STREAM_KEYS)}; keys: {', '.join(STREAM_KEYS)}",
                )
        weight = setting.get("weight", 1.0)
        if not _number(weight):
            raise err(f"streams.{name}.weight", f"must be a finite number, got {weight!r}")
        normalize = setting.get("normalize", "none")
        if normalize not in NORMALIZE_MODES:
            raise err(
                f"streams.{name}.normalize",
                f"must be one of {', '.join(NORMALIZE_MODES)}, got {normalize!r}"
                f"{did_you_mean(str(normalize), NORMALIZE_MODES)}",
            )
        out[name] = StreamSpec(float(weight), str(normalize))
    return out


#: Where a reward's weights live between reward phases (rewardzoo.core.residency).
OFFLOAD_MODES = ("none", "cpu", "drop")


LIMIT_KEYS = ("seconds", "frames", "pixels")


#: An entry's error maker: ``err(field, message)``.
_Err = Callable[[str, str], ConfigError]


def _limits(value: Any, err: _Err, name: str) -> dict[str, float | int | None]:
    """``limits: {seconds: 600, frames: 2000, pixels: 16777216}``; null lifts a limit."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise err("limits", f"must be a mapping with keys {', '.join(LIMIT_KEYS)}")
    out: dict[str, float | int | None] = {}
    for key, limit in value.items():
        if key not in LIMIT_KEYS:
            raise err(
                "limits", f"unknown limit '{key}'{did_you_mean(str(key), LIMIT_KEYS)}; limits: {', '.join(LIMIT_KEYS)}"
            )
        if limit is None:
            out[key] = None
        elif key == "seconds":
            if not _number(limit) or limit <= 0:
                raise err("limits", f"seconds must be a positive number or null, got {limit!r}")
            out[key] = float(limit)
        else:
            out[key] = positive_int(limit, f"limits.{key}", allow_none=True, entry=name)
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _weight(value: Any, datasets: tuple[str, ...] | None, err: _Err) -> Weight | dict[str, Weight]:
    if _number(value):
        return float(value)
    if isinstance(value, Mapping) and "schedule" in value:
        return _schedule(value, "weight", err)
    if isinstance(value, Mapping) and value:
        out: dict[str, Weight] = {}
        for key, w in value.items():
            if not isinstance(key, str) or not (_number(w) or isinstance(w, Mapping)):
                raise err(
                    "weight",
                    f"per-dataset weights map dataset names to finite numbers or schedules; bad item {key!r}: {w!r}",
                )
            if datasets is not None and key not in datasets:
                raise err("weight", f"weight for dataset '{key}' which is not in applicable_datasets {list(datasets)}")
            out[key] = _schedule(w, f"weight.{key}", err) if isinstance(w, Mapping) else float(w)
        return out
    raise err(
        "weight",
        f"must be a finite number, a schedule {{schedule: linear|cosine|step, start, end, steps, "
        f"after}} or a non-empty mapping dataset -> either, got {value!r}",
    )


def _schedule(value: Mapping[str, Any], where: str, err: _Err) -> WeightSchedule:
    """``{schedule: linear|cosine|step, start, end, steps, after}`` (``after`` optional, default 0)."""
    for key in value:
        if key not in SCHEDULE_KEYS:
            raise err(
                f"{where}.{key}",
                f"unknown schedule key{did_you_mean(str(key), SCHEDULE_KEYS)}; a schedule "
                f"has {', '.join(SCHEDULE_KEYS)}",
            )
    kind = value.get("schedule")
    if kind not in SCHEDULES:
        raise err(
            f"{where}.schedule",
            f"must be one of {', '.join(SCHEDULES)}, got {kind!r}{did_you_mean(str(kind), SCHEDULES)}",
        )
    for key in ("start", "end", "steps"):
        if key not in value:
            raise err(f"{where}.{key}", f"a {kind} schedule needs '{key}'")
    for key in ("start", "end"):
        if not _number(value[key]):
            raise err(f"{where}.{key}", f"must be a finite number, got {value[key]!r}")
    steps, after = value["steps"], value.get("after", 0)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise err(f"{where}.steps", f"must be an integer >= 1 (trainer steps from start to end), got {steps!r}")
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise err(f"{where}.after", f"must be an integer >= 0 (the step the schedule begins at), got {after!r}")
    return WeightSchedule(kind, float(value["start"]), float(value["end"]), steps, after)


def json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a reward config file, for editors validating YAML."""
    number = {"type": "number"}
    schedule = {
        "type": "object",
        "additionalProperties": False,
        "required": ["schedule", "start", "end", "steps"],
        "properties": {
            "schedule": {"enum": list(SCHEDULES)},
            "start": number,
            "end": number,
            "steps": {"type": "integer", "minimum": 1},
            "after": {"type": "integer", "minimum": 0},
        },
        "description": "a weight over the trainer's step (rewardzoo.spec.config.WeightSchedule)",
    }
    strings = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
    environment = {
        "oneOf": [
            {"type": "null"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "python": {"type": "string", "minLength": 1, "description": "an existing interpreter"},
                    "requirements": {
                        "oneOf": [{"type": "string"}, strings],
                        "description": "a venv rewardzoo builds once (cached)",
                    },
                    "system_site_packages": {"type": "boolean"},
                    "start_timeout_s": {"type": "number", "exclusiveMinimum": 0},
                    "call_timeout_s": {
                        "type": ["number", "null"],
                        "exclusiveMinimum": 0,
                        "description": "seconds a call waits for the worker (null: no bound)",
                    },
                    "max_restarts": {"type": "integer", "minimum": 0},
                    "shared_memory": {"type": "boolean"},
                },
                "oneOf": [{"required": ["python"]}, {"required": ["requirements"]}],
            },
        ]
    }
    entry = {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "description": "stream name, unique within the list"},
            "reward_model": {"type": "string", "description": "registry name or Python path; defaults to name"},
            "model_path": {"type": ["string", "null"], "description": "hub id, local directory or file"},
            "dtype": {"enum": ["auto", *sorted(DTYPE_ALIASES)]},
            "device": {"type": "string", "pattern": r"^(auto|cpu|mps|cuda(:\d+)?)$"},
            "batch_size": {"type": "integer", "minimum": 1},
            "applicable_datasets": {
                "oneOf": [
                    {"type": "null"},
                    {"type": "string"},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                ]
            },
            "weight": {
                "oneOf": [
                    number,
                    schedule,
                    {"type": "object", "additionalProperties": {"oneOf": [number, schedule]}, "minProperties": 1},
                ]
            },
            "async_reward": {"type": "boolean"},
            "num_workers": {"type": "integer", "minimum": 1},
            "kwargs": {"type": "object"},
            "limits": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "seconds": {"type": ["number", "null"], "exclusiveMinimum": 0},
                    "frames": {"type": ["integer", "null"], "minimum": 1},
                    "pixels": {"type": ["integer", "null"], "minimum": 1},
                },
            },
            "environment": environment,
            "offload": {
                "enum": ["none", "cpu", "drop"],
                "description": "weights between reward phases: resident, in CPU memory, or freed",
            },
            "streams": {
                "type": ["object", "null"],
                "minProperties": 1,
                "additionalProperties": {
                    "oneOf": [
                        number,
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {"weight": number, "normalize": {"enum": list(NORMALIZE_MODES)}},
                        },
                    ]
                },
                "description": "a multi-output reward's named streams, each weighted (and normalised in its group)",
            },
            "ray": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "properties": {
                    "num_gpus": {"type": "number", "minimum": 0},
                    "num_cpus": {"type": "number", "minimum": 0},
                    "replicas": {"type": "integer", "minimum": 1},
                    "max_ongoing_requests": {"type": "integer", "minimum": 1},
                },
                "description": "a Ray Serve deployment and Ray Data stage of its own with these resources",
            },
            "reference": {
                "oneOf": [
                    {"type": "boolean"},
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "reward_model": {"type": "string", "minLength": 1},
                            "environment": environment,
                            "kwargs": {"type": "object"},
                        },
                    },
                ],
                "description": "score with the reward's reference package (true: the known wrapper and environment)",
            },
        },
    }
    items = {"oneOf": [{"type": "string"}, entry]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "rewardzoo reward configuration",
        "type": "object",
        "additionalProperties": False,
        "required": ["rewards"],
        "properties": {
            "rewards": {"type": "array", "items": items},
            "eval_rewards": {"type": ["array", "null"], "items": items},
            "advantage": {"enum": ["sum", "gdpo"]},
            "environment": environment,
            "monitor": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "properties": {
                    "log": {"type": ["string", "null"]},
                    "window": {"type": "integer", "minimum": 3},
                    "saturation": {"type": ["number", "null"]},
                    "margin": {"type": "number"},
                    "inseparable": {"type": ["number", "null"]},
                    "conflict": {"type": ["number", "null"]},
                    "divergence": {"type": ["number", "null"]},
                },
            },
        },
    }


def schema_json() -> str:
    return json.dumps(json_schema(), indent=2)


#: What a user may name as a config: a YAML path, a shipped config's or a reward's name, a mapping, a loaded config.
ConfigSource = Union["RewardConfig", str, "os.PathLike[str]", Mapping[str, Any]]
