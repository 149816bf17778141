"""Per-entry deadlines (``timeout_s``) and optional rewards (``optional: true``).

Every call of an entry with ``timeout_s`` (a reward call over one chunk or one group) is guarded: it runs on a
daemon thread of its own while the caller waits at most ``timeout_s`` seconds. When the call misses its deadline:

- a **required** entry fails the processor call with :class:`~rewardzoo.errors.DeadlineError`, naming the entry
  and the call's samples;
- an **optional** entry abstains for the call's samples: NaN in its column, left out of ``applied`` and of the
  total (which is the weighted sum over the rewards that did score the sample, as for a reward that does not apply
  to a sample's dataset), marked 1.0 in the per-sample extra ``abstained`` (the way a judge's substitutions are
  marked in ``substituted``); :attr:`~rewardzoo.core.engine.RewardResult.abstentions` counts them per entry and
  :attr:`~rewardzoo.core.engine.RewardResult.abstained` lists the samples.

The stuck call: Python cannot stop a thread, so a call past its deadline keeps running on its daemon thread (it never
keeps the process from exiting) and its result is dropped. It is bounded: while a reward has such a call, its next
calls are not started (the reward may not be safe to call twice at once, and a hang would pile up threads); they
miss their deadline at once (required: the error says the earlier call is still running; optional: they abstain),
so at most one thread per reward is ever stuck and a hung reward costs each step at most ``timeout_s``. Once the
stuck call returns, the reward is called again as usual.

A reward that bounds its own wait (``enforces_deadline = True``: an ``environment:`` worker, which kills and
restarts its worker process past the deadline; a Ray Serve deployment, whose request is cancelled) is called on
the caller's thread; it reads the time left with :func:`rewardzoo.shared.deadline.remaining` and raises
:class:`~rewardzoo.errors.DeadlineError` when it runs out; nothing is left running.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DeadlineError
from ..rewards.base import is_text_extra
from ..shared.deadline import remaining, within

if TYPE_CHECKING:
    from ..rewards.base import Reward
    from ..spec.config import RewardSpec

__all__ = ["ABSTAINED", "abstained_mask", "guard", "remaining", "stuck_calls"]

log = logging.getLogger("rewardzoo")

Outcome = tuple[np.ndarray, dict[str, np.ndarray]]  # as rewardzoo.core.engine's (which imports this module)
Job = Callable[[], Outcome]

#: The per-sample extra marking an optional entry's abstentions (1.0 abstained, NaN or 0.0 scored).
ABSTAINED = "abstained"

_STUCK: dict[int, cf.Future[Any]] = {}  # id(reward) -> its call that ran past its deadline and still runs
_LOCK = threading.Lock()


def stuck_calls() -> int:
    """Calls that ran past their deadline and still run on their threads (at most one per reward)."""
    with _LOCK:
        return len(_STUCK)


def guard(spec: RewardSpec, reward: Reward, indices: Sequence[int], job: Job) -> Job:
    """``job`` (one call of ``spec`` over the samples ``indices``) bounded by the entry's ``timeout_s`` (itself
    when the entry has none); see the module docstring."""
    if spec.timeout_s is None:
        return job
    return partial(_guarded, spec, reward, list(indices), job)


def abstained_mask(extras: dict[str, np.ndarray] | None, n: int) -> np.ndarray:
    """Where an entry's extras mark an abstention (bool (n,); all False when none is marked)."""
    marks = (extras or {}).get(ABSTAINED)
    if marks is None or is_text_extra(marks):
        return np.zeros(n, dtype=bool)
    found: np.ndarray = np.asarray(marks, dtype=np.float64) == 1.0
    return found


def _guarded(spec: RewardSpec, reward: Reward, indices: list[int], job: Job) -> Outcome:
    assert spec.timeout_s is not None  # (guard() wraps only such entries)
    timeout = spec.timeout_s
    if getattr(reward, "enforces_deadline", False):
        try:
            with within(timeout):
                return job()
        except DeadlineError as exc:
            return _missed(spec, indices, exc.message)
    key = id(reward)
    with _LOCK:
        if key in _STUCK:
            return _missed(spec, indices, f"its earlier call that ran past timeout_s={timeout:g} s is still running")
        future: cf.Future[Outcome] = cf.Future()
        threading.Thread(target=_work, args=(job, future), name=f"rewardzoo-deadline-{spec.name}", daemon=True).start()
    try:
        return future.result(timeout=timeout)
    except cf.TimeoutError:
        pass
    with _LOCK:
        if future.done():  # it finished just now: its outcome is on time enough
            return future.result()
        _STUCK[key] = future
    future.add_done_callback(partial(_released, key, spec.name))
    return _missed(spec, indices, f"the call did not finish within timeout_s={timeout:g} s")


def _work(job: Job, future: cf.Future[Outcome]) -> None:
    try:
        future.set_result(job())
    except BaseException as exc:  # delivered to the caller, or dropped with a late call
        future.set_exception(exc)


def _released(key: int, name: str, future: cf.Future[Any]) -> None:
    with _LOCK:
        if _STUCK.get(key) is future:
            del _STUCK[key]
    log.info("rewardzoo: the call of '%s' that ran past its deadline returned; its result was dropped", name)


def _missed(spec: RewardSpec, indices: list[int], why: str) -> Outcome:
    """The outcome of a call that missed its deadline: abstentions (optional), else a DeadlineError."""
    if not spec.optional:
        raise DeadlineError(
            f"missed its deadline: {why} (a required entry; `optional: true` makes it abstain instead)",
            reward=spec.name,
            samples=indices,
        )
    n = len(indices)
    return np.full(n, np.nan), {ABSTAINED: np.ones(n)}
