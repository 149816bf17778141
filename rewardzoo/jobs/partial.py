"""A score job's resumable state, the same for every engine: ``OUT.partial.jsonl`` holds the records scored so far.

Its first line is a header with the job's fingerprint (the input's SHA-256, the config's specs of the split, the
reward names, the split); each further line is ``{"index": i, "record": {...}}``. ``--resume`` keeps the rows of
a partial file only when its fingerprint is this job's (a mismatch is refused, naming what differs); a fresh run
replaces an old partial file only when its own first rows are written (a run that fails before scoring keeps
it). The output is written atomically at the end, then the partial file goes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ..errors import RewardZooError
from .output import file_mode, write_failed

VERSION = 1


def partial_path(out: Path) -> Path:
    """Where the partial records of ``out`` go."""
    return out.with_name(out.name + ".partial.jsonl")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
    """The partial records of one job (see the module docstring)."""

    def __init__(self, path: Path, stamp: dict[str, Any], n: int) -> None:
        self.path, self.stamp, self.n = path, stamp, n
        self._fh: TextIO | None = None

    def resume(self) -> dict[int, Any]:
        """The records of a partial file written by this same job; none when there is no file."""
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
            for line in fh:
                try:
                    row = json.loads(line)
                except (json.JSONDecodeError, RecursionError):  # a line cut by the interruption
                    continue
                if isinstance(row, dict) and isinstance(row.get("index"), int) and 0 <= row["index"] < self.n:
                    done[row["index"]] = row["record"]
        return done

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
            fh.write("".join(json.dumps({"index": i, "record": r}) + "\n" for i, r in zip(indices, records)))
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
