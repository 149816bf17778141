"""The deadline of the reward call running on this thread (an entry's ``timeout_s``), for a reward that bounds its
own wait (a worker process, a Ray Serve deployment): set by :mod:`rewardzoo.core.deadlines`, read with
:func:`remaining`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["remaining", "within"]

_DEADLINE: ContextVar[float | None] = ContextVar("rewardzoo_deadline", default=None)


def remaining() -> float | None:
    """Seconds left before the deadline of the guarded call running here (None: no deadline); at least a
    millisecond, so that a bound read from it never means "for ever"."""
    deadline = _DEADLINE.get()
    return None if deadline is None else max(deadline - time.monotonic(), 1e-3)


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Calls made inside the block have ``seconds`` from now (:func:`remaining` reads what is left)."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)
