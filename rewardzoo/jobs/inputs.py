"""The rows of a score job's input, each with its label: a JSONL manifest's 'line N' (1-based) or a table's
'row N' (0-based, a Parquet file's or a Ray Dataset's).

A JSONL manifest is read by :func:`~rewardzoo.jobs.manifest.read_manifest_rows` (the one manifest reader). A Parquet
file is read column by column: its non-binary columns here, its binary media columns (encoded image / video /
audio bytes) only where they are scored (the Ray engine's actors read them from the file). ``pyarrow`` is
imported only for a Parquet input.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError, RewardZooError
from ..spec.sample import Sample
from .manifest import ID, MEDIA_FIELDS, MEDIA_LIST_FIELDS, ManifestError, read_manifest_rows, resolve_paths, take_ids

MEDIA = MEDIA_FIELDS + MEDIA_LIST_FIELDS


@dataclass
class InputRows:
    """A job's input: light samples (for the plan), JSON-ready rows and how each is named in errors.

    ``rows[i]`` is row i as a resolved manifest line, without the binary media columns of a Parquet file;
    ``unit`` is ``"line"`` (a manifest) or ``"row"`` (a table) and ``numbers[i]`` row i's line or row number;
    ``parquet`` is the Parquet file the binary columns (``binary``) stay in, when there are any; ``names``, when
    set, replaces the 'line N' labels (a job whose manifest was written from another file names that file's lines).
    ``ids``: each row's ``id`` (None: no row has one; rewards never see it); ``metadata``: each row's ``metadata``
    as the input holds it, None where absent (None: read it from ``rows``). :meth:`carried` is what an output row
    copies from its input.
    """

    samples: list[Sample]
    rows: list[dict]
    unit: str
    numbers: list[int]
    parquet: str | None = None
    binary: tuple[str, ...] = field(default_factory=tuple)
    names: Sequence[str] | None = None
    ids: list[Any] | None = None
    metadata: list[Any] | None = None

    def row_id(self, i: int) -> Any:
        """Row i's ``id``, or its 0-based index in the input when the input has no ids."""
        return self.ids[i] if self.ids is not None else i

    def carried(self, i: int) -> dict[str, Any]:
        """What row i's output row carries from its input: ``id`` (see :meth:`row_id`) and ``metadata`` unchanged
        (left out where the row has none)."""
        meta = self.metadata[i] if self.metadata is not None else self.rows[i].get("metadata")
        return {ID: self.row_id(i), **({"metadata": meta} if meta is not None else {})}

    def label(self, i: int) -> str:
        """Row i as an error names it: 'line 7', 'row 6' (or ``names[i]``)."""
        return self.names[i] if self.names is not None else f"{self.unit} {self.numbers[i]}"

    @property
    def labels(self) -> list[str]:
        return [self.label(i) for i in range(len(self.numbers))]


def read_input(path: str | os.PathLike, *, tables: bool = False) -> InputRows:
    """A JSONL manifest, or with ``tables`` also a Parquet file (by its ``.parquet`` suffix). Errors are
    :class:`~rewardzoo.errors.RewardZooError` naming the line (or row) and the field."""
    if tables and Path(path).suffix == ".parquet":
        return read_parquet(Path(path))
    try:
        samples, lines, rows, ids = read_manifest_rows(path)
    except ManifestError as exc:
        raise InputError(exc.with_label(lambda n: f"line {n}")) from None
    return InputRows(samples, rows, "line", lines, ids=ids)


def _is_binary(typ) -> bool:
    import pyarrow as pa

    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        typ = typ.value_type
    return pa.types.is_binary(typ) or pa.types.is_large_binary(typ)


def read_parquet(path: Path) -> InputRows:
    """Parquet rows as manifest lines: null cells are absent; media columns hold paths (relative to the file's
    folder) or encoded bytes, which stay in the file."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise RewardZooError(f"input '{path}' is not a file")
    schema = pq.read_schema(path)
    binary = tuple(name for name in schema.names if _is_binary(schema.field(name).type))
    for name in binary:
        if name not in MEDIA:
            raise RewardZooError(
                f"column '{name}' holds bytes; encoded bytes are supported for the media fields "
                f"({', '.join(MEDIA)}) only"
            )
    light = [n for n in schema.names if n not in binary]
    records = (
        pq.read_table(path, columns=light).to_pylist()
        if light
        else [{} for _ in range(pq.ParquetFile(path).metadata.num_rows)]
    )
    out = rows_of_records(records, path.parent)
    if binary:
        out.parquet, out.binary = str(path.resolve()), binary
    return out


def rows_of_records(records: Sequence[dict], root: Path) -> InputRows:
    """Table rows (Parquet, a Ray Dataset) as manifest lines; relative media paths are relative to ``root``.
    Encoded bytes in a row stay in it (a Ray Dataset's rows); an ``id`` column (null: none) names the rows."""
    samples, rows, found, metadata = [], [], [], []
    for i, record in enumerate(records):
        data = {k: v for k, v in record.items() if v is not None}
        found.append(data.pop(ID, None))
        metadata.append(data.get("metadata"))
        encoded = {k: v for k, v in data.items() if has_bytes(v)}
        try:
            bad = next((k for k in encoded if k not in MEDIA), None)
            if bad is not None:
                raise InputError("encoded bytes are supported for the media fields only", field=bad)
            if isinstance(data.get("metadata"), dict):
                data["metadata"] = json.dumps(data["metadata"])
            light = resolve_paths({k: v for k, v in data.items() if k not in encoded}, root)
            samples.append(Sample.from_dict(light))
        except InputError as exc:
            raise InputError(exc.located(sample=i).with_label(lambda n: f"row {n}")) from None
        rows.append({**light, **encoded})
    numbers = list(range(len(rows)))
    ids = take_ids(found, lambda message, k: InputError(f"row {k}, field '{ID}': {message}"), "row", numbers)
    return InputRows(samples, rows, "row", numbers, ids=ids, metadata=metadata)


def has_bytes(value: Any) -> bool:
    """Whether a cell holds encoded media (bytes, or a list with bytes)."""
    return isinstance(value, (bytes, bytearray)) or (
        isinstance(value, list) and any(isinstance(v, (bytes, bytearray)) for v in value)
    )
