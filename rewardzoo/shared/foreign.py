"""Trainers that build a reward class themselves: a class named by a dotted path in a trainer's config, constructed
with that trainer's own keywords instead of a reward's options.

The front door for such a trainer (:mod:`rewardzoo.integrations`) registers the keyword set its trainer passes and
the function that explains the call (:func:`register`); the reward contract asks :func:`refusal` when a reward class
is called with keywords only, and raises what it returns. The contract names no trainer, and the handler's module is
imported only for a call with exactly those keywords (when it does not import, that trainer is not installed here:
nothing is refused).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import RegistryError
from .imports import import_path

#: keyword set of a trainer's construction call -> ``pkg.mod:function(cls, kwargs) -> Exception | None``
CALLS: dict[frozenset[str], str] = {}


def register(keywords: Iterable[str], handler: str) -> None:
    """A trainer builds classes as ``Class(**{k: ... for k in keywords})``; ``handler`` (a Python path) says whether
    such a call of a reward class is that trainer's, and what to raise then (None: not the trainer's)."""
    CALLS[frozenset(keywords)] = handler


def refusal(cls: type, kwargs: Mapping[str, Any]) -> Exception | None:
    """What to raise for ``cls(**kwargs)`` when a registered trainer made the call; None otherwise."""
    handler = CALLS.get(frozenset(kwargs)) if CALLS else None
    if handler is None:
        return None
    try:
        explain = import_path(handler)
    except RegistryError:  # the trainer's adapter does not import: that trainer is not installed here
        return None
    found: Exception | None = explain(cls, kwargs)
    return found
