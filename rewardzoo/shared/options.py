"""Validation of reward and config options: one function per kind of value, one error (ConfigError).

``field`` is what the error names: ``"batch_size"`` for a config key, ``"kwargs.num_frames"`` for a
reward's own option. The loader adds the config entry's name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal, overload

from ..errors import ConfigError, did_you_mean


def number_text(value: Any) -> Any:
    """A number written as text (PyYAML reads ``1e-4`` without a dot as a string) as a float; else unchanged (for a
    typed option's or config field's before-validator)."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


@overload
def positive_int(value: Any, field: str, *, allow_none: Literal[False] = False, entry: str | None = None) -> int: ...
@overload
def positive_int(value: Any, field: str, *, allow_none: bool, entry: str | None = None) -> int | None: ...
def positive_int(value: Any, field: str, *, allow_none: bool = False, entry: str | None = None) -> int | None:
    """``value`` if it is a positive ``int`` (not a bool); ``None`` passes when ``allow_none``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        alternative = " or null" if allow_none else ""
        raise ConfigError(f"must be a positive integer{alternative}, got {value!r}", entry=entry, field=field)
    return value


def positive_float(value: Any, field: str, *, entry: str | None = None) -> float:
    """A positive finite number; a numeric string is accepted (PyYAML reads ``1e-4`` without a dot as text)."""
    try:
        number = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else math.nan
    except ValueError:
        number = math.nan
    if not (number > 0 and math.isfinite(number)):
        raise ConfigError(f"must be a positive finite number, got {value!r}", entry=entry, field=field)
    return number


def choice(value: Any, field: str, options: tuple[str, ...], *, entry: str | None = None) -> str:
    """``value`` if it is one of ``options``."""
    if value not in options:
        raise ConfigError(
            f"must be one of {', '.join(repr(o) for o in options)}, got {value!r}", entry=entry, field=field
        )
    return value


def known_options(owner: str, given: Iterable[str], options: Sequence[str]) -> None:
    """ConfigError for the first of ``given`` that is not one of ``options`` (a reward's constructor options)."""
    for key in given:
        if key not in options:
            raise ConfigError(
                f"{owner} has no option '{key}'{did_you_mean(key, options)}; options: {', '.join(options) or 'none'}",
                field="kwargs",
            )
