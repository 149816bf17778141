"""Inputs of the Ray engine in the actors: a Parquet file's encoded media, decoded as a local run reads files.

The driver holds the rows as the job layer reads them (:func:`~rewardzoo.jobs.inputs.read_input`: light fields,
never media). A Parquet file's binary media columns (encoded image / video / audio bytes) are read only by the
actors, from the file, for the rows of their chunk (:class:`ParquetMedia`). In the actor, encoded bytes become
what a local run gets from a file: a PIL image for ``image`` (decoded lazily, as from a path), a temporary file for
the other media (video and audio readers want a file).
"""

from __future__ import annotations

import bisect
import io
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from ..errors import InputError
from ..jobs.manifest import MEDIA_FIELDS, MEDIA_LIST_FIELDS


class ParquetMedia:
    """An actor's reader of a Parquet file's binary media columns: the row groups a chunk touches, the last one
    kept (consecutive chunks share row groups)."""

    def __init__(self, path: str, columns: Sequence[str]) -> None:
        import pyarrow.parquet as pq

        self.file_path, self.file = path, pq.ParquetFile(path)
        self.columns = list(columns)
        meta = self.file.metadata
        self.starts = [0]
        for g in range(meta.num_row_groups):
            self.starts.append(self.starts[-1] + meta.row_group(g).num_rows)
        self._cached: tuple[int, dict[str, list]] | None = None

    def _group(self, g: int) -> dict[str, list]:
        if self._cached is None or self._cached[0] != g:
            self._cached = (g, self.file.read_row_group(g, columns=self.columns).to_pydict())
        return self._cached[1]

    def rows(self, indices: Sequence[int]) -> list[dict]:
        """The binary cells (non-null) of the given global row indices."""
        out = []
        for i in indices:
            g = bisect.bisect_right(self.starts, i) - 1
            cols, at = self._group(g), i - self.starts[g]
            out.append({c: cols[c][at] for c in self.columns if cols[c][at] is not None})
        return out


def decoded(row: dict, index: int, folder: str) -> dict:
    """A row's encoded media as a local run would see them from files: ``image`` as a PIL image, other media as
    files written into ``folder``. Errors name the field and the sample (``index``, in the chunk)."""
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
    if key == "image":
        from PIL import Image

        try:
            return Image.open(io.BytesIO(value))
        except Exception as exc:
            raise InputError(f"cannot read image bytes: {type(exc).__name__}: {exc}", field=key, sample=index) from None
    fd, path = tempfile.mkstemp(prefix=f"{index}-{key}-{k}-", dir=folder)
    with os.fdopen(fd, "wb") as fh:
        fh.write(value)
    return path
