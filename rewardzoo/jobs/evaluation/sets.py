"""An evaluation set: the members scored (manifest rows, each named by its file, line and field) and the human
judgements over them (pairs, ranked groups or ratings). Readers build one with :class:`SetBuilder`."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputError, OutputWriteError
from ..output import write_atomically, write_failed

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"})
VIDEO_SUFFIXES = frozenset({".mp4", ".avi", ".mov", ".webm", ".mkv", ".gif", ".m4v"})
AUDIO_SUFFIXES = frozenset({".wav", ".flac", ".mp3", ".ogg", ".m4a"})
#: The metric rules a set may be scored with (see :mod:`rewardzoo.jobs.evaluation.metrics`).
RULES = ("pairwise", "pairwise_with_ties", "group_pairs", "group_inversion", "correlation", "rating_pairs_with_ties")
#: The rules whose members are rated one by one (no pairs or groups a groupwise reward could score).
RATED_RULES = frozenset({"correlation", "rating_pairs_with_ties"})


def media_field(path: str) -> str | None:
    """The sample field a media file goes to, by its suffix: image, video or audio (None: unknown)."""
    suffix = Path(path).suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        return "image"
    if suffix in VIDEO_SUFFIXES:
        return "video"
    if suffix in AUDIO_SUFFIXES:
        return "audio"
    return None


def set_error(where: str, message: str, field: str | None = None) -> InputError:
    """An :class:`~rewardzoo.errors.InputError` naming the file and line (``where``) and the field."""
    return InputError(f"{where}{f', field {field!r}' if field else ''}: {message}")


@dataclass
class EvalSet:
    """A benchmark read for scoring.

    ``name``: the format or layout (what a card's ``published:`` block names as its benchmark unless
    ``benchmark`` says otherwise); ``rule``: how agreement is computed (one of :data:`RULES`); ``members``:
    manifest rows (media paths absolute), ``labels[i]`` how errors name member i ('pairs.jsonl line 3, media_b');
    ``group_ids[i]``: member i's group for a groupwise reward (a pair or a ranked group; None for ratings).

    Pairs (rule ``pairwise*``): member indices ``a``, ``b``, ``human`` (+1 a preferred, -1 b, 0 tie) and one
    ``categories`` entry a pair. Ranked groups (``group_*``): ``group`` (member -> group index), ``ranks``
    (lower is better) and one category a group. Ratings (``correlation``): ``mos`` and one category a member.
    ``ids``: member i's ``id`` when the data's lines have ids (a line's ``id`` for its one member, ``ID/FIELD``
    such as ``'x7/media_b'`` for each of several), else None: the members' manifest carries them and the scores
    are joined back to the members by them. ``dimensions``: further labels of the same pairs, each scored with the
    set's rule. ``tie_zero``: the
    accuracy-with-ties calibration also tries the threshold 0 (see
    :func:`~rewardzoo.shared.agreement.accuracy_with_ties`). Rule ``rating_pairs_with_ties`` (GenAI-Bench):
    rated members like ``correlation``, scored on every pair of members (human tie: equal ``mos``).
    """

    name: str
    rule: str
    source: Path
    members: list[dict] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    ids: list[Any] | None = None
    group_ids: list[Any] = field(default_factory=list)
    categories: list[str | None] = field(default_factory=list)
    a: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    b: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    human: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    group: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ranks: np.ndarray = field(default_factory=lambda: np.zeros(0))
    mos: np.ndarray = field(default_factory=lambda: np.zeros(0))
    benchmark: str | None = None
    #: further human labels of the same pairs (VideoGen-RewardBench's per-dimension labels), name -> labels
    dimensions: dict[str, list[int]] = field(default_factory=dict)
    tie_zero: bool = False

    @property
    def grouped(self) -> bool:
        """Whether the members come in groups a groupwise reward can score (pairs or ranked groups)."""
        return self.rule not in RATED_RULES

    @property
    def unit(self) -> str:
        return {"correlation": "item", "group_pairs": "group", "group_inversion": "group"}.get(self.rule, "pair")


class SetBuilder:
    """Collects an :class:`EvalSet`'s members; media paths are checked (a regular, readable file) as they come,
    relative ones taken relative to ``root`` (the data file's folder). A member's path is absolute whatever the
    working folder and however ``source`` and ``root`` were given: the manifest written from the members lives
    in another folder, and a relative path there would be read relative to that folder."""

    def __init__(self, name: str, rule: str, source: str | os.PathLike, root: Path | None = None):
        self.set = EvalSet(name, rule, Path(source))
        self.root = (root if root is not None else Path(source).parent).absolute()
        self.pairs: list[tuple[int, int, int]] = []
        self.line_id: Any = None  # the id of the line being read (None: it has none)
        self.id_lines: dict[tuple[str, Any], str] = {}  # id key -> the line that has it
        self.without_id: str | None = None  # the first line without one
        self.member_ids: list[Any] = []
        self.group: list[int] = []
        self.ranks: list[float] = []
        self.mos: list[float] = []

    def where(self, line: int | str) -> str:
        """'FILE line N' (or 'FILE row N' when ``line`` is already such a label)."""
        return f"{self.set.source.name} {line if isinstance(line, str) else f'line {line}'}"

    def line(self, where: str, row: dict) -> None:
        """Start a line of the data (``where``): its optional ``id`` (a JSON scalar, unique; every line has one or
        none) names its members."""
        from ..manifest import check_id, id_key

        value = row.get("id")
        self.line_id = value
        if value is None:
            self.without_id = self.without_id or where
        else:
            problem = check_id(value)
            if problem is not None:
                raise set_error(where, problem, "id")
            other = self.id_lines.get(id_key(value))
            if other is not None:
                raise set_error(where, f"{value!r} is also the id of {other}; ids must be unique", "id")
            self.id_lines[id_key(value)] = where
        if self.id_lines and self.without_id is not None:
            first = next(iter(self.id_lines.values()))
            raise set_error(self.without_id, f"missing, while {first} has one; give every line an id, or none", "id")

    def media(self, value: Any, where: str, key: str) -> tuple[str, str]:
        """(sample field, absolute path) of a media path; errors name ``where`` and ``key``."""
        if not isinstance(value, str) or not value:
            raise set_error(where, f"must be a media file path, got {type(value).__name__}", key)
        path = Path(value) if Path(value).is_absolute() else self.root / value
        field_name = media_field(value)
        if field_name is None:
            raise set_error(where, f"cannot tell the media kind of '{value}' from its suffix", key)
        if not path.is_file() or not os.access(path, os.R_OK):
            raise set_error(where, f"media file '{path}' cannot be read (missing or not a readable file)", key)
        return field_name, str(path)

    def member(self, where: str, key: str, value: Any, fields: dict, group_id: Any = None, single: bool = False) -> int:
        """Add one member: ``fields`` (prompt, condition_images, ...) plus the media ``value`` of column ``key``;
        ``single``: the line's only member (its id is the line's, not ``ID/key``)."""
        field_name, path = self.media(value, where, key)
        row = {k: v for k, v in fields.items() if v is not None}
        row[field_name] = path
        if group_id is not None:
            row["group_id"] = group_id
        self.set.members.append(row)
        self.set.labels.append(f"{where}, {key}")
        if self.line_id is not None:
            self.member_ids.append(self.line_id if single else f"{self.line_id}/{key}")
        self.set.group_ids.append(group_id)
        return len(self.set.members) - 1

    def pair(self, where: str, fields: dict, a: tuple[str, Any], b: tuple[str, Any], human: int, category) -> None:
        """A pair of members (column, value) with its human label, scored as group ``p<index>``."""
        gid = f"p{len(self.pairs)}"
        ia = self.member(where, a[0], a[1], fields, gid)
        ib = self.member(where, b[0], b[1], fields, gid)
        self.pairs.append((ia, ib, human))
        self.set.categories.append(category)

    def ranked_group(self, where: str, fields: dict, key: str, media: list, ranks: list, category) -> None:
        """A group of members with a human rank each (lower is better)."""
        if not isinstance(media, list) or not isinstance(ranks, list):
            raise set_error(where, "the media and ranks must be lists", key)
        if len(media) < 2:
            raise set_error(where, f"a ranked group needs at least two members, got {len(media)}", key)
        if len(ranks) != len(media):
            raise set_error(where, f"{len(media)} media but {len(ranks)} ranks", key)
        k = len(self.set.categories)
        for i, (m, r) in enumerate(zip(media, ranks)):
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not np.isfinite(r):
                raise set_error(where, f"rank {i} must be a finite number, got {r!r}", key)
            self.member(where, f"{key}[{i}]", m, fields, f"g{k}")
            self.group.append(k)
            self.ranks.append(float(r))
        self.set.categories.append(category)

    def rated(self, where: str, fields: dict, key: str, media: Any, mos: Any, category) -> None:
        """One rated member."""
        if isinstance(mos, bool) or not isinstance(mos, (int, float)) or not np.isfinite(mos):
            raise set_error(where, f"must be a finite number, got {mos!r}", "mos")
        self.member(where, key, media, fields, single=True)
        self.mos.append(float(mos))
        self.set.categories.append(category)

    def build(self, empty: Callable[[], str] | None = None) -> EvalSet:
        """The set; an error when it holds nothing to evaluate."""
        s = self.set
        if not s.members:
            raise InputError(f"{s.source.name}: no {s.unit}s to evaluate" + (f" ({empty()})" if empty else ""))
        if self.pairs:
            idx = np.asarray(self.pairs, dtype=np.int64)
            s.a, s.b, s.human = idx[:, 0], idx[:, 1], idx[:, 2].astype(np.int8)
        if self.member_ids:
            s.ids = self.member_ids
        s.group = np.asarray(self.group, dtype=np.int64)
        s.ranks = np.asarray(self.ranks)
        s.mos = np.asarray(self.mos)
        return s


def category(row: dict, where: str, key: str = "category") -> str | None:
    """A row's optional category (a string, or a number written as one)."""
    value = row.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise set_error(where, f"must be a string, got {type(value).__name__}", key)


def text(row: dict, where: str, key: str) -> str | None:
    """A row's optional text field."""
    value = row.get(key)
    if value is not None and not isinstance(value, str):
        raise set_error(where, f"must be a string, got {type(value).__name__}", key)
    return value


def media_folder(folder: Path) -> Path:
    """``folder`` (made) for the media a layout unpacks; refused when it is a link, which would send them elsewhere."""
    if folder.is_symlink():
        raise OutputWriteError(f"'{folder}' is a symbolic link; the unpacked media are written only into a real folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_failed(folder, exc, "the unpacked media") from None
    return folder


def write_media(folder: Path, name: str, data: bytes) -> Path:
    """``folder / name`` holding ``data``: kept when it is already a regular file with those bytes, else written
    atomically, which replaces a link planted at that name instead of writing through it."""
    target = folder / name
    try:
        if stat.S_ISREG(os.lstat(target).st_mode) and target.read_bytes() == data:
            return target
    except OSError:
        pass
    write_atomically(target, lambda tmp: Path(tmp).write_bytes(data))
    return target
