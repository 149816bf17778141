"""A reward's record: what its model card states (kept free of heavy imports: the registry lists it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping


@dataclass(frozen=True)
class RewardInfo:
    """One reward's record. ``download``: its weights are not shipped with a package and must be
    fetched (from a hub or a local path). ``devices``: the kinds of device it can use (``cpu``, ``cuda``,
    ``mps``; None: any torch device). ``differentiable``: it has a differentiable path (``score_pixels``,
    used by :func:`rewardzoo.differentiable`). ``card``: the model card file (None for rewards without one);
    ``source``: ``"rewardzoo"``, ``"plugin <distribution>"``, ``"user"`` or ``"python path"``."""

    name: str
    implementation: str
    summary: str
    modality: str
    kind: str
    extra: str | None
    higher_is_better: bool
    score_range: tuple[float, float]
    download: bool
    devices: tuple[str, ...] | None = None
    license: str | None = None
    reference: Mapping[str, Any] | None = None
    card: Path | None = None
    source: str = "rewardzoo"
    differentiable: bool = False

    @classmethod
    def of_class(cls, reward_cls: type, name: str | None = None, *, source: str = "python path") -> "RewardInfo":
        """The record of a class that has no model card: its optional ``higher_is_better``,
        ``score_range`` and ``modality`` attributes, else the defaults (higher is better, any score)."""
        return cls(name=(name or reward_cls.__name__).lower(),
                   implementation=f"{reward_cls.__module__}:{reward_cls.__qualname__}",
                   summary=((reward_cls.__doc__ or "").strip().splitlines() or [""])[0],
                   modality=getattr(reward_cls, "modality", "any"), kind=getattr(reward_cls, "kind", "") or "pointwise",
                   extra=None, higher_is_better=bool(getattr(reward_cls, "higher_is_better", True)),
                   score_range=tuple(float(b) for b in getattr(reward_cls, "score_range", (-math.inf, math.inf))),
                   download=False, source=source)
