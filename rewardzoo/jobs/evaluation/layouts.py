"""Published evaluation sets, read in the layout their authors publish, each scored with its own rule.

- ``pickapic_v2`` — Pick-a-Pic v2 (Kirstain et al. 2023; HF ``yuvalkirstain/pickapic_v2``), a Parquet shard
  with ``caption``, ``jpg_0`` / ``jpg_1`` (encoded images) and ``label_0`` / ``label_1`` (1/0, 0/1, or 0.5/0.5 for
  a tie). Rule ``pairwise``: accuracy over the non-tie pairs (the figure imscore's README tabulates); ties
  counted apart. The images are written once to the output folder's ``media/``.
- ``hpdv2`` — HPDv2's test set (Wu et al. 2023; HF ``ymhao/HPDv2``): ``test.json``, a JSON list of
  ``{"prompt", "image_path": [...], "rank": [...]}`` with the images in ``test/`` beside it (or beside the
  file). Rule ``group_inversion``, HPSv2's ``evaluation.py``: per prompt ``1 - inversions / (n(n-1)/2)``, a pair
  inverted when the model orders it against a strict human order (human-rank ties never count as inversions),
  averaged over prompts; our score ties count half an inversion (HPSv2 orders by a sort, ties arbitrarily).
- ``videogen_rewardbench`` — VideoGen-RewardBench (Liu et al. 2025, VideoAlign; HF
  ``KwaiVGI/VideoGen-RewardBench``): a CSV with ``prompt``, ``path_A``, ``path_B`` and the labels ``Overall``, ``VQ``,
  ``MQ``, ``TA`` each ``A``, ``B`` or a tie (``same`` / ``tie``). Rule ``pairwise_with_ties`` on ``Overall``
  (VideoAlign's ``calc_accuracy_with_ties``, the tie calibration of Deutsch et al. 2023), their accuracy w/o ties
  beside it, and both for each dimension.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

from ...errors import InputError
from ...shared.files import bounded_lines, read_utf8, regular_file
from .sets import EvalSet, SetBuilder, media_folder, set_error, write_media

PICKAPIC_LABELS = {(1.0, 0.0): 1, (0.0, 1.0): -1, (0.5, 0.5): 0}
VIDEOGEN_LABELS = {"a": 1, "b": -1, "same": 0, "tie": 0}
VIDEOGEN_DIMENSIONS = ("VQ", "MQ", "TA")


def read_pickapic_v2(path: Path, media_dir: Path) -> EvalSet:
    """A Pick-a-Pic v2 Parquet shard (see the module docstring)."""
    import pyarrow.parquet as pq

    path = regular_file(path, "data")
    builder = SetBuilder("pickapic_v2", "pairwise", path, root=media_dir)
    media_folder(media_dir)
    names = pq.read_schema(path).names
    missing = [c for c in ("caption", "jpg_0", "jpg_1", "label_0", "label_1") if c not in names]
    if missing:
        raise InputError(f"{path.name}: not a Pick-a-Pic v2 shard: no column {', '.join(missing)}")
    table = pq.read_table(path, columns=["caption", "jpg_0", "jpg_1", "label_0", "label_1"])
    for i, row in enumerate(table.to_pylist()):
        where = builder.where(f"row {i}")
        labels = (row["label_0"], row["label_1"])
        try:
            human = PICKAPIC_LABELS[(float(labels[0]), float(labels[1]))]
        except (KeyError, TypeError, ValueError):
            raise set_error(where, f"must be 1/0, 0/1 or 0.5/0.5, got {labels[0]!r}/{labels[1]!r}", "label_0") from None
        files = []
        for side in ("jpg_0", "jpg_1"):
            if not isinstance(row[side], bytes) or not row[side]:
                raise set_error(where, "must hold the encoded image", side)
            files.append((side, write_media(media_dir, f"{path.stem}-{i}-{side[-1]}.jpg", row[side]).name))
        builder.pair(where, {"prompt": row["caption"]}, files[0], files[1], human, None)
    return builder.build()


def read_hpdv2(path: Path, media_dir: Path) -> EvalSet:
    """HPDv2's ``test.json`` (see the module docstring)."""
    path = regular_file(path, "data")
    root = path.parent / "test" if (path.parent / "test").is_dir() else path.parent
    builder = SetBuilder("hpdv2", "group_inversion", path, root=root)
    try:
        entries = json.loads(read_utf8(path, "data"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path.name}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(entries, list):
        raise InputError(f"{path.name}: must be a JSON list of prompts with their ranked images")
    for i, entry in enumerate(entries):
        where = builder.where(f"entry {i}")
        if not isinstance(entry, dict) or "image_path" not in entry or "rank" not in entry:
            raise set_error(where, "must be an object with 'prompt', 'image_path' and 'rank'")
        builder.ranked_group(
            where, {"prompt": entry.get("prompt")}, "image_path", entry["image_path"], entry["rank"], None
        )
    return builder.build()


def read_videogen_rewardbench(path: Path, media_dir: Path) -> EvalSet:
    """VideoGen-RewardBench's CSV (see the module docstring)."""
    path = regular_file(path, "data")
    builder = SetBuilder("videogen_rewardbench", "pairwise_with_ties", path)
    dims: dict[str, list[int]] = {d: [] for d in VIDEOGEN_DIMENSIONS}
    with path.open(newline="", encoding="utf-8") as fh:
        lines = bounded_lines(fh, lambda message, line: set_error(builder.where(line), message))
        read = [0]  # lines handed to csv: the one it failed on is the last (line_num lags on an error)

        def counted():
            for line in lines:
                read[0] += 1
                yield line

        try:
            _read_videogen_rows(csv.DictReader(counted()), builder, dims)
        except csv.Error as exc:  # a field past csv's size limit, a NUL byte, ...
            raise set_error(builder.where(read[0]), f"not readable as CSV ({exc})") from None
    data = builder.build()
    data.dimensions = {d: v for d, v in dims.items() if len(v) == data.human.size}
    return data


def _read_videogen_rows(reader: csv.DictReader, builder: SetBuilder, dims: dict[str, list[int]]) -> None:
    missing = [c for c in ("prompt", "path_A", "path_B", "Overall") if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{builder.set.source.name}: not a VideoGen-RewardBench CSV: no column {', '.join(missing)}")
    for lineno, row in enumerate(reader, start=2):
        where = builder.where(lineno)
        human = _videogen_label(row, "Overall", where)
        for d in VIDEOGEN_DIMENSIONS:
            if row.get(d) not in (None, ""):
                dims[d].append(_videogen_label(row, d, where))
        builder.pair(
            where, {"prompt": row["prompt"]}, ("path_A", row["path_A"]), ("path_B", row["path_B"]), human, None
        )


def _videogen_label(row: dict, key: str, where: str) -> int:
    value = (row.get(key) or "").strip().lower()
    if value not in VIDEOGEN_LABELS:
        raise set_error(where, f"must be A, B or a tie ('same'), got {row.get(key)!r}", key)
    return VIDEOGEN_LABELS[value]


LAYOUTS: dict[str, Callable[[Path, Path], EvalSet]] = {
    "pickapic_v2": read_pickapic_v2,
    "hpdv2": read_hpdv2,
    "videogen_rewardbench": read_videogen_rewardbench,
}
