"""Typed reward options: each reward declares its ``kwargs:`` once, as a :class:`RewardOptions` subclass.

One declaration gives the ConfigErrors (field ``kwargs.NAME``, the expected type, a did-you-mean for unknown
keys), the JSON schema of the config's ``kwargs:`` (:meth:`RewardOptions.model_json_schema`), the card's options
table (:meth:`RewardOptions.rows`), the weight files a plan reads (:data:`WeightPath` fields) and the values the
constructor reads (``self.options``). Validation is pydantic v2's (strict: YAML's types are taken as written,
except that a number may be written as text, as PyYAML reads ``1e-4``); it is imported with the contract, never by
``import rewardzoo``.

Usage, beside the reward::

    class PickScore(PointwiseReward):
        class Options(RewardOptions):
            scale: PositiveNumber = 1 / 26
            \"\"\"Multiplies the raw score.\"\"\"

        def __init__(self, model_path=None, device="cpu", dtype="float32", **options: Any) -> None:
            super().__init__(model_path, device, dtype, **options)
            self.scale = self.options.scale
"""

from __future__ import annotations

import math
import reprlib
import warnings
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)

from ..errors import ConfigError, did_you_mean
from ..shared.device import autocast_dtype
from ..shared.options import number_text

__all__ = [
    "AfterValidator",
    "Autocast",
    "Field",
    "Number",
    "PositiveInt",
    "PositiveNumber",
    "RewardOptions",
    "Size",
    "WeightPath",
    "field_validator",
    "model_validator",
]

_Options = TypeVar("_Options", bound="RewardOptions")

# An option may bear the name of one of BaseModel's pydantic-v1 methods (vlm_judge's ``parse``): the field wins and
# those methods are never called on options, so pydantic's warning about the shadowing says nothing to users.
warnings.filterwarnings(
    "ignore",
    message=r'Field name "(parse|json|copy|schema|validate|dict|construct|fields)" in ".*Options" shadows an attribute',
    category=UserWarning,
)


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {value!r}")
    return value


#: A finite number (an int or a numeric text is taken as a float).
Number = Annotated[float, BeforeValidator(number_text), AfterValidator(_finite)]
#: A finite number above zero.
PositiveNumber = Annotated[float, Field(gt=0), BeforeValidator(number_text), AfterValidator(_finite)]
#: An integer above zero (not a bool).
PositiveInt = Annotated[int, Field(gt=0)]
#: A size ``[width, height]`` in pixels (a YAML list).
Size = Annotated[tuple[PositiveInt, PositiveInt], Strict(False)]


def _autocast_form(value: Any) -> Any:
    autocast_dtype(value, "cpu")  # a ValueError for anything that is no autocast setting on any device
    return value


#: An autocast setting: ``auto`` (the reference's autocast on the device the reward runs on), null / ``none`` /
#: false (none), or a dtype name (``float16``, ``bfloat16``); resolved per device by
#: :func:`~rewardzoo.shared.device.autocast_dtype`.
Autocast = Annotated[str | bool | None, AfterValidator(_autocast_form)]


class _WeightSource:
    """Marks an option whose value is a path or hub id the reward loads weights from."""

    def __repr__(self) -> str:
        return "WeightSource"


WEIGHT_SOURCE = _WeightSource()
#: A path or hub id the reward loads weights from (the plan and residency read these, besides ``model_path``).
WeightPath = Annotated[str, WEIGHT_SOURCE]


_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict = 60, 60, 4, 4


class RewardOptions(BaseModel):
    """The options (``kwargs:``) a reward takes: typed fields with defaults and constraints; a field's
    docstring (the string literal under it) is its description on the card and in the schema.

    A validator may raise :class:`~rewardzoo.errors.ConfigError` naming its own field (``kwargs.NAME``); a plain
    ``ValueError`` is reported under the field it validates.
    """

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        use_attribute_docstrings=True,
        arbitrary_types_allowed=True,
        validate_default=False,
    )

    @classmethod
    def from_kwargs(cls: type[_Options], values: Mapping[str, Any], owner: str | None = None) -> _Options:
        """Validated options from a ``kwargs:`` mapping; a :class:`ConfigError` naming ``kwargs.NAME`` else."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise config_error(cls, exc, owner or cls.__qualname__) from None

    @classmethod
    def default(cls, name: str) -> Any:
        """The default of option ``name`` (KeyError for an option the class does not declare)."""
        return cls.model_fields[name].get_default(call_default_factory=True)

    @classmethod
    def weight_fields(cls) -> tuple[str, ...]:
        """The options declared as :data:`WeightPath` (paths or hub ids weights are loaded from)."""
        return tuple(
            name
            for name, f in cls.model_fields.items()
            if WEIGHT_SOURCE in f.metadata or _marked(f.annotation, WEIGHT_SOURCE)
        )

    def weight_sources(self) -> list[str]:
        """The configured values of the :data:`WeightPath` options (those set)."""
        found = (getattr(self, name) for name in self.weight_fields())
        return [value for value in found if isinstance(value, str) and value]

    @classmethod
    def rows(cls) -> list[dict[str, Any]]:
        """One row per option for the card's table: name, type (as JSON schema words), default, description."""
        schema = cls.model_json_schema()
        properties = schema.get("properties", {})
        out = []
        for name, f in cls.model_fields.items():
            prop = properties.get(name, {})
            out.append(
                {
                    "name": name,
                    "type": _type_words(prop),
                    "default": None if f.is_required() else _jsonable(f.get_default(call_default_factory=True)),
                    "required": f.is_required(),
                    "description": (f.description or "").strip(),
                }
            )
        return out


