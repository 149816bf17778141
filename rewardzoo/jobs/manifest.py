"""JSONL manifests: one sample per line, media paths relative to the manifest's folder."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from ..shared.files import jsonl_objects, regular_file
from ..spec.sample import Sample

MEDIA_FIELDS = ("image", "video", "audio", "condition_audio")
MEDIA_LIST_FIELDS = ("condition_images", "condition_videos")


class ManifestError(InputError):
    """A manifest line is malformed; ``line`` is 1-based."""


def read_manifest(path: str | os.PathLike[str]) -> tuple[list[Sample], list[int]]:
    """(samples, their 1-based line numbers); blank lines are skipped. Errors name the line and field."""
    samples, lines, _ = read_manifest_rows(path)
    return samples, lines


def read_manifest_rows(path: str | os.PathLike[str]) -> tuple[list[Sample], list[int], list[dict]]:
    """(samples, their 1-based line numbers, the lines as dicts with media paths resolved): the one reader of
    a manifest file. Blank lines are skipped; a :class:`ManifestError` names the line (``sample``) and field."""
    path = regular_file(path, "manifest")
    samples, lines, rows = [], [], []
    for lineno, data in jsonl_objects(
        path, lambda message, line: ManifestError(message, sample=line), f"manifest '{path}'"
    ):
        try:
            rows.append(resolve_paths(data, path.parent))
            samples.append(Sample.from_dict(rows[-1]))
        except InputError as exc:
            raise ManifestError(exc.message, field=exc.field, sample=lineno) from None
        lines.append(lineno)
    return samples, lines, rows


def resolve_paths(data: dict, root: Path) -> dict:
    """A copy of a manifest line (or table row) with its relative media paths made relative to ``root``."""
    out = dict(data)
    for key in MEDIA_FIELDS:
        if key in out and out[key] is not None:
            out[key] = _path(out[key], root, key)
    for key in MEDIA_LIST_FIELDS:
        if key in out and out[key] is not None:
            value = out[key]
            if not isinstance(value, list):
                raise InputError("must be a list of file paths", field=key)
            out[key] = [_path(v, root, key) for v in value]
    return out


def _path(value, root: Path, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"must be a file path (string), got {type(value).__name__}", field=key)
    return str((root / value) if not Path(value).is_absolute() else Path(value))
