"""Reading files without surprises: regular files only (a named pipe would block for ever), UTF-8 text
with an error that names the file and the offending byte, JSONL with errors that name the line."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import IO, Any

from ..errors import InputError


def regular_file(path: str | os.PathLike, what: str, error: type[Exception] = InputError) -> Path:
    """``path`` as a Path when it is an existing regular file (symlinks followed); else ``error``.

    Checked before opening, so a FIFO, a device or a directory is refused instead of blocking a read.
    """
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise error(f"{what} file not found: '{p}'") from None
    except OSError as exc:
        raise error(f"cannot read {what} file '{p}': {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode) else "not a regular file"
        raise error(f"{what} path '{p}' is {kind}; give a regular file")
    return p


def decode_utf8(
    data: bytes, where: str, error: Callable[[str], Exception] = InputError, *, offset: int = 0, with_line: bool = True
) -> str:
    """``data`` decoded as UTF-8; ``error`` naming ``where`` (empty when the error names the file itself), the
    byte offset (``offset`` + position in ``data``) and, ``with_line``, the line otherwise."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = data[: exc.start].count(b"\n") + 1
        line = f" (line {lineno})" if with_line else ""
        raise error(
            f"{f'{where} ' if where else ''}is not UTF-8 text: byte {offset + exc.start}{line} is "
            f"0x{data[exc.start]:02x}; save it as UTF-8"
        ) from None


def read_utf8(path: str | os.PathLike, what: str, error: type[Exception] = InputError) -> str:
    """The text of a regular UTF-8 file (see :func:`regular_file` and :func:`decode_utf8`)."""
    p = regular_file(path, what, error)
    return decode_utf8(p.read_bytes(), f"{what} '{p}'", error)


#: The error of a JSON line nested deeper than the parser's recursion allows (a hostile file, not data).
NESTED_TOO_DEEPLY = "its JSON nests deeper than the parser allows"

#: The longest line :func:`jsonl_objects` reads (media are named by path, so a real line is a few kB); a longer one
#: is refused after this many bytes instead of being read whole (a 10 GB file without a newline).
MAX_LINE_BYTES = 16 << 20


def _at_line(error: Callable[[str, int], Exception], line: int, message: str) -> Exception:
    return error(message, line)


def jsonl_objects(
    path: Path, error: Callable[[str, int], Exception], where: str = "", max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file, one a line, as ``(1-based line number, object)``; blank lines are
    skipped. ``error(message, line)`` (bound to the file by the caller) when a line is longer than
    ``max_line_bytes``, not UTF-8 (the message names the byte; ``where`` names the file in it where the error
    does not), not valid JSON or not an object."""
    offset = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(iter(lambda: fh.readline(max_line_bytes + 1), b""), start=1):
            if len(raw) > max_line_bytes:
                raise error(
                    f"longer than {max_line_bytes} bytes (the longest line read; name media by path, not inline)",
                    lineno,
                )
            text = decode_utf8(raw, where, partial(_at_line, error, lineno), offset=offset, with_line=False)
            offset += len(raw)
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise error(f"not valid JSON ({exc.msg} at column {exc.colno})", lineno) from None
            except RecursionError:
                raise error(f"not a JSON object line: {NESTED_TOO_DEEPLY}", lineno) from None
            if not isinstance(row, dict):
                raise error(f"each line must be a JSON object, got {type(row).__name__}", lineno)
            yield lineno, row


def bounded_lines(
    fh: IO[str], error: Callable[[str, int], Exception], max_line_chars: int = MAX_LINE_BYTES
) -> Iterator[str]:
    """The lines of a text file (newlines kept, as iterating it gives them), ``error(message, line)`` for one longer
    than ``max_line_chars`` instead of reading it whole (for :mod:`csv`, which reads whatever line it is given)."""
    for lineno, line in enumerate(iter(lambda: fh.readline(max_line_chars + 1), ""), start=1):
        if len(line) > max_line_chars:
            raise error(f"longer than {max_line_chars} characters (the longest line read)", lineno)
        yield line


#: The line that opens a text block in a :func:`text_blocks` file: ``@@ NAME``.
BLOCK_HEADER = "@@ "


def text_blocks(path: str | os.PathLike) -> dict[str, str]:
    """The named texts of a package data file, verbatim: each starts after a line ``@@ NAME`` and ends at the
    newline before the next such line (or the file's last newline). Lines before the first header are comments.

    Reference prompts live in such files beside the judge that sends them, character for character (trailing
    spaces and blank lines included); a header line inside a text is impossible by construction."""
    text = Path(path).read_text(encoding="utf-8")
    if not text.endswith("\n"):
        raise ValueError(f"{path}: a text-block file ends with a newline")
    blocks: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text[:-1].split("\n") + [BLOCK_HEADER]:
        if line.startswith(BLOCK_HEADER):
            if name is not None:
                blocks[name] = "\n".join(lines)
            name, lines = line[len(BLOCK_HEADER) :].strip(), []
            if name in blocks:
                raise ValueError(f"{path}: the block '{name}' appears twice")
        elif name is not None:
            lines.append(line)
    return blocks
