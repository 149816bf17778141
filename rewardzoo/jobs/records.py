"""A score job's records and output rows, the same for every engine.

A *record* is what the processor gave one input row: ``{"rewards", "total", "applied", "extras"}``, ``extras`` the
per-sample diagnostics each reward reported for that row (what ``/v1/score`` returns: what ``ocr`` read, a judge's
per-dimension values), ``{reward: {key: number or text}}`` with the values the row did not get (NaN, null) left
out, so a row's record depends on the row alone, never on the rows it was scored with. Records are what the
partial file keeps (with their extras, so a resumed run writes the same rows whether or not it asks for them).

An *output row* is a record joined to its input row: ``{"id", "rewards", "total", "applied", ["extras"],
["metadata"]}``, ``id`` and ``metadata`` copied unchanged from the input (:meth:`~rewardzoo.jobs.inputs.InputRows.carried`),
``extras`` only when the job asks for them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.engine import RewardResult
    from .inputs import InputRows

#: The keys of a record.
RECORD_KEYS = frozenset({"rewards", "total", "applied", "extras"})


def score_records(result: RewardResult) -> list[dict[str, Any]]:
    """One record per sample of ``result`` (see the module docstring)."""
    records = result.records()
    for i, record in enumerate(records):
        record["extras"] = row_extras(result.extras, i)
    return records


def row_extras(extras: Mapping[str, Mapping[str, Any]], i: int) -> dict[str, dict[str, Any]]:
    """Sample i's extras, ``{reward: {key: value}}``: numbers as floats, texts as strings; a value the sample did
    not get (NaN, None; an infinity, which JSON cannot hold) is left out, and so is a reward left with none."""
    out: dict[str, dict[str, Any]] = {}
    for name, values in extras.items():
        kept: dict[str, Any] = {}
        for key, column in values.items():
            value = column[i]
            if isinstance(value, str):
                kept[key] = value
            elif value is not None and not isinstance(value, (bytes, bytearray)):
                number = float(value)
                if math.isfinite(number):
                    kept[key] = number
        if kept:
            out[name] = kept
    return out


def extras_problem(extras: Any, applied: Sequence[str]) -> str | None:
    """Why ``extras`` are not a record's extras for a row scored by ``applied`` (None when they are)."""
    if not isinstance(extras, dict):
        return "extras not an object"
    for name, values in extras.items():
        if name not in applied:
            return f"extras of '{name}', which does not apply to the row"
        if not isinstance(values, dict) or not values:
            return f"extras of '{name}' not an object of values"
        for value in values.values():
            number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not (number or isinstance(value, str)):
                return f"an extra of '{name}' neither a finite number nor a text"
    return None


def output_rows(
    rows: InputRows, records: Sequence[Mapping[str, Any]], *, extras: bool, indices: Sequence[int] | None = None
) -> list[dict[str, Any]]:
    """The output row of each record: record k joined to input row ``indices[k]`` (default: row k; see the module
    docstring), with its extras when ``extras``."""
    out = []
    for k, record in enumerate(records):
        carried = rows.carried(indices[k] if indices is not None else k)
        row: dict[str, Any] = {"id": carried["id"]}
        row.update((k, record[k]) for k in ("rewards", "total", "applied"))
        if extras:
            row["extras"] = record.get("extras", {})
        if "metadata" in carried:
            row["metadata"] = carried["metadata"]
        out.append(row)
    return out
