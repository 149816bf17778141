"""A chunk scored in several Ray Data stages, one per placed group (:mod:`rewardzoo.ray.groups`), and the parts put
together as the in-process processor would (design: docs/ray.md).

Each stage scores its own entries of the chunk (gate, checks, calls, validation: the engine's own steps) and adds
its *part* to the chunk's row: the float64 score vectors, applicability masks and extras of its entries, or its
first error with that entry's position in the config. The last stage puts the parts into one
:class:`~rewardzoo.core.engine.ScoreTable` of every entry, in config order, and assembles it: the records are those
of one processor call over all the entries, and a failing chunk's error is that of the entry first in the config,
as one processor call would raise it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.engine import ConversionCache, ScoreTable
from ..errors import RewardZooError
from ..jobs.records import score_records
from ..spec.config import RewardSpec
from ..spec.sample import Sample

#: Where an error that names no entry sits in the config order (a row that does not decode): before every entry.
BEFORE_ENTRIES = -1


@dataclass
class Part:
    """One stage's share of a chunk: scores, masks and extras of its entries, or its error (position, message)."""

    scores: dict[str, np.ndarray] = field(default_factory=dict)
    masks: dict[str, np.ndarray] = field(default_factory=dict)
    extras: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    error: tuple[int, str] | None = None


def score_part(processor: Any, samples: Sequence[Sample], order: Sequence[str], label: Callable[[int], str]) -> Part:
    """``processor``'s entries over the chunk's ``samples``; an error is kept with its entry's position in
    ``order`` (every entry's name, in config order), its samples named by ``label``."""
    try:
        table = ScoreTable(processor.specs, samples)
        try:
            processor.score_into(table, ConversionCache(samples))
        finally:
            processor.phase_done()
    except RewardZooError as exc:
        return failed(exc, order, label)
    return Part(table.scores, table.masks, table.extras)


def failed(exc: RewardZooError, order: Sequence[str], label: Callable[[int], str]) -> Part:
    """The part of a stage that failed with ``exc``: its message, at the position of the entry it names."""
    who = getattr(exc, "reward", None) or getattr(exc, "entry", None)
    return Part(error=(order.index(who) if who in order else BEFORE_ENTRIES, exc.with_label(label)))


def records_of(specs: Sequence[RewardSpec], samples: Sequence[Sample], parts: Sequence[Part]) -> tuple[str, str]:
    """The chunk's records (JSON; :func:`~rewardzoo.jobs.records.score_records`) from every stage's part, and
    ``""``; or ``""`` and the first entry's error."""
    errors = [p.error for p in parts if p.error is not None]
    if errors:
        return "", min(errors, key=lambda e: e[0])[1]
    table = ScoreTable(specs, samples)
    for spec in specs:
        part = next(p for p in parts if spec.name in p.scores)
        table.scores[spec.name], table.masks[spec.name] = part.scores[spec.name], part.masks[spec.name]
        if spec.name in part.extras:
            table.extras[spec.name] = part.extras[spec.name]
    return json.dumps(score_records(table.result())), ""
