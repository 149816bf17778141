"""JSONL manifests: one sample per line, media paths relative to the manifest's folder.

A line may carry ``id`` (any JSON scalar but null: a string, a number, true or false), the key an output row is
joined back to its input by. It is the manifest's, not the sample's: it is taken off the line before the sample is
built, so rewards never see it (see :func:`take_ids`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..shared.files import jsonl_objects, regular_file
from ..spec.sample import Sample

MEDIA_FIELDS = ("image", "video", "audio", "condition_audio")
MEDIA_LIST_FIELDS = ("condition_images", "condition_videos")


class ManifestError(InputError):
    """A manifest line is malformed; ``line`` is 1-based."""


def read_manifest(path: str | os.PathLike[str]) -> tuple[list[Sample], list[int]]:
    """(samples, their 1-based line numbers); blank lines are skipped. Errors name the line and field."""
    samples, lines, _, _ = read_manifest_rows(path)
    return samples, lines


def read_manifest_rows(
    path: str | os.PathLike[str],
) -> tuple[list[Sample], list[int], list[dict], list[Any] | None]:
    """(samples, their 1-based line numbers, the lines as dicts with media paths resolved and without ``id``,
    the lines' ids or None when no line has one): the one reader of a manifest file. Blank lines are skipped; a
    :class:`ManifestError` names the line (``sample``) and field (a duplicate id: both lines)."""
    path = regular_file(path, "manifest")
    samples, lines, rows, found = [], [], [], []
    for lineno, data in jsonl_objects(
        path, lambda message, line: ManifestError(message, sample=line), f"manifest '{path}'"
    ):
        try:
            found.append(data.pop(ID, None))
            rows.append(resolve_paths(data, path.parent))
            samples.append(Sample.from_dict(rows[-1]))
        except InputError as exc:
            raise ManifestError(exc.message, field=exc.field, sample=lineno) from None
        lines.append(lineno)
    ids = take_ids(found, lambda message, k: ManifestError(message, field=ID, sample=lines[k]), "line", lines)
    return samples, lines, rows, ids


#: The manifest key that names a row (never a sample field).
ID = "id"


def id_key(value: Any) -> tuple[str, Any]:
    """What makes two ids the same: a string equals the same string, a number the same number (``1`` and ``1.0``
    are one id), a boolean the same boolean (``true`` is not ``1``)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    return ("str", value)


def check_id(value: Any) -> str | None:
    """Why ``value`` cannot be an id (None when it can): an id is a string, a finite number or a boolean."""
    if isinstance(value, (str, bool)):
        return None
    if isinstance(value, (int, float)):
        return None if math.isfinite(value) else f"must be a finite number, got {value}"
    kind = "an object" if isinstance(value, dict) else "an array" if isinstance(value, list) else type(value).__name__
    return f"must be a JSON scalar (a string, a number, true or false), got {kind}"


def take_ids(
    found: Sequence[Any], error: Callable[[str, int], Exception], unit: str, numbers: Sequence[int]
) -> list[Any] | None:
    """The rows' ids (``found[k]``: row k's ``id``, None when it has none), checked: None when no row has one;
    every row has one, each a valid id used once. ``error(message, k)`` makes the exception about row k; the
    messages name the other row as ``unit`` ``numbers[j]`` ('line 3')."""
    if all(v is None for v in found):
        return None
    seen: dict[tuple[str, Any], int] = {}
    first = next(k for k, v in enumerate(found) if v is not None)
    for k, value in enumerate(found):
        if value is None:
            raise error(
                f"missing, while {unit} {numbers[first]} has one; give every {unit} an id, or none "
                f"(the output then names each row by its index)",
                k,
            )
        problem = check_id(value)
        if problem is not None:
            raise error(problem, k)
        key = id_key(value)
        if key in seen:
            raise error(f"{value!r} is also the id of {unit} {numbers[seen[key]]}; ids must be unique", k)
        seen[key] = k
    return list(found)


def resolve_paths(data: dict, root: Path) -> dict:
    """A copy of a manifest line (or table row) with its relative media paths made relative to ``root``."""
    out = dict(data)
    for key in MEDIA_FIELDS:
        if key in out and out[key] is not None:
            out[key] = _path(out[key], root, key)
    for key in MEDIA_LIST_FIELDS:
        if key in out and out[key] is not None:
            value = out[key]
            if not isinstance(value, list):
                raise InputError("must be a list of file paths", field=key)
            out[key] = [_path(v, root, key) for v in value]
    return out


def _path(value, root: Path, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"must be a file path (string), got {type(value).__name__}", field=key)
    return str((root / value) if not Path(value).is_absolute() else Path(value))
