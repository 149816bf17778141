"""Inputs of the Ray engine in the actors: a Parquet file's encoded media, decoded as a local run reads files.

The driver holds the rows as the job layer reads them (:func:`~rewardzoo.jobs.inputs.read_input`: light fields,
never media). A Parquet file's binary media columns (encoded image / video / audio bytes) are read only by the
actors, from the file, for the rows of their chunk (:class:`ParquetMedia`), and every encoded cell becomes what a
local run gets: a file. So the actor decodes the media as it decodes files, one conversion at a time, and holds
neither a row group's encoded bytes nor a decoded image beside them while it scores (an image kept as a PIL image
keeps its 4-byte pixels for the whole chunk).
"""

from __future__ import annotations

import bisect
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from ..jobs.manifest import MEDIA_FIELDS, MEDIA_LIST_FIELDS

#: Read buffer of a column's pages.
BUFFER_BYTES = 1 << 20


class ParquetMedia:
    """An actor's reader of a Parquet file's binary media columns. Arrow reads a row group's column whole, so the
    row group a chunk needs is read once, its cells from the chunk's first row on written to files in a folder of
    the reader's, and the Arrow memory let go before the chunk is scored; the next chunks of that row group (an
    actor's chunks come in increasing order) take their files from there, and a row not there reads its row group
    again (the files of the row group read before are deleted)."""

    def __init__(self, path: str, columns: Sequence[str]) -> None:
        import pyarrow.parquet as pq

        self.file_path = path
        self.columns = list(columns)
        # pages read through a small buffer, not the column chunk first (pre_buffer): 2x the row group's media
        # bytes at the read's peak instead of 3x (4x instead of 5x for a dictionary-encoded column)
        self.file = pq.ParquetFile(path, pre_buffer=False, buffer_size=BUFFER_BYTES)
        meta = self.file.metadata
        self.starts = [0]
        for g in range(meta.num_row_groups):
            self.starts.append(self.starts[-1] + meta.row_group(g).num_rows)
        self._read_before: list[tuple[tempfile.TemporaryDirectory[str], dict[int, dict[str, Any]]]] = []

    def files(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """The binary cells (non-null) of the given global row indices as files: ``{column: path}`` per row (a list
        column: a list of paths, None where its item is null). The paths stay until the next call; then only the
        row groups it uses are kept."""
        out: list[dict[str, Any]] = []
        used: list[tuple[tempfile.TemporaryDirectory[str], dict[int, dict[str, Any]]]] = []
        for i in indices:
            held = next((read for read in used + self._read_before if i in read[1]), None)
            if held is None:
                if not 0 <= i < self.starts[-1]:
                    raise IndexError(f"row {i} is not in the file ({self.starts[-1]} rows)")
                held = self._read(i)
            if all(held is not u for u in used):
                used.append(held)
            out.append(held[1][i])
        for folder, _ in self._read_before:
            if all(folder is not u[0] for u in used):
                folder.cleanup()
        self._read_before = used
        return out

    def _read(self, first: int) -> tuple[tempfile.TemporaryDirectory[str], dict[int, dict[str, Any]]]:
        """Row ``first``'s row group, its cells from row ``first`` on written to files in a new folder."""
        import pyarrow as pa

        folder = tempfile.TemporaryDirectory(prefix="rewardzoo-parquet-")
        g = bisect.bisect_right(self.starts, first) - 1
        rows: dict[int, dict[str, Any]] = {}
        table = self.file.read_row_group(g, columns=self.columns)
        try:
            for at in range(first - self.starts[g], table.num_rows):
                cells: dict[str, Any] = {}
                for column in self.columns:
                    cell = table.column(column)[at]
                    if not cell.is_valid:
                        continue
                    if isinstance(cell, (pa.ListScalar, pa.LargeListScalar)):  # a list of encoded items
                        cells[column] = [
                            _write(folder.name, at, column, k, _buffer(item)) if item.is_valid else None
                            for k, item in enumerate(cell.values)
                        ]
                    else:
                        cells[column] = _write(folder.name, at, column, 0, _buffer(cell))
                rows[self.starts[g] + at] = cells
        except BaseException:
            folder.cleanup()
            raise
        finally:
            del table
            pa.default_memory_pool().release_unused()
        return folder, rows

    def close(self) -> None:
        """Delete the files written."""
        for folder, _ in self._read_before:
            folder.cleanup()
        self._read_before = []


def _buffer(scalar: Any) -> Any:
    """The encoded bytes of a binary scalar (a dictionary's: its value), without a copy."""
    import pyarrow as pa

    if isinstance(scalar, pa.DictionaryScalar):
        scalar = scalar.value
    return scalar.as_buffer()


def _write(folder: str, index: int, key: str, k: int, data: Any) -> str:
    """``data`` (encoded bytes) as a new file in ``folder``, named after the sample, field and item."""
    fd, path = tempfile.mkstemp(prefix=f"{index}-{key}-{k}-", dir=folder)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


def decoded(row: dict, index: int, folder: str) -> dict:
    """A row's encoded media (bytes in the row: a Ray Dataset's) as a local run would see them: files written into
    ``folder``. Errors about them come where a local run's would, naming the field and sample."""
    out = dict(row)
    for key, value in row.items():
        if key in MEDIA_LIST_FIELDS and isinstance(value, list):
            out[key] = [_decode(key, v, index, folder, k) for k, v in enumerate(value)]
        elif key in MEDIA_FIELDS:
            out[key] = _decode(key, value, index, folder, 0)
    return out


def _decode(key: str, value: Any, index: int, folder: str, k: int) -> Any:
    if not isinstance(value, (bytes, bytearray)):
        return value
    return _write(folder, index, key, k, value)