def config_error(cls: type[RewardOptions], exc: ValidationError, owner: str) -> ConfigError:
    """The ConfigError for the first field pydantic refused (``kwargs.NAME``): an unknown key with a did-you-mean,
    a validator's own ConfigError as raised, else what the field must be and what it got."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    name = str(first["loc"][0]) if first["loc"] else ""
    field = f"kwargs.{name}" if name else "kwargs"
    raised = (first.get("ctx") or {}).get("error")
    if isinstance(raised, ConfigError):
        return raised if raised.field else ConfigError(raised.message, entry=raised.entry, field=field)
    if first["type"] == "extra_forbidden":
        known = list(cls.model_fields)
        return ConfigError(
            f"{owner} has no option '{name}'{did_you_mean(name, known)}; options: {', '.join(known) or 'none'}",
            field=field,
        )
    same = [e for e in errors if e["loc"][:1] == first["loc"][:1]]
    got = _SHORT.repr(first.get("input"))
    if len(same) > 1:  # a union: a member's own complaint when the value was meant for it, else what it may be
        deeper = [e for e in same if not _member_mismatch(e)]
        if not deeper:
            expected = _type_words(cls.model_json_schema().get("properties", {}).get(name, {}))
            return ConfigError(f"must be {expected}, got {got}", field=field)
        first = deeper[0]
        got = _SHORT.repr(first.get("input"))
    if first["type"] in _BOUND_ERRORS and len(first["loc"]) == 1:
        prop = cls.model_json_schema().get("properties", {}).get(name, {})
        return ConfigError(f"must be {_bounded_words(prop)}, got {got}", field=field)
    message = str(first["msg"])
    where = ".".join(str(p) for p in first["loc"][1:] if not _is_member_tag(p))
    for prefix, replacement in (("Value error, ", ""), ("Input should be ", "must be "), ("Assertion failed, ", "")):
        if message.startswith(prefix):
            message = replacement + message[len(prefix) :]
    if where:
        message = f"{where}: {message}"
    if "got " not in message:
        message = f"{message}, got {got}"
    return ConfigError(message, field=field)


def _member_mismatch(error: Mapping[str, Any]) -> bool:
    """Whether a union member refused the value for its kind alone (not for what is inside it)."""
    kind = str(error["type"])
    return len(error["loc"]) <= 2 and (
        kind.endswith(("_type", "_instance_of")) or kind in ("literal_error", "none_required")
    )


def _is_member_tag(part: Any) -> bool:
    """Whether a location part names a union member (``literal['yes_no']``, ``RegexRule``) rather than a key."""
    return isinstance(part, str) and (not part.isidentifier() or part[:1].isupper())


_BOUND_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")


def _bounded_words(prop: Mapping[str, Any]) -> str:
    """A bounded number property as words: ``an integer in [1, 100]``, ``a number > 0``, ``null or an integer >= 1``."""
    nullable = any(p.get("type") == "null" for p in prop.get("anyOf", ()))
    if "anyOf" in prop:
        prop = next((p for p in prop["anyOf"] if p.get("type") != "null"), {})
    kind = "an integer" if prop.get("type") == "integer" else "a number"
    lo = (
        ("[", prop["minimum"])
        if "minimum" in prop
        else ("(", prop["exclusiveMinimum"])
        if "exclusiveMinimum" in prop
        else None
    )
    hi = (
        ("]", prop["maximum"])
        if "maximum" in prop
        else (")", prop["exclusiveMaximum"])
        if "exclusiveMaximum" in prop
        else None
    )
    if lo and hi:
        words = f"{kind} in {lo[0]}{lo[1]}, {hi[1]}{hi[0]}"
    elif lo:
        words = f"{kind} {'>=' if lo[0] == '[' else '>'} {lo[1]}"
    elif hi:
        words = f"{kind} {'<=' if hi[0] == ']' else '<'} {hi[1]}"
    else:
        words = kind
    return f"null or {words}" if nullable else words


def _marked(annotation: Any, marker: object) -> bool:
    """Whether ``marker`` annotates ``annotation`` or a member of it (``WeightPath | None``)."""
    if marker in getattr(annotation, "__metadata__", ()):
        return True
    return any(_marked(arg, marker) for arg in get_args(annotation))


def _type_words(prop: Mapping[str, Any]) -> str:
    """A JSON schema property as a short type text: ``integer``, ``number | null``, ``'a' | 'b'``."""
    if "enum" in prop:
        return " | ".join(repr(v) for v in prop["enum"])
    if "const" in prop:
        return repr(prop["const"])
    if "anyOf" in prop:
        return " | ".join(_type_words(p) for p in prop["anyOf"])
    kind = prop.get("type")
    if kind == "array":
        return f"list of {_type_words(prop.get('items', {}))}" if prop.get("items") else "list"
    if kind == "object":
        extra = prop.get("additionalProperties")
        return f"mapping to {_type_words(extra)}" if isinstance(extra, Mapping) and extra else "mapping"
    if isinstance(kind, str):
        return kind
    if "$ref" in prop:
        return "mapping"
    return "any"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)
