"""Inputs of the Ray engine: manifest rows on the driver, their encoded media in the actors.

The driver needs each row's ``group_id`` and ``dataset`` (to cut the chunks and check the datasets as the local
command does) and the light fields; it never holds media. A JSONL manifest is read exactly as
:func:`~rewardzoo.manifest.read_manifest` reads it. A Parquet file is read column by column: its non-binary
columns on the driver, its binary media columns (encoded image / video / audio bytes) only by the actors, from
the file, for the rows of their chunk (:class:`ParquetMedia`). In the actor, encoded bytes become what a local
run gets from a file: a PIL image for ``image`` (decoded lazily, as from a path), a temporary file for the other
media (video and audio readers want a file).
"""

from __future__ import annotations

import bisect
import io
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..errors import InputError, RewardZooError
from ..manifest import MEDIA_FIELDS, MEDIA_LIST_FIELDS

MEDIA = MEDIA_FIELDS + MEDIA_LIST_FIELDS


@dataclass
class Rows:
    """The driver's view of the input: light samples (for the plan), row labels, JSON-ready rows.

    ``rows[i]`` is row i as a resolved manifest line without its binary media columns; ``parquet`` is the Parquet
    file the actors read those columns (``binary``) from, when there are any.
    """

    samples: list
    labels: list[str]
    rows: list[dict]
    parquet: str | None = None
    binary: tuple[str, ...] = field(default_factory=tuple)


def load_rows(path: str | os.PathLike) -> Rows:
    """A JSONL manifest or a Parquet file; errors as in ``rewardzoo score`` (a JSONL row is named by its 1-based
    line, a Parquet row by its 0-based row index)."""
    if Path(path).suffix == ".parquet":
        return load_parquet(Path(path))
    from ..manifest import ManifestError, _lines, _resolve_paths
    from ..sample import Sample
    from ..shared.files import regular_file

    path = regular_file(path, "manifest")
    samples, labels, rows = [], [], []
    try:  # read_manifest's loop, keeping the resolved lines too (one pass over the file)
        for lineno, data in _lines(path):
            try:
                rows.append(_resolve_paths(data, path.parent))
                samples.append(Sample.from_dict(rows[-1]))
            except InputError as exc:
                raise ManifestError(exc.message, field=exc.field, sample=lineno) from None
            labels.append(f"line {lineno}")
    except ManifestError as exc:
        raise RewardZooError(exc.with_label(f"line {exc.sample}")) from None
    return Rows(samples, labels, rows)


def _is_binary(typ) -> bool:
    import pyarrow as pa

    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        typ = typ.value_type
    return pa.types.is_binary(typ) or pa.types.is_large_binary(typ)


def load_parquet(path: Path) -> Rows:
    """Parquet rows as manifest lines: null cells are absent; media columns hold paths (relative to the file's
    folder) or encoded bytes, which stay in the file for the actors."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise RewardZooError(f"input '{path}' is not a file")
    schema = pq.read_schema(path)
    binary = tuple(name for name in schema.names if _is_binary(schema.field(name).type))
    for name in binary:
        if name not in MEDIA:
            raise RewardZooError(f"column '{name}' holds bytes; encoded bytes are supported for the media fields "
                                 f"({', '.join(MEDIA)}) only")
    light = [n for n in schema.names if n not in binary]
    records = pq.read_table(path, columns=light).to_pylist() if light else \
        [{} for _ in range(pq.ParquetFile(path).metadata.num_rows)]
    out = load_records(records, path.parent)
    if binary:
        out.parquet, out.binary = str(path.resolve()), binary
    return out


def load_records(records: Sequence[dict], root: Path) -> Rows:
    """Table rows (Parquet, a Ray Dataset) as manifest lines; relative media paths are relative to ``root``.
    Encoded bytes in a row stay in it (a Ray Dataset's rows)."""
    from ..manifest import _resolve_paths
    from ..sample import Sample

    samples, rows = [], []
    for i, record in enumerate(records):
        data = {k: v for k, v in record.items() if v is not None}
        encoded = {k: v for k, v in data.items() if has_bytes(v)}
        try:
            bad = next((k for k in encoded if k not in MEDIA), None)
            if bad is not None:
                raise InputError("encoded bytes are supported for the media fields only", field=bad)
            if isinstance(data.get("metadata"), dict):
                data["metadata"] = json.dumps(data["metadata"])
            light = _resolve_paths({k: v for k, v in data.items() if k not in encoded}, root)
            samples.append(Sample.from_dict(light))
        except InputError as exc:
            raise RewardZooError(exc.with_label(f"row {i}")) from None
        rows.append({**light, **encoded})
    return Rows(samples, [f"row {i}" for i in range(len(rows))], rows)


def has_bytes(value: Any) -> bool:
    return isinstance(value, (bytes, bytearray)) or (isinstance(value, list) and any(
        isinstance(v, (bytes, bytearray)) for v in value))


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
        except Exception as exc:  # noqa: BLE001 - any decoder failure is a bad input row
            raise InputError(f"cannot read image bytes: {type(exc).__name__}: {exc}", field=key,
                             sample=index) from None
    fd, path = tempfile.mkstemp(prefix=f"{index}-{key}-{k}-", dir=folder)
    with os.fdopen(fd, "wb") as fh:
        fh.write(value)
    return path
