"""A reward config declared once, as pydantic v2 models: what each key takes, its default and its constraints.

From these models come the parsing of a config (:mod:`rewardzoo.spec.config` builds its value types from them),
its ConfigErrors (:func:`validate`: the field's path, what it must be, what was given, a did-you-mean for an unknown
key) and its JSON schema (:func:`rewardzoo.spec.config.json_schema`). A field's docstring is its description in the
schema and on the configuration reference page.

Imported when a config is parsed, never by ``import rewardzoo`` (pydantic takes a few hundred milliseconds).
"""

from __future__ import annotations

import os
import reprlib
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SkipValidation,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from ..errors import ConfigError, did_you_mean
from ..shared.device import DTYPE_ALIASES, canonical_dtype, valid_device
from ..shared.options import number_text

DEVICE_PATTERN = r"^(auto|cpu|mps|cuda(:\d+)?)$"


class Model(BaseModel):
    """A part of a config: unknown keys refused, YAML's types taken as written, finite numbers only."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, allow_inf_nan=False, use_attribute_docstrings=True
    )


def _dtype(value: str) -> str:
    return "auto" if value == "auto" else canonical_dtype(value)


def _device(value: str) -> str:
    if not valid_device(value):
        raise ValueError(f"unknown device '{value}'; use auto, cpu, cuda, cuda:N or mps")
    return value


def _plain(value: Any) -> Any:
    """A mapping of another type (a read-only view) as a dict; null (YAML's ``kwargs:`` left empty) as {}."""
    if value is None:
        return {}
    return dict(value) if isinstance(value, Mapping) and not isinstance(value, dict) else value


def _path_text(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


NonEmpty = Annotated[str, Field(min_length=1)]
PositiveInt = Annotated[int, Field(ge=1)]
#: A positive finite number; written as text too (``start_timeout_s: "1e3"``).
Seconds = Annotated[float, Field(gt=0), BeforeValidator(number_text)]


def _kind(value: Any) -> str | None:
    """The discriminator of the unions below: which alternative a value is written as (None: none of them)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "<number>"
    if isinstance(value, str):
        return "<name>"
    if isinstance(value, Mapping):
        return "<schedule>" if "schedule" in value else "<mapping>"
    return None


class ScheduleModel(Model):
    """A weight over the trainer's step (:class:`rewardzoo.spec.config.WeightSchedule`)."""

    schedule: Literal["linear", "cosine", "step"]
    """the curve from ``start`` to ``end``"""
    start: float
    """the weight until step ``after``"""
    end: float
    """the weight from step ``after + steps`` on"""
    steps: PositiveInt
    """trainer steps from start to end"""
    after: Annotated[int, Field(ge=0)] = 0
    """the step the schedule begins at"""


#: One weight: a number or a schedule.
OneWeight = Annotated[
    Annotated[float, Tag("<number>")] | Annotated[ScheduleModel, Tag("<schedule>")],
    Discriminator(_kind),
]
#: An entry's weight: one weight, or dataset -> one weight.
WeightValue = Annotated[
    Annotated[float, Tag("<number>")]
    | Annotated[ScheduleModel, Tag("<schedule>")]
    | Annotated[dict[str, OneWeight], Field(min_length=1), Tag("<mapping>")],
    Discriminator(_kind),
]


class StreamModel(Model):
    """One named output of a multi-output reward (:class:`rewardzoo.spec.config.StreamSpec`)."""

    weight: float = 1.0
    """its weight in the entry's contribution"""
    normalize: Literal["none", "group", "group_unbiased"] = "none"
    """normalised within the sample's group first (``group``: population std, ``group_unbiased``: unbiased)"""


StreamValue = Annotated[
    Annotated[float, Tag("<number>")] | Annotated[StreamModel, Tag("<mapping>")], Discriminator(_kind)
]


#: An entry's ``streams:``: stream name -> a weight or ``{weight, normalize}``.
Streams = Annotated[dict[NonEmpty, StreamValue], Field(min_length=1)]


class LimitsModel(Model):
    """Input limits of an entry (a reward's own by default; null lifts one)."""

    seconds: Annotated[float, Field(gt=0)] | None = None
    """the longest audio or video, in seconds"""
    frames: PositiveInt | None = None
    """the most video frames"""
    pixels: PositiveInt | None = None
    """the most pixels of an image or frame"""


class EnvironmentModel(Model):
    """The Python environment an entry runs in, in a worker process (:class:`rewardzoo.spec.config.EnvironmentSpec`)."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["python"]}, {"required": ["requirements"]}]})

    python: NonEmpty | None = None
    """an existing interpreter"""
    requirements: NonEmpty | Annotated[list[NonEmpty], Field(min_length=1)] | None = None
    """pip requirement strings: a venv rewardzoo builds once (cached)"""
    system_site_packages: bool = False
    """the parent's packages visible under the built environment's own"""
    start_timeout_s: Seconds = 300.0
    """seconds a worker may take to start (its models built)"""
    call_timeout_s: Seconds | None = 3600.0
    """seconds a call waits for the worker (null: no bound)"""
    max_restarts: Annotated[int, Field(ge=0)] = 3
    """how often a worker that died is started again over a run"""
    shared_memory: bool = True
    """media through shared memory on the same host (false: through the socket)"""

    @field_validator("requirements")
    @classmethod
    def _no_pip_options(cls, value: str | list[str] | None) -> str | list[str] | None:
        names = [value] if isinstance(value, str) else value or []
        if any(r.strip().startswith("-") for r in names):
            raise ValueError("'requirements' are requirement strings, not pip options")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> EnvironmentModel:
        if (self.python is None) == (self.requirements is None):
            raise ValueError(
                "name either 'python' (an existing interpreter) or 'requirements' (a venv rewardzoo builds)"
            )
        if self.python is not None and "system_site_packages" in self.model_fields_set:
            raise ValueError("'system_site_packages' applies to a built environment ('requirements'), not to 'python'")
        return self


class RayModel(Model):
    """An entry's own Ray Serve deployment and Ray Data stage (:class:`rewardzoo.spec.placement.RayPlacement`)."""

    num_gpus: Annotated[float, Field(ge=0)] | None = None
    """GPUs of one replica: a fraction of one GPU, or whole GPUs"""
    num_cpus: Annotated[float, Field(ge=0)] | None = None
    """CPUs of one replica"""
    replicas: PositiveInt | None = None
    """replicas (actors) of the deployment"""
    max_ongoing_requests: PositiveInt | None = None
    """requests one replica takes at a time"""

    @field_validator("num_gpus")
    @classmethod
    def _whole_or_fraction(cls, value: float | None) -> float | None:
        if value is not None and value > 1 and not value.is_integer():
            raise ValueError(
                f"a replica takes a fraction of one GPU (0 < num_gpus <= 1) or whole GPUs (1, 2, ...), got {value:g}"
            )
        return value


class MonitorModel(Model):
    """The ``monitor:`` section (:class:`rewardzoo.spec.monitor.MonitorSettings`); null turns an alarm off."""

    log: Annotated[str | None, BeforeValidator(_path_text)] = None
    """JSONL log, one line per update (null: no log)"""
    window: Annotated[int, Field(ge=3)] = 20
    """steps over which trends (proxy vs gold) are fitted"""
    saturation: Annotated[float, Field(ge=0, le=1)] | None = 0.5
    """alarm: share of a reward's scores within ``margin`` of a bound of its score range"""
    margin: Annotated[float, Field(gt=0, le=0.5)] = 0.01
    """"near a bound": within this fraction of the score range's width"""
    inseparable: Annotated[float, Field(ge=0, le=1)] | None = 0.5
    """alarm: share of groups whose scores cannot be told apart"""
    conflict: Annotated[float, Field(ge=-1, le=1)] | None = -0.5
    """alarm: Pearson correlation of two rewards of one split below this"""
    divergence: Annotated[float, Field(ge=0)] | None = 0.25
    """alarm: train total rising and an eval reward falling, both by more than this many standard deviations"""


class DecodeModel(Model):
    """The ``decode:`` stage: a VAE that turns the samples' latents into the pixels of the pixel rewards
    (:class:`rewardzoo.spec.config.DecodeSpec`, :mod:`rewardzoo.core.decode`)."""

    vae: Annotated[str, Field(min_length=1), BeforeValidator(_path_text)]
    """the VAE: a local diffusers folder (``config.json`` + safetensors) or a hub id (``repo`` or ``repo/subfolder``)"""
    scaling_factor: Annotated[float, Field(gt=0), BeforeValidator(number_text)] | None = None
    """the trainer's latents are divided by it (null: the VAE config's ``scaling_factor``)"""
    shift_factor: Annotated[float, BeforeValidator(number_text)] | None = None
    """added after the division (null: the VAE config's ``shift_factor``, else 0)"""
    dtype: Annotated[
        str, AfterValidator(_dtype), Field(json_schema_extra={"enum": ["auto", *sorted(DTYPE_ALIASES)]})
    ] = "auto"
    """the VAE's dtype (auto: float32 on the CPU, bfloat16 on CUDA)"""
    device: Annotated[str, AfterValidator(_device), Field(json_schema_extra={"pattern": DEVICE_PATTERN})] = "auto"
    """where the VAE runs: auto (CUDA when available), cpu, cuda, cuda:N or mps"""
    batch_size: PositiveInt = 8
    """latents decoded per VAE call"""
    layout: Literal["auto", "TCHW", "CTHW"] = "auto"
    """a video latent's axes: (T, C, H, W) or (C, T, H, W) (auto: by the VAE's latent channels)"""


class ReferenceModel(Model):
    """Where an entry's reference package runs, when not the known wrapper and environment."""

    reward_model: NonEmpty | None = None
    """the wrapper (a Python path)"""
    environment: EnvironmentModel | None = None
    """the environment it runs in (null: in process)"""
    kwargs: dict[str, Any] = {}
    """options of the wrapper"""


class EntryModel(Model):
    """One reward entry of ``rewards`` or ``eval_rewards`` (:class:`rewardzoo.spec.config.RewardSpec`)."""

    name: Annotated[str, Field(min_length=1, pattern=r"\S")]
    """stream name, unique within the list"""
    reward_model: NonEmpty | None = None
    """registry name or Python path (default: ``name``)"""
    model_path: str | None = None
    """hub id, local directory or file (default: the reward's own)"""
    revision: Annotated[str, Field(min_length=1, pattern=r"^\S+$")] | None = None
    """the hub revision (branch, tag or commit) of its weights: `rewardzoo fetch` fetches it, runs load it"""
    dtype: Annotated[
        str, AfterValidator(_dtype), Field(json_schema_extra={"enum": ["auto", *sorted(DTYPE_ALIASES)]})
    ] = "auto"
    """auto (the card's default for the device, else float32) or a dtype name"""
    device: Annotated[str, AfterValidator(_device), Field(json_schema_extra={"pattern": DEVICE_PATTERN})] = "auto"
    """auto (CUDA when available), cpu, cuda, cuda:N or mps"""
    batch_size: PositiveInt = 16
    """samples per call"""
    applicable_datasets: str | Annotated[list[str], Field(min_length=1)] | None = None
    """the datasets whose samples it scores (null: every dataset)"""
    weight: WeightValue = 1.0
    """a number, a schedule, or dataset -> either (keys within applicable_datasets)"""
    async_reward: bool = False
    """scored in a background thread"""
    num_workers: PositiveInt = 1
    """threads scoring chunks at once"""
    kwargs: Annotated[dict[str, Any], BeforeValidator(_plain)] = {}
    """the reward's options"""
    limits: LimitsModel | None = None
    """input limits (seconds of audio, frames, pixels); null lifts one"""
    environment: EnvironmentModel | None = None
    """run in a worker process of another environment (null: in process; absent: the config's)"""
    offload: Literal["none", "cpu", "drop"] = "none"
    """weights between reward phases: resident, in CPU memory, or freed"""
    streams: Streams | None = None
    """a multi-output reward's named streams, each weighted (and normalised in its group)"""
    ray: RayModel | None = None
    """a Ray Serve deployment and Ray Data stage of its own with these resources"""
    reference: bool | ReferenceModel = False
    """score with the reward's reference package (true: the known wrapper and environment)"""
    timeout_s: Seconds | None = None
    """seconds one call of this reward may take (null: no deadline); past it a required entry fails the call"""
    optional: bool = False
    """past its ``timeout_s`` the entry abstains (NaN, left out of the total) instead of failing the call"""

    @model_validator(mode="after")
    def _weights_within_datasets(self) -> EntryModel:
        datasets = self.applicable_datasets
        if isinstance(self.weight, dict) and datasets is not None:
            datasets = [datasets] if isinstance(datasets, str) else datasets
            for key in self.weight:
                if key not in datasets:
                    raise ConfigError(
                        f"weight for dataset '{key}' which is not in applicable_datasets {list(datasets)}",
                        field=f"weight.{key}",
                    )
        if self.optional and self.timeout_s is None:
            raise ConfigError(
                "an optional entry abstains when it misses its deadline: give it a timeout_s", field="optional"
            )
        return self


#: A ``rewards`` item: a reward name (``- jpeg_compressibility``) or an entry, each parsed on its own
#: (:func:`rewardzoo.spec.config.parse_spec`, whose errors name the entry).
EntryItem = SkipValidation[
    Annotated[
        Annotated[str, Tag("<name>")] | Annotated[EntryModel, Tag("<mapping>")],
        Discriminator(lambda v: "<name>" if isinstance(v, str) else "<mapping>" if isinstance(v, Mapping) else None),
    ]
]
Entries = Annotated[list[EntryItem], Field(min_length=1)]


class ConfigModel(Model):
    """A reward config file."""

    model_config = ConfigDict(title="rewardzoo reward configuration")

    rewards: Entries
    """training rewards: reward names or entries"""
    eval_rewards: Entries | None = None
    """evaluation rewards (null: the training rewards)"""
    advantage: Literal["sum", "gdpo", "pref_grpo"] = "sum"
    """how ``result.advantages()`` combines the rewards"""
    monitor: MonitorModel | None = None
    """RewardMonitor's log and alarm thresholds"""
    environment: EnvironmentModel | None = None
    """the environment of every entry that names none (null: in process)"""
    decode: DecodeModel | None = None
    """a VAE that decodes the samples' latents for the pixel rewards, once per batch (null: no decoding)"""


_M = TypeVar("_M")


def validate(kind: type[_M], data: Any, *, entry: str | None = None, prefix: tuple[str, ...] = ()) -> _M:
    """``data`` validated as ``kind`` (a model, or a type: :data:`Entries`, :data:`Streams`); the first error as a
    :class:`ConfigError` naming ``entry`` and the field's path under ``prefix``."""
    adapter: TypeAdapter[_M] = _adapter(kind)  # type: ignore[arg-type]  # a type is hashable
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise config_error(exc, data, adapter.json_schema(), entry=entry, prefix=prefix) from None


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict = 60, 60, 4, 4


def config_error(
    exc: ValidationError,
    data: Any,
    schema: Mapping[str, Any],
    *,
    entry: str | None = None,
    prefix: tuple[str, ...] = (),
) -> ConfigError:
    """The ConfigError for pydantic's first error: its field is the path of the value in ``data`` (an
    alternative of a union is reported at the union, with what the union takes), its message says what the value
    must be (from ``schema``) and what it is."""
    errors = exc.errors(include_url=False)
    # an unknown key first: most often the misspelling of a key the model then misses
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    raised = (first.get("ctx") or {}).get("error")
    loc = tuple(first["loc"])
    key = loc.index("[key]") if "[key]" in loc else None  # a mapping's key, not its value, was refused
    path, value, complete = _follow(loc[: key - 1] if key else loc, data, first["type"])
    field = _field((*prefix, *path)) or None
    if isinstance(raised, ConfigError):
        return ConfigError(
            raised.message, entry=raised.entry or entry, field=_field((*prefix, raised.field or "")) or field
        )
    node = _node(schema, path)
    if key is not None:
        names = _words(node.get("propertyNames", {"type": "string"}))
        return ConfigError(f"its keys must be {names}, got {_SHORT.repr(loc[key - 1])}", entry=entry, field=field)
    if complete and first["type"] == "missing":
        return ConfigError(f"needs '{path[-1]}', {_words(node)}", entry=entry, field=field)
    if complete and first["type"] == "extra_forbidden":
        known = list(_object(_node(schema, path[:-1])).get("properties", {}))
        name = str(path[-1])
        what = "top-level key" if len(path) == 1 and not prefix and entry is None and "rewards" in known else "key"
        return ConfigError(
            f"unknown {what} '{name}'{did_you_mean(name, known)}; keys: {', '.join(known)}", entry=entry, field=field
        )
    if complete and first["type"] in ("value_error", "assertion_error"):
        message = str(first["msg"]).split(", ", 1)[1] if first["msg"].startswith(("Value error", "Assertion")) else ""
        return ConfigError(message or str(first["msg"]), entry=entry, field=field)
    hint = did_you_mean(value, [str(v) for v in node["enum"]]) if "enum" in node and isinstance(value, str) else ""
    return ConfigError(f"must be {_words(node)}, got {_SHORT.repr(value)}{hint}", entry=entry, field=field)


def _follow(loc: tuple[int | str, ...], data: Any, kind: str) -> tuple[tuple[int | str, ...], Any, bool]:
    """(path in ``data``, the value there, whether the whole location was followed): a discriminator's tag
    (``<...>``) is skipped; a step that is no key or index of the value is an alternative of a union, where the
    path stops (what the union takes is reported there)."""
    path: list[int | str] = []
    value = data
    for i, step in enumerate(loc):
        if isinstance(step, str) and step.startswith("<") and step.endswith(">"):
            continue
        key = isinstance(value, Mapping) and step in value
        if key or (isinstance(value, (list, tuple)) and isinstance(step, int) and 0 <= step < len(value)):
            value = value[step]
        elif i == len(loc) - 1 and kind == "missing":
            value = None
        else:
            return tuple(path), value, False
        path.append(step)
    return tuple(path), value, True


def _field(path: tuple[int | str, ...]) -> str:
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif step:
            out += f".{step}" if out else str(step)
    return out


def _alternatives(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A union's alternatives (none for an object that requires one of its keys or another)."""
    if "type" in node or "properties" in node:
        return []
    return list(node.get("anyOf", node.get("oneOf", [])))


def _object(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object schema among a node's alternatives (the node itself when it has none)."""
    for alt in _alternatives(node):
        if "properties" in alt:
            return alt
    return node


def _node(schema: Mapping[str, Any], path: tuple[int | str, ...]) -> Mapping[str, Any]:
    """The sub-schema at ``path`` ({} where the schema does not say)."""
    defs = schema.get("$defs", {})

    def resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[1]]
        return node

    def step(node: Mapping[str, Any], key: int | str) -> Mapping[str, Any] | None:
        node = resolve(node)
        if isinstance(key, str) and key in node.get("properties", {}):
            return resolve(node["properties"][key])
        if isinstance(key, str) and isinstance(node.get("additionalProperties"), Mapping):
            return resolve(node["additionalProperties"])
        if isinstance(key, int) and isinstance(node.get("items"), Mapping):
            return resolve(node["items"])
        for alt in _alternatives(node):
            found = step(alt, key)
            if found is not None:
                return found
        return None

    node: Mapping[str, Any] | None = resolve(schema)
    for key in path:
        node = step(node, key) if node is not None else None
    found: Mapping[str, Any] = _inline(node or {}, defs)
    return found


def _inline(node: Any, defs: Mapping[str, Any]) -> Any:
    """``node`` with every ``$ref`` replaced by the definition it names."""
    if isinstance(node, Mapping):
        if "$ref" in node:
            return _inline(defs[node["$ref"].rsplit("/", 1)[1]], defs)
        return {k: _inline(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


_PLURAL = {"string": "strings", "integer": "integers", "number": "numbers", "boolean": "booleans"}


def _words(node: Mapping[str, Any]) -> str:
    """What a schema node takes, in words: ``a positive integer``, ``a finite number or a mapping {weight,
    normalize}``, ``one of none, cpu, drop``."""
    if "enum" in node:
        return "one of " + ", ".join(str(v) for v in node["enum"])
    if "const" in node:
        return repr(node["const"])
    alts = _alternatives(node)
    if alts:
        words = [_words(a) for a in alts]
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
    kind = node.get("type")
    if kind == "null":
        return "null"
    if kind == "boolean":
        return "true or false"
    if kind == "string":
        return "a non-empty string" if node.get("minLength", 0) >= 1 else "a string"
    if kind == "integer":
        low = node.get("minimum")
        named = {None: "an integer", 0: "a non-negative integer", 1: "a positive integer"}
        return named.get(low, f"an integer >= {low}")
    if kind == "number":
        return "a " + _number_words(node)
    if kind == "array":
        items = node.get("items", {})
        of = f" of {_PLURAL[items['type']]}" if items.get("type") in _PLURAL else ""
        if items.get("minLength", 0) >= 1 and items.get("type") == "string":
            of = " of non-empty strings"
        return ("a non-empty list" if node.get("minItems", 0) >= 1 else "a list") + of
    if kind == "object" or "properties" in node:
        if "properties" in node:
            return "a mapping {" + ", ".join(node["properties"]) + "}"
        extra = node.get("additionalProperties")
        head = "a non-empty mapping" if node.get("minProperties", 0) >= 1 else "a mapping"
        return f"{head} to {_words(extra)}" if isinstance(extra, Mapping) and extra else head
    return "a value"


def _number_words(node: Mapping[str, Any]) -> str:
    low, high = node.get("minimum"), node.get("maximum")
    if node.get("exclusiveMinimum") == 0 and high is None:
        return "positive finite number"
    bounds = []
    if "exclusiveMinimum" in node:
        bounds.append(f"> {node['exclusiveMinimum']:g}")
    if low is not None and high is not None:
        return f"finite number from {low:g} to {high:g}"
    if low is not None:
        bounds.append(f">= {low:g}")
    if high is not None:
        bounds.append(f"<= {high:g}")
    return "finite number" + (" " + " and ".join(bounds) if bounds else "")


def schema_of(model: type[BaseModel] | None, schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``model``'s JSON schema (or ``schema``) self-contained, as editors and the docs read it: every ``$ref``
    inlined (no model refers to itself) and no titles but the top one."""
    raw = model.model_json_schema() if model is not None else dict(schema or {})
    out: dict[str, Any] = _untitled(_inline(raw, raw.get("$defs", {})))
    title = model.model_config.get("title") if model is not None else None
    return {"title": title, **out} if title else out


def _untitled(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {
            k: ({p: _untitled(s) for p, s in v.items()} if k == "properties" else _untitled(v))
            for k, v in node.items()
            if k != "title"
        }
    if isinstance(node, list):
        return [_untitled(v) for v in node]
    return node
