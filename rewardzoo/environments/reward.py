"""The parent's side of an entry with ``environment:``: a reward whose calls go to its environment's worker.

The entry's reward is built in the worker, by the worker's own registry (so ``reward_model:`` may name a class or
a plugin that only that environment can import); what the parent learns from the worker's answer is what the
engine needs: kind, fields, score range, direction, the record. Calls send the samples (media as raw arrays, in
shared memory on the same host) and get back exactly what the worker's processor computed; the worker's errors
come back as the same kinds of error (an :class:`~rewardzoo.errors.InputError` naming the field and sample, a
:class:`~rewardzoo.errors.RewardOutputError`, a :class:`~rewardzoo.errors.RewardExecutionError`), and a worker
that fails as a :class:`~rewardzoo.errors.WorkerError` naming the entry, the environment and its stderr tail.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError, RegistryError, RewardExecutionError, RewardOutputError, WorkerError
from ..rewards.base import Reward, RewardOutput
from ..rewards.info import PER_INSTANCE, RewardInfo
from ..rewards.remote import served_facts, served_inputs
from ..shared import deadline
from ..spec.config import EnvironmentSpec, RewardSpec
from ..transport.wire import PROTOCOL, decode_result, encode_sample
from . import workers

#: What of an entry the worker builds (stream settings such as weight and datasets stay with the parent's engine).
_CHILD_KEYS = ("name", "reward_model", "model_path", "dtype", "device", "batch_size", "kwargs", "limits")


def child_entry(spec: RewardSpec) -> dict[str, Any]:
    """The entry mapping the worker builds for ``spec`` (plain data; ConfigError when kwargs are not)."""
    entry = {key: getattr(spec, key) for key in _CHILD_KEYS}
    entry["kwargs"], entry["limits"] = dict(spec.kwargs), dict(spec.limits)
    try:
        json.dumps(entry, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"an entry that runs in its own environment needs plain-data kwargs (they are sent to the worker): {exc}",
            entry=spec.name,
            field="kwargs",
        ) from None
    return entry


class WorkerReward(Reward):
    """An entry's reward running in a worker process of its ``environment:`` (see the module docstring).
    Its scores are the worker's: ``score = s`` as the reward computes it there."""

    thread_safe = True  # calls are serialised per worker
    io_bound = True  # its calls wait on another process: the engine overlaps them with local streams
    enforces_deadline = True  # past an entry's timeout_s its worker is killed (nothing is left running)
    kind = PER_INSTANCE

    @staticmethod
    def identity(spec: RewardSpec) -> Hashable:
        """Entries with equal identities share one instance (the loader's cache key)."""
        return ("environment", spec.environment, json.dumps(child_entry(spec) | {"name": None}, sort_keys=True))

    def __init__(self, spec: RewardSpec) -> None:
        super().__init__(spec.model_path, spec.device, spec.dtype)
        self.name = spec.name
        if spec.environment is None:
            raise ConfigError("a worker reward is built for an entry with an `environment:`", entry=spec.name)
        self.environment: EnvironmentSpec = spec.environment
        self.entry = child_entry(spec)
        self.worker = workers.worker_for(spec.environment)
        try:
            answer = self.worker.load(self.entry, name=spec.name)
            if "error" in answer:
                raise self._error(answer["error"], None)
            loaded = answer["ok"]
            row, record = loaded["row"], loaded["info"]
            row["score_range"] = [float(b) for b in row["score_range"]]
            facts = served_facts({spec.name: row}, {spec.name: 1.0}, f"worker of {self.environment.describe()}")
            facts["summary"] = row.get("summary") or facts["summary"]
        except BaseException:
            self.close()
            raise
        self.decide_kind(facts["kind"])
        self.inputs = served_inputs({spec.name: row}, facts["kind"], {})
        self.device = record.get("device", spec.device)
        self.info = RewardInfo(
            name=record["name"],
            implementation=record["implementation"],
            summary=facts["summary"],
            modality=facts["modality"],
            kind=facts["kind"],
            extra=record.get("extra"),
            higher_is_better=facts["higher_is_better"],
            score_range=tuple(facts["score_range"]),
            download=bool(record.get("download")),
            devices=tuple(record["devices"]) if record.get("devices") else None,
            license=record.get("license"),
            source=f"{record.get('source', 'python path')}, in a worker of the {self.environment.describe()}",
            differentiable=False,
        )

    def __call__(self, **fields: Sequence[Any]) -> RewardOutput:
        n = len(next(iter(fields.values())))
        samples = []
        for i in range(n):
            try:
                samples.append(encode_sample({key: values[i] for key, values in fields.items()}, "raw"))
            except InputError as exc:
                raise exc.located(sample=i) from None
        message = {
            "op": "score",
            "request": {"protocol": PROTOCOL, "rewards": [self.entry["name"]], "samples": samples},
        }

        # an entry's timeout_s (rewardzoo.shared.deadline): past it the worker is killed, the call a DeadlineError
        answer = self.worker.ask(message, entry=self.name, shared="request", seconds=deadline.remaining())
        if "error" in answer:
            raise self._error(answer["error"], n)
        try:
            result = decode_result(answer["ok"])
            scores = np.asarray(result["rewards"][self.entry["name"]], dtype=np.float64)
            if scores.shape != (n,):
                raise ValueError(f"{scores.shape[0]} scores for {n} samples")
        except (ValueError, KeyError, TypeError) as exc:
            stderr = self.worker.stderr_tail
            self.worker.reset()  # what it says next cannot be trusted: the next call starts it again
            raise WorkerError(
                f"the worker's answer is malformed ({exc}); it was stopped",
                entry=self.name,
                environment=self.environment.describe(),
                stderr=stderr,
            ) from None
        extras = result["extras"].get(self.entry["name"], {})
        return RewardOutput(scores, {k: (list(v) if v.dtype == object else v) for k, v in extras.items()})

    def _error(self, error: Mapping[str, Any], n: int | None) -> Exception:
        """The worker's error answer as the same kind of error here."""
        if not isinstance(error, Mapping):
            return WorkerError(
                f"the worker's answer is malformed (error {error!r:.80})",
                entry=self.name,
                environment=self.environment.describe(),
                stderr=self.worker.stderr_tail,
            )
        kind, message = (
            error.get("kind"),
            f"{error.get('message')} (in the worker of the {self.environment.describe()})",
        )
        if kind == "input":
            return InputError(message, field=error.get("field"), sample=error.get("sample"))
        if kind == "config":
            if error.get("type") in ("RegistryError", "MissingExtraError"):
                return RegistryError(message)  # the loader names the entry and field
            return ConfigError(message, entry=self.name, field=error.get("field"))
        if kind == "output":
            return RewardOutputError(message, reward=self.name)
        if n is None:
            return WorkerError(
                f"the worker could not build the entry: {error.get('type')}: {error.get('message')}",
                entry=self.name,
                environment=self.environment.describe(),
                stderr=self.worker.stderr_tail,
            )
        return RewardExecutionError(f"{error.get('type')}: {message}", reward=self.name)

    def close(self) -> None:
        """This entry no longer uses its worker (the last entry to close stops it)."""
        worker, self.__dict__["worker"] = self.__dict__.get("worker"), None
        if worker is not None:
            workers.release(worker)

    def __repr__(self) -> str:
        return f"WorkerReward({self.entry['reward_model']!r}, {self.environment.describe()})"
