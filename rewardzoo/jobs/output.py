"""The one output check and the one atomic writer of every file rewardzoo writes (scores as JSONL or
Parquet, the HTML report).

A file is written into a temporary file beside it and renamed over it, so a failed or interrupted write leaves
the old file (or none), never a partial one. It gets the mode any new file would get, ``0o666 & ~umask``
(``mkstemp``'s 0600 would keep scores and reports from the people they are written for).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..errors import OutputWriteError, RewardZooError


def check_output(
    out: Path,
    inputs: Mapping[str, Path],
    *,
    holds: str = "the scores",
    option: str = "--out",
    example: str | None = None,
    error: Callable[[str], Exception] = RewardZooError,
) -> Path:
    """Refuse, before any work, an output that would overwrite one of ``inputs`` (named by their keys) or
    cannot be written; returns ``out``. ``holds`` says what the file is for, ``example`` a file name the
    directory message suggests; ``error`` makes the exception (the report's family, or :class:`RewardZooError`)."""
    resolved = out.resolve()
    for what, path in inputs.items():
        if resolved == path.resolve() or (path.exists() and out.exists() and out.samefile(path)):
            raise error(f"{option} '{out}' is {what}; write {holds} to another file")
    if out.is_dir():
        raise error(
            f"{option} '{out}' is a directory; give a file path" + (f" such as {out / example}" if example else "")
        )
    special = not_a_regular_file(out)
    if special:
        raise error(f"{option} '{out}' is {special}; writing would replace it: give a regular file path")
    parent = resolved.parent
    existing = next(folder for folder in (parent, *parent.parents) if folder.exists())
    if not existing.is_dir():
        raise error(f"{option} '{out}': '{existing}' is a file, not a folder")
    try:  # try it (permissions, read-only or pseudo file systems); the folder is needed for the output anyway
        parent.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(prefix=f".{out.name}.", dir=parent).close()
    except OSError as exc:
        raise error(f"{option} '{out}' cannot be written: {exc.strerror or exc}") from None
    return out


def not_a_regular_file(path: Path) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a link to one (a named pipe, a device, a
    socket), else None: the atomic rename would replace such a node with a regular file."""
    try:
        mode = path.stat().st_mode
    except OSError:  # absent (or a dangling link, which the rename replaces)
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kinds = [(stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]
    return next((kind for test, kind in kinds if test(mode)), "a socket" if stat.S_ISSOCK(mode) else "not a file")


def file_mode() -> int:
    """The mode of a new file under this process's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomically(path: Path, write: Callable[[str], object]) -> None:
    """Write ``path`` atomically: ``write(tmp)`` fills a temporary file beside it, which then replaces it. A
    named pipe, device or socket at ``path`` is never replaced (:class:`OutputWriteError`)."""
    special = not_a_regular_file(path)
    if special:
        raise OutputWriteError(f"cannot write '{path}': it is {special}; nothing was replaced")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise write_failed(path, exc) from None
    os.close(fd)
    try:
        os.chmod(tmp, file_mode())
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise write_failed(path, exc) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_failed(path: Path, exc: OSError, what: str = "") -> OutputWriteError:
    """The typed error of a failed write of ``path`` (``what`` it held, when not the file itself)."""
    held = f" ({what})" if what else ""
    return OutputWriteError(
        f"cannot write '{path}'{held}: {exc.strerror or exc}; nothing was replaced", errno=exc.errno
    )


def write_text(path: Path, text: str) -> None:
    """A UTF-8 text file (the HTML report), atomically."""
    write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_jsonl(path: Path, records: Sequence[object]) -> None:
    """One JSON line per record, atomically."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record) + "\n")

    write_atomically(path, write)


def write_scores(path: Path, rows: Sequence[dict], names: Sequence[str]) -> None:
    """A score job's output rows (:mod:`~rewardzoo.jobs.records`), atomically: Parquet for a ``.parquet`` path
    (:func:`write_scores_parquet`), else JSONL, one line a row."""
    if path.suffix == ".parquet":
        write_scores_parquet(path, rows, names)
    else:
        write_jsonl(path, rows)


#: The columns of a Parquet score file besides one a reward: no reward may be named so.
PARQUET_COLUMNS = ("id", "total", "applied", "index", "extras", "metadata")


def write_scores_parquet(path: Path, rows: Sequence[dict], names: Sequence[str]) -> None:
    """Output rows as a Parquet table, atomically: ``id`` (the rows' ids, a row without one its index: one Arrow
    type when they share one, else their JSON text), a float64 column per reward stream (``names``), ``total``, ``applied`` (a list of
    names), the input row ``index``; ``extras`` when the rows hold them (a struct of a struct per reward: a float64
    or string field per extra, null where a row has none; left out when no row has any); ``metadata`` when a row
    has one (a string: the text as given, a mapping as its JSON text; null where a row has none)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {"id": _id_column([r.get("id", k) for k, r in enumerate(rows)])}
    cols.update({n: pa.array([r["rewards"].get(n) for r in rows], type=pa.float64()) for n in names})
    cols["total"] = pa.array([r["total"] for r in rows], type=pa.float64())
    cols["applied"] = pa.array([r["applied"] for r in rows], type=pa.list_(pa.string()))
    cols["index"] = pa.array(range(len(rows)), type=pa.int64())
    if any("extras" in r for r in rows):
        extras = _extras_column([r.get("extras") or {} for r in rows])
        if extras is not None:
            cols["extras"] = extras
    if any("metadata" in r for r in rows):
        meta = [r.get("metadata") for r in rows]
        cols["metadata"] = pa.array(
            [m if m is None or isinstance(m, str) else json.dumps(m) for m in meta], pa.string()
        )
    write_atomically(path, lambda tmp: pq.write_table(pa.table(cols), tmp))


def _id_column(ids: list) -> object:
    """The ids as one Arrow column: their own type when they share one (strings, integers, numbers, booleans),
    else each one's JSON text."""
    import pyarrow as pa

    kinds = {bool if isinstance(i, bool) else float if isinstance(i, (int, float)) else str for i in ids}
    if len(kinds) <= 1:
        try:
            return pa.array(ids)
        except (pa.ArrowException, OverflowError):  # an integer past int64
            pass
    return pa.array([json.dumps(i) for i in ids], pa.string())


def _extras_column(extras: list[dict]) -> object | None:
    """Each row's extras as a struct column ``{reward: {key: value}}``: a key's field is string when any row's
    value is text, else float64; None when no row has any."""
    import pyarrow as pa

    kinds: dict[str, dict[str, object]] = {}
    for row in extras:
        for name, values in row.items():
            known = kinds.setdefault(name, {})
            for key, value in values.items():
                if isinstance(value, str):
                    known[key] = pa.string()
                else:
                    known.setdefault(key, pa.float64())
    if not kinds:
        return None
    typ = pa.struct([pa.field(n, pa.struct([pa.field(k, t) for k, t in keys.items()])) for n, keys in kinds.items()])
    cells = [
        {
            n: ({k: _cell(row.get(n, {}).get(k), t) for k, t in keys.items()} if n in row else None)
            for n, keys in kinds.items()
        }
        for row in extras
    ]
    return pa.array(cells, type=typ)


def _cell(value: object, typ: object) -> object:
    import pyarrow as pa

    if value is None:
        return None
    return str(value) if typ == pa.string() else value
