"""A score job's resumable state, the same for every engine: ``OUT.partial.jsonl`` holds the records scored so far.

Its first line is a header with the job's fingerprint (the input's SHA-256, the config's specs of the split, the
reward names, the split); each further line is ``{"index": i, "record": {...}, "media": [...]}``: ``media`` holds,
for each media file the row names (in field order), its device, inode, size, modification and change times and
SHA-256, taken after the row was scored and only when its ``stat`` had not changed since before (else ``null``).
``--resume`` refuses a partial file whose fingerprint is not this job's (naming what differs), and keeps a row's
record only when it passes every check: the record is what this job writes for that row (:func:`record_problem`:
the job's reward names, a finite number for each reward that applies to the row's dataset and null for the others,
the applied list, the total, the extras of the applied rewards), and each media file is the one scored (the same ``stat``, or, where it changed, the
same SHA-256: a folder moved or restored keeps its rows). Any other row is rescored, never copied, and one line on
stderr says how many. A fresh run replaces an old partial file only when its own first rows are written (a run that
fails before scoring keeps it). The output is written atomically at the end, then the partial file goes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..errors import RewardZooError
from .manifest import MEDIA_FIELDS, MEDIA_LIST_FIELDS
from .output import file_mode, write_failed
from .records import RECORD_KEYS, extras_problem

VERSION = 1


def partial_path(out: Path) -> Path:
    """Where the partial records of ``out`` go."""
    return out.with_name(out.name + ".partial.jsonl")


def _sha256(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def media_paths(row: Mapping[str, Any]) -> list[str]:
    """The media files a row names (resolved paths, in field order); encoded bytes in a row are not files."""
    out: list[str] = []
    for key in (*MEDIA_FIELDS, *MEDIA_LIST_FIELDS):
        value = row.get(key)
        out += [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
    return out


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _stats(paths: Sequence[str]) -> list[list[int] | None]:
    return [_stat(path) for path in paths]


def _media_unchanged(stamp: Any, paths: Sequence[str]) -> bool:
    """Whether ``paths`` are the files of a row's ``media`` stamp: each with the same ``stat``, or the same bytes."""
    if not isinstance(stamp, list) or len(stamp) != len(paths):
        return False
    for item, path in zip(stamp, paths):
        if not (isinstance(item, list) and len(item) == 6 and isinstance(item[5], str)):
            return False
        now = _stat(path)
        if now is None:
            return False
        if now != item[:5]:
            try:
                if _sha256(path) != item[5]:
                    return False
            except OSError:
                return False
    return True


def record_problem(record: Any, specs: Sequence[Any], dataset: str | None) -> str | None:
    """Why ``record`` is not what this job writes for a row of ``dataset`` (None when it is): a mapping of exactly
    ``rewards`` (each reward of ``specs``: a finite number where it applies to ``dataset``, null elsewhere),
    ``applied`` (the rewards that apply, in config order), ``total`` (a finite number, null when none applies) and
    ``extras`` (:func:`~rewardzoo.jobs.records.extras_problem`)."""
    if not isinstance(record, dict) or set(record) != RECORD_KEYS:
        return "not a score record"
    rewards, applied = record["rewards"], [s.name for s in specs if s.applies_to(dataset)]
    if not isinstance(rewards, dict) or set(rewards) != {s.name for s in specs}:
        return "not this job's reward names"
    for name, value in rewards.items():
        if not (_finite(value) if name in applied else value is None):
            return f"reward '{name}' is {json.dumps(value)}"
    if record["applied"] != applied:
        return "not the rewards that apply to the row"
    extras = extras_problem(record["extras"], applied)
    if extras is not None:
        return extras
    total = record["total"]
    # an entry with normalised streams may leave a total null where a group has too few samples
    streams = total is None and any(getattr(s, "streams", None) for s in specs)
    if not (_finite(total) if applied else total is None) and not streams:
        return f"total is {json.dumps(total)}"
    return None


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fingerprint(input_path: str | os.PathLike, specs: Sequence[Any], split: str) -> dict[str, Any]:
    """What makes two runs' records interchangeable: the same input bytes, the same reward specs, the same split."""
    canonical = json.dumps(
        [dataclasses.asdict(s) if dataclasses.is_dataclass(s) and not isinstance(s, type) else s for s in specs],
        sort_keys=True,
        default=repr,
    )
    return {
        "manifest": _sha256(Path(input_path)),
        "config": hashlib.sha256(canonical.encode()).hexdigest(),
        "rewards": [getattr(s, "name", str(s)) for s in specs],
        "split": split,
    }


_WHAT = {
    "manifest": "the input file's contents",
    "config": "the config's reward entries",
    "rewards": "the reward streams",
    "split": "the split",
}


