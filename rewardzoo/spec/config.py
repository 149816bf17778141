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
advantage: sum                # or gdpo / pref_grpo: how result.advantages() combines the rewards
monitor: {log: monitor.jsonl, window: 20}   # optional: RewardMonitor's log and alarm thresholds
environment: {...}            # optional: the environment of every entry that names none (null: in process)
decode: {vae: /weights/sd3-vae, scaling_factor: 1.5305, shift_factor: 0.0609}   # optional: decode the samples'
                              # latents once per batch for the pixel rewards (DecodeSpec, rewardzoo.core.decode)
```
A bare string entry (``- jpeg_compressibility``) is shorthand for ``{name: jpeg_compressibility}``.

The value types, built from the config's declaration (:mod:`rewardzoo.spec.models`, pydantic models imported
when a config is parsed: their fields, defaults, constraints and errors, and the JSON schema);
:mod:`rewardzoo.core.resolve` resolves what needs the registry (names, ``reference:`` entries).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from ..errors import ConfigError
from ..shared.files import read_utf8
from .monitor import MonitorSettings
from .placement import RayPlacement

if TYPE_CHECKING:
    from .models import EntryModel, EnvironmentModel


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
    #: seconds one call may take (None: no deadline); see :mod:`rewardzoo.core.deadlines`
    timeout_s: float | None = None
    #: past the deadline the entry abstains (NaN, out of the total) instead of failing the call
    optional: bool = False
    #: the hub revision of its weights (None: the default branch, or with ``REWARDZOO_LOCK`` the lock's commit)
    revision: str | None = None

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
class DecodeSpec:
    """A config's ``decode:`` stage: the VAE that turns a sample's ``latent`` into the pixels its pixel rewards
    take, each batch decoded once (:mod:`rewardzoo.core.decode`): ``pixels = vae.decode(latent / scaling_factor +
    shift_factor)``, mapped from [-1, 1] to [0, 1]. ``vae``: a local diffusers folder or a hub id (safetensors
    only); ``scaling_factor`` / ``shift_factor``: None reads the VAE config's (a Wan VAE's per-channel
    ``latents_mean`` / ``latents_std`` when it has them); ``dtype`` / ``device``: the VAE's (``auto``: float32 on
    the CPU, bfloat16 on CUDA; CUDA when available); ``batch_size``: latents per VAE call; ``layout``: a video
    latent's axes (``TCHW``, ``CTHW``, or ``auto``: by the VAE's latent channels)."""

    vae: str
    scaling_factor: float | None = None
    shift_factor: float | None = None
    dtype: str = "auto"
    device: str = "auto"
    batch_size: int = 8
    layout: str = "auto"


@dataclass(frozen=True)
class RewardConfig:
    """Training and evaluation reward lists; ``eval_rewards`` falls back to ``rewards``. ``advantage``:
    how ``result.advantages()`` combines several rewards (``sum``, ``gdpo`` or ``pref_grpo``, see
    rewardzoo.core.advantages);
    ``monitor``: the ``monitor:`` section (:class:`~rewardzoo.monitor.MonitorSettings`), None when absent."""

    rewards: tuple[RewardSpec, ...]
    eval_rewards: tuple[RewardSpec, ...]
    advantage: str = "sum"
    monitor: MonitorSettings | None = None
    #: the ``decode:`` stage (None: latents are not decoded)
    decode: DecodeSpec | None = None

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


#: The ways ``result.advantages()`` combines several rewards (:mod:`rewardzoo.core.advantages`).
ADVANTAGE_MODES = ("sum", "gdpo", "pref_grpo")
#: The most values a config may hold once its YAML aliases are expanded (a real one holds a few hundred).
MAX_VALUES = 100_000
#: Levels of nesting a config may have (a reward config needs a handful; a deep one only exhausts the stack).
MAX_DEPTH = 100
#: Each reward's typed options (``{name: {"schema", "rows"}}``, generated by ``scripts/gen_options.py``).
OPTIONS_FILE = Path(__file__).resolve().parents[1] / "catalog" / "options.json"


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
    from .models import ConfigModel, validate

    config = validate(ConfigModel, dict(data) if isinstance(data, Mapping) else data)
    environment = _environment(config.environment)
    train = parse_specs(data["rewards"], "rewards", environment, expand)
    evals = (
        train if config.eval_rewards is None else parse_specs(data["eval_rewards"], "eval_rewards", environment, expand)
    )
    monitor = None if config.monitor is None else MonitorSettings(**config.monitor.model_dump())
    decode = None if config.decode is None else DecodeSpec(**config.decode.model_dump())
    return RewardConfig(train, evals, config.advantage, monitor, decode)


def parse_decode(value: Any) -> DecodeSpec | None:
    """A ``decode:`` mapping (or a :class:`DecodeSpec`, or None) as a :class:`DecodeSpec`; ConfigError naming the
    field otherwise."""
    if value is None or isinstance(value, DecodeSpec):
        return value
    from .models import DecodeModel, validate

    data = dict(value) if isinstance(value, Mapping) else value
    return DecodeSpec(**validate(DecodeModel, data, prefix=("decode",)).model_dump())


def parse_specs(
    entries: Any,
    section: str = "rewards",
    environment: EnvironmentSpec | None = None,
    expand: ExpandEntry | None = None,
) -> tuple[RewardSpec, ...]:
    """Validate a list of reward entries; errors name the entry and the field. ``environment``: the config's,
    for entries that name none."""
    from .models import Entries, validate

    validate(Entries, entries, prefix=(section,))
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
    from .models import EntryModel, validate

    if isinstance(raw, str):
        raw = {"name": raw}
    if isinstance(raw, RewardSpec):
        return raw
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: a reward entry is a mapping or a name, got {type(raw).__name__}")
    name = raw.get("name")
    entry = name if isinstance(name, str) and name.strip() else None
    if "reference" in raw and entry is not None:  # scored by the reward's reference package, in its own environment
        if expand is None:
            raise ConfigError(
                "a 'reference' entry is resolved by load_config or the processor, not parsed alone",
                entry=name,
                field="reference",
            )
        raw = expand(raw)
    _check_size(raw.get("kwargs"), entry)
    try:
        model = validate(EntryModel, dict(raw), entry=entry)
    except ConfigError as exc:
        if entry is None:  # no name to say which entry: say where it is
            raise ConfigError(f"{where}: {exc.message}", field=exc.field) from None
        raise
    return _spec(model, environment)


def _check_size(kwargs: Any, entry: str | None) -> None:
    """Python configs can share and nest objects too: the same bound on the values kwargs expand to as on YAML's."""
    count, stack = 0, [kwargs]
    while stack:
        item = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise ConfigError(
                f"kwargs expand to more than {MAX_VALUES} values (shared or recursive containers)",
                entry=entry,
                field="kwargs",
            )
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def _spec(model: EntryModel, environment: EnvironmentSpec | None) -> RewardSpec:
    """The :class:`RewardSpec` of a validated entry."""
    datasets = model.applicable_datasets
    return RewardSpec(
        name=model.name,
        reward_model=model.reward_model or model.name,
        model_path=model.model_path,
        dtype=model.dtype,
        device=model.device,
        batch_size=model.batch_size,
        applicable_datasets=(datasets,) if isinstance(datasets, str) else None if datasets is None else tuple(datasets),
        weight=_weight(model.weight),
        async_reward=model.async_reward,
        num_workers=model.num_workers,
        kwargs=dict(model.kwargs),
        limits={} if model.limits is None else {k: getattr(model.limits, k) for k in model.limits.model_fields_set},
        environment=_environment(model.environment) if "environment" in model.model_fields_set else environment,
        offload=model.offload,
        streams=None if model.streams is None else _streams(model.streams),
        ray=None if model.ray is None else RayPlacement(**model.ray.model_dump()),
        timeout_s=model.timeout_s,
        optional=model.optional,
        revision=model.revision,
    )


def _weight(value: Any) -> Any:
    """A validated weight as the spec holds it: a float, a :class:`WeightSchedule`, or dataset -> either."""
    if isinstance(value, Mapping):
        return {k: _weight(v) for k, v in value.items()}
    if isinstance(value, (int, float)):
        return float(value)
    return WeightSchedule(**value.model_dump())


def _streams(value: Mapping[str, Any]) -> dict[str, StreamSpec]:
    return {
        name: StreamSpec(float(s)) if isinstance(s, (int, float)) else StreamSpec(**s.model_dump())
        for name, s in value.items()
    }


def _environment(model: EnvironmentModel | None) -> EnvironmentSpec | None:
    if model is None:
        return None
    requirements = [model.requirements] if isinstance(model.requirements, str) else model.requirements or []
    return EnvironmentSpec(
        python=model.python,
        requirements=tuple(r.strip() for r in requirements),
        system_site_packages=model.system_site_packages,
        start_timeout_s=model.start_timeout_s,
        call_timeout_s=model.call_timeout_s,
        max_restarts=model.max_restarts,
        shared_memory=model.shared_memory,
    )


def parse_environment(value: Any, entry: str | None = None) -> EnvironmentSpec | None:
    """An ``environment:`` mapping (of an entry or a whole config) as an :class:`EnvironmentSpec`; None for null."""
    if value is None or isinstance(value, EnvironmentSpec):
        return value
    from .models import EnvironmentModel, validate

    return _environment(validate(EnvironmentModel, value, entry=entry, prefix=("environment",)))


def parse_streams(value: Any, entry: str | None = None) -> dict[str, StreamSpec] | None:
    """An entry's ``streams:`` mapping: stream name -> ``{weight, normalize}`` or a bare weight (normalize
    ``none``); None for null. The names are checked against the reward's own by the processor
    (:func:`rewardzoo.core.streams.resolve_streams`), which needs the reward."""
    if value is None:
        return None
    if isinstance(value, Mapping) and value and all(isinstance(s, StreamSpec) for s in value.values()):
        return dict(value)
    from .models import Streams, validate

    found: dict[str, Any] = validate(Streams, value, entry=entry, prefix=("streams",))
    return _streams(found)


def json_schema(options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a reward config file, for editors validating YAML: the config's models'
    (:mod:`rewardzoo.spec.models`), each entry's ``kwargs`` the options schema of the reward it names
    (``options``: name -> ``{"schema": ...}``; default: the shipped rewards', ``rewardzoo/catalog/options.json``)."""
    from .models import ConfigModel, schema_of

    if options is None:
        options = json.loads(OPTIONS_FILE.read_text(encoding="utf-8")) if OPTIONS_FILE.is_file() else {}
    schema = schema_of(ConfigModel)
    entry = schema["properties"]["rewards"]["items"]["oneOf"][1]
    entry["allOf"] = [_kwargs_rule(name, _kwargs_schema(found)) for name, found in sorted(options.items())]
    if not entry["allOf"]:
        del entry["allOf"]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def _kwargs_schema(found: Mapping[str, Any]) -> dict[str, Any]:
    """A reward's kwargs schema; a composite's (``passes_on``) takes other keys too (its inner rewards' options)."""
    from .models import schema_of

    schema = schema_of(None, found["schema"])
    if found.get("passes_on"):
        schema.pop("additionalProperties", None)
    return schema


def _kwargs_rule(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` takes reward ``name``'s options where the entry names that reward (``reward_model``, else
    ``name``)."""
    names = {
        "anyOf": [
            {"required": ["reward_model"], "properties": {"reward_model": {"const": name}}},
            {"not": {"required": ["reward_model"]}, "properties": {"name": {"const": name}}},
        ]
    }
    return {"if": names, "then": {"properties": {"kwargs": options}}}


def schema_json() -> str:
    """:func:`json_schema` as indented JSON text (what ``rewardzoo schema`` prints)."""
    return json.dumps(json_schema(), indent=2)


#: What a user may name as a config: a YAML path, a shipped config's or a reward's name, a mapping, a loaded config.
ConfigSource = Union["RewardConfig", str, "os.PathLike[str]", Mapping[str, Any]]
