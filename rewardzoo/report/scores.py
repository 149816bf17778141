"""Reading the JSONL that ``rewardzoo score`` writes into NumPy columns, refusing anything else."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..jobs.manifest import check_id
from ..shared.files import jsonl_objects, regular_file
from .errors import ScoreFileError

#: The keys of one score line; ``id`` (the input row's: its ``id``, or its index) keys the rows (to the manifest,
#: to a compared file), ``metadata`` (the input's, copied) and ``extras`` (``--extras``) are optional.
REQUIRED_KEYS = ("rewards", "total", "applied")
OPTIONAL_KEYS = ("id", "metadata", "extras")


@dataclass
class ScoreTable:
    """One score file as columns. ``values[name]``: float64, NaN where the score is null; ``applied[name]``:
    whether the row lists ``name`` as applied; ``lines``: each row's 1-based line in the file (blank lines
    are skipped); ``ids``: the rows' ``id`` fields when every row has one, else None."""

    path: Path
    names: list[str]
    values: dict[str, np.ndarray]
    applied: dict[str, np.ndarray]
    total: np.ndarray
    lines: np.ndarray
    ids: list | None

    def __len__(self) -> int:
        return len(self.lines)


def read_scores(path: str | os.PathLike) -> ScoreTable:
    """Read and check a score file; :class:`ScoreFileError` names the file and line of the first problem."""
    path = regular_file(path, "score", _error_at(path))
    return _table(path, _file_rows(path))


def scores_of_records(records: Sequence[Mapping], path: str | os.PathLike) -> ScoreTable:
    """The table of the records ``rewardzoo score`` has just written to ``path`` (row i is line i + 1), checked
    as a file would be."""
    return _table(Path(path), ((k, dict(r)) for k, r in enumerate(records, start=1)))


def _file_rows(path: Path) -> Iterator[tuple[int, dict]]:
    for lineno, row in jsonl_objects(path, lambda message, line: ScoreFileError(message, path=path, line=line)):
        yield lineno, _checked_line(row, path, lineno)


def _table(path: Path, rows: Iterable[tuple[int, dict]]) -> ScoreTable:
    names: list[str] | None = None
    columns: list[list[float]] = []
    applied_rows: list[list[int]] = []
    totals: list[float] = []
    lines: list[int] = []
    ids: list = []
    for lineno, row in rows:
        rewards = row["rewards"]
        if names is None:
            names = list(rewards)
            index = {n: i for i, n in enumerate(names)}
            columns = [[] for _ in names]
        elif len(rewards) != len(names) or any(n not in index for n in rewards):
            raise ScoreFileError(
                f"its rewards ({_names(rewards)}) differ from the first row's ({_names(names)}); "
                "a score file holds the output of one config",
                path=path,
                line=lineno,
            )
        for name, value in rewards.items():
            columns[index[name]].append(_number(value, f"rewards.{name}", path, lineno))
        totals.append(_number(row["total"], "total", path, lineno))
        applied_rows.append(_applied(row["applied"], index, path, lineno))
        if "id" in row:
            ids.append(_id(row["id"], path, lineno))
        lines.append(lineno)
    if names is None:
        raise ScoreFileError("is empty; `rewardzoo score` writes one line per manifest line", path=path)
    if ids and len(ids) != len(lines):
        raise ScoreFileError(f"{len(ids)} of its {len(lines)} rows have an 'id'; give every row one or none", path=path)
    n = len(lines)
    applied = {name: np.zeros(n, bool) for name in names}
    for row_index, members in enumerate(applied_rows):
        for k in members:
            applied[names[k]][row_index] = True
    return ScoreTable(
        path=path,
        names=names,
        values={n: np.asarray(c, np.float64) for n, c in zip(names, columns)},
        applied=applied,
        total=np.asarray(totals, np.float64),
        lines=np.asarray(lines, np.int64),
        ids=ids or None,
    )


def _error_at(path: str | os.PathLike):
    """A ScoreFileError factory for :func:`regular_file`, whose messages already name the file."""

    def make(message: str) -> ScoreFileError:
        err = ScoreFileError(message, path=path)
        InputError.__init__(err, message)
        return err

    return make


def _checked_line(row: dict, path: Path, lineno: int) -> dict:
    missing = [k for k in REQUIRED_KEYS if k not in row]
    if missing:
        hint = (
            " — this looks like a manifest; pass the file `rewardzoo score -o` wrote"
            if {"prompt", "image", "video", "audio", "completion"} & set(row)
            else ""
        )
        raise ScoreFileError(
            f"has no {', '.join(repr(k) for k in missing)} "
            f"(keys: {_names(row) or 'none'}), so it is not a rewardzoo score line{hint}",
            path=path,
            line=lineno,
        )
    unknown = [k for k in row if k not in REQUIRED_KEYS + OPTIONAL_KEYS]
    if unknown:
        raise ScoreFileError(
            f"unknown key(s) {_names(unknown)}; a score line has rewards, total, applied (and optionally id, "
            "metadata, extras)",
            path=path,
            line=lineno,
        )
    if not isinstance(row["rewards"], dict) or not row["rewards"]:
        raise ScoreFileError("'rewards' must be a non-empty object {name: number or null}", path=path, line=lineno)
    return row


def _number(value: object, field: str, path: Path, lineno: int) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScoreFileError(
            f"'{field}' must be a number or null, got {type(value).__name__} {value!r:.40}", path=path, line=lineno
        )
    value = float(value)
    if not math.isfinite(value):
        raise ScoreFileError(f"'{field}' is {value}; rewardzoo writes finite numbers or null", path=path, line=lineno)
    return value


def _applied(value: object, index: dict[str, int], path: Path, lineno: int) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ScoreFileError("'applied' must be a list of reward names", path=path, line=lineno)
    unknown = [v for v in value if v not in index]
    if unknown:
        raise ScoreFileError(
            f"'applied' names {_names(unknown)}, which are not among its rewards", path=path, line=lineno
        )
    return [index[v] for v in value]


def _id(value: object, path: Path, lineno: int) -> object:
    problem = check_id(value)
    if problem is not None:
        raise ScoreFileError(f"'id' {problem}", path=path, line=lineno)
    return value


def _names(items) -> str:
    items = list(items)
    return ", ".join(repr(str(i)) for i in items[:8]) + (f" and {len(items) - 8} more" if len(items) > 8 else "")
