"""Image-editing preference sets: a source image, an instruction and two edits, read as EditReward (Wu et al.
2025, arXiv 2509.26346) reads and scores them. The source image reaches the rewards as ``condition_images[0]``,
the instruction as ``prompt``.

- ``genai_bench_edit`` — GenAI-Bench-Edit (GenAI-Arena's image-edition votes) in the JSON EditReward evaluates
  (``TIGER-AI-Lab/EditReward``, ``EditReward/evaluate/eval_bench.py`` at commit
  ``84602889f45c67a0dba6ff999c0be51f04e0d86a``, benchmark ``genai_edit_bench``; the keys as in the repository's
  ``data/dataset/valid_dataset_1.json``): a JSON list of ``{"prompt", "path_src", "path1", "path2",
  "model1_dim1_score", "model2_dim1_score", ...}``, paths relative to the file's folder. Human label: ``path1``
  preferred when ``model1_dim1_score`` is higher, a tie when equal. Rule ``pairwise_with_ties``: their
  ``calc_accuracy_with_ties`` (VideoAlign's loop, no zero threshold) and ``calc_accuracy_without_ties``
  (``C / (C + D + Tm)``) beside it. TIGER-Lab's own HF layout of GenAI-Bench's ``image_edition`` split is not read:
  no published evaluation code reads it with scores, so its columns could not be confirmed; convert it to
  ``pairs`` (``source``: the source image) instead.
- ``editreward_bench`` — EditReward-Bench (HF ``TIGER-Lab/EditReward-Bench``), a Parquet shard of pairwise
  comparisons as the repository's ``EditReward/evaluate/inference_{2,3,4}pair_hf.py`` (same commit) read it: ``id``,
  ``dataset`` (``2pair`` / ``3pair`` / ``4pair``), ``instruction``, ``source_image``, ``candidate_1``,
  ``candidate_2`` (encoded images: the ``{"bytes", "path"}`` struct of an HF ``Image`` column, or bare bytes),
  ``ranking`` (``A>B``, ``B>A``, ``A=B``; in 3/4-pair groups e.g. ``C>A``) and ``comparison_type`` (``AvsC``:
  ``candidate_1`` is A's image, ``candidate_2`` C's; absent means ``AvsB``). Rule, ``evaluate_edit_reward_bench``
  in ``eval_bench.py``: pairwise accuracy with ties over all comparisons with the threshold grid
  ``[0.0] + sorted(set(|diff|))`` (the threshold 0 a candidate); one row per subset (on the tie-free 3/4-pair
  subsets it equals their accuracy without ties). Their group ("strict ranking") accuracy is not computed.
  The images are written once to the output folder's ``media/``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import InputError
from ...shared.files import read_utf8, regular_file
from .sets import EvalSet, SetBuilder, media_folder, set_error, write_media

EDIT_COLUMNS = ("instruction", "source_image", "candidate_1", "candidate_2", "ranking")
_MAGIC = ((b"\x89PNG", ".png"), (b"\xff\xd8", ".jpg"), (b"GIF8", ".gif"), (b"BM", ".bmp"))


def read_genai_bench_edit(path: Path, media_dir: Path) -> EvalSet:
    """EditReward's GenAI-Bench-Edit JSON (see the module docstring)."""
    path = regular_file(path, "data")
    builder = SetBuilder("genai_bench_edit", "pairwise_with_ties", path)
    try:
        entries = json.loads(read_utf8(path, "data"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path.name}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(entries, list):
        raise InputError(f"{path.name}: must be a JSON list of edit pairs (EditReward's GenAI-Bench-Edit layout)")
    keys = ("path_src", "path1", "path2", "model1_dim1_score", "model2_dim1_score")
    for i, entry in enumerate(entries):
        where = builder.where(f"entry {i}")
        if not isinstance(entry, dict):
            raise set_error(where, f"must be an object with 'prompt', {', '.join(map(repr, keys))}")
        for key in keys:
            if entry.get(key) is None:
                raise set_error(where, "missing", key)
        s1, s2 = (_number(entry[k], where, k) for k in ("model1_dim1_score", "model2_dim1_score"))
        prompt = entry.get("prompt")
        if not isinstance(prompt, str):
            raise set_error(where, f"must be a string, got {type(prompt).__name__}", "prompt")
        source = builder.media(entry["path_src"], where, "path_src")[1]
        fields = {"prompt": prompt, "condition_images": [source]}
        human = 1 if s1 > s2 else -1 if s1 < s2 else 0
        builder.pair(where, fields, ("path1", entry["path1"]), ("path2", entry["path2"]), human, None)
    return builder.build()


def _number(value, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise set_error(where, f"must be a number, got {value!r}", key)
    return float(value)


def _label(ranking, comparison, where: str) -> int:
    """+1 when candidate_1 is preferred, -1 candidate_2, 0 a tie; from ``ranking`` and ``comparison_type``."""
    comparison = comparison or "AvsB"
    parts = comparison.split("vs") if isinstance(comparison, str) else []
    if len(parts) != 2 or not all(len(p) == 1 and p.isalpha() for p in parts):
        raise set_error(where, f"must look like 'AvsB', got {comparison!r}", "comparison_type")
    left, right = parts
    value = ranking.replace(" ", "") if isinstance(ranking, str) else ranking
    if value == f"{left}>{right}" or value == f"{right}<{left}":
        return 1
    if value == f"{right}>{left}" or value == f"{left}<{right}":
        return -1
    if isinstance(value, str) and value.startswith((f"{left}={right}", f"{right}={left}")):
        return 0
    raise set_error(where, f"must rank {left} and {right} ('{left}>{right}', '{right}>{left}' or a tie '{left}={right}'), "
                    f"got {ranking!r}", "ranking")  # fmt: skip


def _image_bytes(value, where: str, key: str) -> tuple[bytes, str]:
    """(encoded bytes, file suffix) of an HF Image struct or bare bytes."""
    name = ""
    if isinstance(value, dict):
        name = value.get("path") or ""
        value = value.get("bytes")
    if not isinstance(value, bytes) or not value:
        raise set_error(where, "must hold the encoded image (bytes, or an Image column's {'bytes', 'path'})", key)
    suffix = next((s for magic, s in _MAGIC if value.startswith(magic)), None)
    if suffix is None and value[:4] == b"RIFF" and value[8:12] == b"WEBP":
        suffix = ".webp"
    suffix = suffix or Path(name).suffix.lower()
    if not suffix:
        raise set_error(where, "cannot tell the image format of the encoded bytes", key)
    return value, suffix


def read_editreward_bench(path: Path, media_dir: Path) -> EvalSet:
    """An EditReward-Bench Parquet shard (see the module docstring)."""
    import pyarrow.parquet as pq

    path = regular_file(path, "data")
    builder = SetBuilder("editreward_bench", "pairwise_with_ties", path, root=media_dir)
    media_folder(media_dir)
    names = pq.read_schema(path).names
    missing = [c for c in EDIT_COLUMNS if c not in names]
    if missing:
        raise InputError(f"{path.name}: not an EditReward-Bench shard: no column {', '.join(missing)}")
    columns = [*EDIT_COLUMNS, *(c for c in ("id", "dataset", "comparison_type") if c in names)]
    for i, row in enumerate(pq.read_table(path, columns=columns).to_pylist()):
        where = builder.where(f"row {i}" + (f" (id {row['id']})" if row.get("id") is not None else ""))
        human = _label(row["ranking"], row.get("comparison_type"), where)
        files = {}
        for key in ("source_image", "candidate_1", "candidate_2"):
            encoded, suffix = _image_bytes(row[key], where, key)
            files[key] = write_media(media_dir, f"{path.stem}-{i}-{key}{suffix}", encoded).name
        if not isinstance(row["instruction"], str):
            raise set_error(where, f"must be a string, got {type(row['instruction']).__name__}", "instruction")
        source = builder.media(files["source_image"], where, "source_image")[1]
        fields = {"prompt": row["instruction"], "condition_images": [source]}
        subset = row.get("dataset")
        builder.pair(
            where,
            fields,
            ("candidate_1", files["candidate_1"]),
            ("candidate_2", files["candidate_2"]),
            human,
            str(subset) if subset is not None else None,
        )
    data = builder.build()
    data.tie_zero = True
    return data
