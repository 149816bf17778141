"""The placed entries of ``serve --ray``: a deployment per group of entries that share a model, and the front's
side of it (design: docs/ray.md).

A :class:`RewardGroupReplica` loads its group's rewards (each model once, with the loader the in-process processor
uses, residency included) and answers one reward call at a time: the fields the front's engine converted, in; the
reward's own output, or its exception, out. The front's processor holds a :class:`DeploymentReward` in each placed
entry's place (:class:`DeploymentLoader`), so routing, checks, conversion, call plans (``batch_size`` chunks, whole
groups), validation, weights, totals and extras are the in-process processor's own, and the answers equal its
answers. A placed entry's calls wait on another process, so its stream overlaps the front's other streams.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.loader import RewardLoader
from ..errors import DeadlineError, RewardExecutionError
from ..rewards.base import Reward, invoke
from ..rewards.info import PER_INSTANCE
from ..shared import deadline
from ..spec.config import RewardSpec


class RewardGroupReplica:
    """One replica of a placed group: its entries' rewards, called by the front (:meth:`score`)."""

    def __init__(self, specs: Sequence[RewardSpec]) -> None:
        from ..core.processor import RewardProcessor

        self._processor = RewardProcessor(specs)  # the loader's dedup: a shared model is built once
        self._lock = threading.Lock()
        self._busy = 0

    def describe(self) -> dict[str, dict[str, Any]]:
        """What the front's engine needs of each reward: its kind, inputs, record, and where it runs."""
        return {
            name: {"kind": r.kind, "inputs": r.inputs, "info": r.info, "device": str(r.device)}
            for name, r in self._processor.rewards.items()
        }

    def score(self, name: str, fields: Mapping[str, Sequence[Any]]) -> tuple[Any, BaseException | None]:
        """One call of entry ``name``'s reward: (its output, None), or (None, the exception it raised)."""
        with self._lock:
            self._busy += 1
        try:
            return invoke(self._processor.rewards[name], fields), None
        except Exception as exc:
            return None, _portable(exc)
        finally:
            with self._lock:
                self._busy -= 1
                idle = self._busy == 0
            if idle:  # the end of a reward phase here: entries with offload go back to sleep
                self._processor.phase_done()


def _portable(exc: Exception) -> Exception:
    """``exc`` when it survives pickling (it travels back to the front), else an error saying what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RewardExecutionError(f"{type(exc).__name__}: {exc}")


class DeploymentReward(Reward):
    """The front's stand-in for a placed entry: each call goes to its group's deployment (``handle``)."""

    io_bound = True  # its calls wait on another process: the engine overlaps its stream with the others
    enforces_deadline = True  # an entry's timeout_s cancels its request (rewardzoo.core.deadlines)
    kind = PER_INSTANCE

    def __init__(self, name: str, handle: Any, facts: Mapping[str, Any]) -> None:
        super().__init__(None, "cpu", "float32")  # nothing of it runs here (no CUDA stream on the front)
        self.name, self.handle = name, handle
        self.decide_kind(facts["kind"])
        setattr(self, "inputs", facts["inputs"])  # noqa: B010 (a ClassVar the instance overrides)
        self.info = facts["info"]
        self.served_device = facts["device"]

    def __call__(self, **fields: Sequence[Any]) -> Any:
        response = self.handle.score.remote(self.name, fields)
        seconds = deadline.remaining()  # the entry's timeout_s: past it the request is cancelled, nothing runs on
        try:
            output, error = response.result() if seconds is None else response.result(timeout_s=seconds)
        except TimeoutError:
            response.cancel()
            raise DeadlineError(
                "its deployment did not answer within the entry's deadline (timeout_s); the request was cancelled",
                reward=self.name,
            ) from None
        if error is not None:
            raise error
        return output

    def __repr__(self) -> str:
        return f"DeploymentReward({self.name!r} on {self.served_device})"


class DeploymentLoader(RewardLoader):
    """The front's loader: a placed entry is its :class:`DeploymentReward` (``groups``: each group's entry names and
    deployment handle); every other entry is built here, as by :class:`RewardLoader`."""

    def __init__(self, groups: Sequence[tuple[Sequence[str], Any]]) -> None:
        super().__init__()
        self._groups = {name: k for k, (names, _) in enumerate(groups) for name in names}
        self._handles = [handle for _, handle in groups]
        self._facts: dict[int, dict[str, Any]] = {}
        self._stand_ins: dict[str, DeploymentReward] = {}

    def load(self, spec: RewardSpec | dict[str, Any] | str, *, label: Any = None) -> Reward:
        k = self._groups.get(spec.name) if isinstance(spec, RewardSpec) else None
        if k is None:
            return super().load(spec, label=label)
        name = spec.name  # type: ignore[union-attr]
        with self._lock:
            if name not in self._stand_ins:
                if k not in self._facts:
                    self._facts[k] = self._handles[k].describe.remote().result()
                self._stand_ins[name] = DeploymentReward(name, self._handles[k], self._facts[k][name])
            return self._stand_ins[name]