class PartialFile:
    """The partial records of one job (see the module docstring). ``rows`` (the job's input rows, resolved) and
    ``specs`` (its reward specs) are what :meth:`resume` checks each kept row against; ``rows=None`` keeps none."""

    def __init__(self, path: Path, stamp: dict[str, Any], n: int, rows: Any = None, specs: Sequence[Any] = ()) -> None:
        self.path, self.stamp, self.n = path, stamp, n
        self.rows, self.specs = rows, tuple(specs)
        self._fh: TextIO | None = None
        self._before: dict[int, list[list[int] | None]] = {}

    def _paths(self, i: int) -> list[str]:
        return media_paths(self.rows.rows[i]) if self.rows is not None else []

    def before_scoring(self, indices: Sequence[int]) -> None:
        """Note the ``stat`` of the media of rows ``indices`` before they are scored (see :meth:`add`)."""
        for i in indices:
            self._before[i] = _stats(self._paths(i))

    def _media(self, i: int) -> list[list[Any]] | None:
        """Row i's media stamp, or None when its files changed since :meth:`before_scoring` (or were not noted)."""
        before = self._before.pop(i, None)
        paths = self._paths(i)
        if before is None or any(b is None for b in before):
            return None
        try:
            digests = [_sha256(path) for path in paths]
        except OSError:
            return None
        if _stats(paths) != before:  # changed while scored or hashed: what was scored is unknown
            return None
        return [[*b, d] for b, d in zip(before, digests) if b is not None]

    def resume(self) -> dict[int, Any]:
        """The records of a partial file written by this same job that pass the checks (the module docstring);
        none when there is no file. One line on stderr counts the rows whose records were refused."""
        if not self.path.exists():
            return {}
        done: dict[int, Any] = {}
        with self.path.open(encoding="utf-8", errors="replace") as fh:
            header = self._header(fh.readline())
            differs = [
                f"{_WHAT[k]} ({_show(header.get(k))} then, {_show(self.stamp[k])} now)"
                for k in _WHAT
                if header.get(k) != self.stamp[k]
            ]
            if differs:
                raise RewardZooError(
                    f"--resume: '{self.path}' was written by another job: {'; '.join(differs)} "
                    "differ; delete it or run without --resume"
                )
            refused: dict[str, int] = {}
            for line in fh:
                problem = self._problem(line, done)
                if problem is not None and line.endswith("\n"):  # an unended last line: cut by the interruption
                    refused[problem] = refused.get(problem, 0) + 1
        if refused:
            what = ", ".join(f"{k}: {v}" for k, v in sorted(refused.items(), key=lambda kv: -kv[1]))
            print(
                f"rewardzoo: --resume: {sum(refused.values())} record(s) of '{self.path}' not kept, their rows "
                f"are rescored ({what})",
                file=sys.stderr,
            )
        return done

    def _problem(self, line: str, done: dict[int, Any]) -> str | None:
        """Keep the row of one partial line in ``done`` (None), or why not."""
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError, ValueError):
            return "not JSON"
        if not isinstance(row, dict) or set(row) != {"index", "record", "media"}:
            return "not a partial record"
        i = row["index"]
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.n or self.rows is None:
            return "not a row of the input"
        done.pop(i, None)  # a later line of a row replaces an earlier one, kept or not
        problem = record_problem(row["record"], self.specs, self.rows.samples[i].dataset)
        if problem is not None:
            return "record not valid for this job"
        if not _media_unchanged(row["media"], self._paths(i)):
            return "media changed since scored"
        done[i] = row["record"]
        return None

    def _header(self, line: str) -> dict[str, Any]:
        try:
            header = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            header = None
        if not isinstance(header, dict) or header.get("rewardzoo_partial") != VERSION:
            raise RewardZooError(
                f"--resume: '{self.path}' is not a rewardzoo partial file of this version (no "
                "fingerprint header); delete it or run without --resume"
            )
        return header

    def add(self, indices: Sequence[int], records: Sequence[Any], *, resumed: bool) -> None:
        """Append the records of rows ``indices``; the first call of a fresh run replaces any old file."""
        try:
            fh = self._fh if self._fh is not None else self._open(resumed)
            lines = [{"index": i, "record": r, "media": self._media(i)} for i, r in zip(indices, records)]
            fh.write("".join(json.dumps(line) + "\n" for line in lines))
            fh.flush()
        except OSError as exc:
            raise write_failed(self.path, exc, "the partial records") from None

    def _open(self, resumed: bool) -> TextIO:
        if resumed and self.path.exists():
            self._fh = self.path.open("a", encoding="utf-8")
            return self._fh
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            os.chmod(tmp, file_mode())
            fh = os.fdopen(fd, "w", encoding="utf-8")
            fh.write(json.dumps({"rewardzoo_partial": VERSION, **self.stamp}) + "\n")
            fh.flush()
            os.replace(tmp, self.path)  # the open handle now writes the partial file
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._fh = fh
        return fh

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def finish(self) -> None:
        """The output is written: the partial records go."""
        self.close()
        self.path.unlink(missing_ok=True)


def _show(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64:
        return f"sha256 {value[:12]}"
    return json.dumps(value)


def kept_note(exc: RewardZooError, partial: PartialFile, done: int) -> RewardZooError:
    """``exc`` (of its own class) saying that the ``done`` rows scored so far are kept for ``--resume``."""
    if done <= 0 or not partial.path.exists():
        return exc
    err = type(exc).__new__(type(exc))
    err.__dict__.update(exc.__dict__)
    err.args = (
        f"{exc}; the {done} rows scored so far are kept in '{partial.path}': run the same command with "
        "--resume to score only the rest",
    )
    return err
