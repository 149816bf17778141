"""The generic JSONL formats for users' own data, one JSON object a line, media by path relative to the file.

``pairs``: ``{"prompt": ..., "media_a": PATH, "media_b": PATH, "preferred": "a" | "b" | "tie", "category": ...,
"source": PATH}`` (``category`` and ``source`` optional; ``source`` is an edit's source image, given to the
rewards as ``condition_images[0]``). Metric: pairwise accuracy over the non-tie pairs; a score tie counts 0.5
(the reward cannot tell the two apart); human ties are counted and reported apart, never as agreement.

``rankings``: ``{"prompt": ..., "media": [PATH, ...], "ranks": [r, ...], "category": ...}`` (lower rank is
better; HPDv2- and ImageRewardDB-style test sets). Metric: accuracy over the within-group pairs whose human
ranks differ (score ties 0.5), pooled over groups; the interval resamples whole groups.

``ratings``: ``{"media": PATH, "mos": number, "prompt": ..., "category": ...}`` (KonIQ-, AGIQA-, BVCC-style
sets). Metrics: SRCC (the headline), PLCC and KRCC between the scores and the MOS.

Media may be any modality a reward reads (images, videos, audio: the field is chosen by the file's suffix). A
line may carry ``id`` (a JSON scalar, unique; every line or none): the members' manifest and ``scores.jsonl`` then
name each member by it (``ID`` for a rating, ``ID/media_a`` or ``ID/media[2]`` for a pair's or a group's).
"""

from __future__ import annotations

from pathlib import Path

from ...errors import InputError
from ...shared.files import jsonl_objects, regular_file
from .sets import EvalSet, SetBuilder, category, set_error, text

PREFERRED = {"a": 1, "b": -1, "tie": 0}


def _lines(path: Path, builder: SetBuilder):
    def error(message: str, line: int) -> InputError:
        return set_error(builder.where(line), message)

    for lineno, row in jsonl_objects(regular_file(path, "data"), error):
        builder.line(builder.where(lineno), row)
        yield builder.where(lineno), row


def _fields(row: dict, where: str, builder: SetBuilder) -> dict:
    fields: dict = {"prompt": text(row, where, "prompt")}
    if row.get("source") is not None:
        fields["condition_images"] = [builder.media(row["source"], where, "source")[1]]
    return fields


def _need(row: dict, where: str, *keys: str) -> None:
    for key in keys:
        if key not in row or row[key] is None:
            raise set_error(where, "missing", key)


def read_pairs(path: str | Path) -> EvalSet:
    """A ``pairs`` file (see the module docstring)."""
    path = Path(path)
    builder = SetBuilder("pairs", "pairwise", path)
    for where, row in _lines(path, builder):
        _need(row, where, "media_a", "media_b", "preferred")
        label = row["preferred"]
        if label not in PREFERRED:
            raise set_error(where, f"must be one of 'a', 'b', 'tie', got {label!r}", "preferred")
        builder.pair(
            where,
            _fields(row, where, builder),
            ("media_a", row["media_a"]),
            ("media_b", row["media_b"]),
            PREFERRED[label],
            category(row, where),
        )
    return builder.build()


def read_rankings(path: str | Path) -> EvalSet:
    """A ``rankings`` file (see the module docstring)."""
    path = Path(path)
    builder = SetBuilder("rankings", "group_pairs", path)
    for where, row in _lines(path, builder):
        _need(row, where, "media", "ranks")
        fields = _fields(row, where, builder)
        builder.ranked_group(where, fields, "media", row["media"], row["ranks"], category(row, where))
    return builder.build()


def read_ratings(path: str | Path) -> EvalSet:
    """A ``ratings`` file (see the module docstring)."""
    path = Path(path)
    builder = SetBuilder("ratings", "correlation", path)
    for where, row in _lines(path, builder):
        _need(row, where, "media", "mos")
        builder.rated(where, _fields(row, where, builder), "media", row["media"], row["mos"], category(row, where))
    return builder.build()
