"""One error family for everything a user can get wrong.

Every error rewardzoo raises on purpose derives from :class:`RewardZooError`, so a trainer can catch
them all in one place; each names what it can of the reward, the field and the sample.

Sample indices, one API for every error: ``exc.samples`` is the tuple of the samples an error concerns (indices
in the call or batch it came from; None when it concerns no sample); ``exc.located(...)`` is a copy placed in the
caller's frame (a call's positions mapped onto the caller's indices, the reward named), and
``exc.with_label(label)`` is the message with each index ``i`` written as ``label(i)`` (a manifest's 'line 7', a
Parquet file's 'row 6'; a request keeps 'sample i'). This module imports nothing of rewardzoo.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar


class RewardZooError(Exception):
    """Base class of every error rewardzoo raises for bad configuration, input or output.

    ``samples``: the indices of the samples it concerns, None for an error about no sample (see the module doc).
    """

    samples: tuple[int, ...] | None = None

    def with_label(self, label: Callable[[int], str]) -> str:
        """The message with each sample index ``i`` written as ``label(i)`` (e.g. 'line 7')."""
        return str(self)


class ConfigError(RewardZooError, ValueError):
    """A YAML/dict reward configuration is invalid (names the entry and the field)."""

    def __init__(self, message: str, *, entry: str | None = None, field: str | None = None):
        self.message, self.entry, self.field = message, entry, field
        where = ", ".join(p for p in (f"entry '{entry}'" if entry else "", f"field '{field}'" if field else "") if p)
        super().__init__(f"{where}: {message}" if where else message)


class UnknownConfigError(ConfigError):
    """A config named by a word that is neither a file, a shipped config nor a reward name."""


class MissingWeightsError(ConfigError):
    """A reward's weights are not on this machine and cannot be fetched now (the hub unreachable, or
    ``HF_HUB_OFFLINE``), or differ from the lock file a run requires. ``repository``: the hub repository (or URL)
    they come from; ``files``: the files missing."""

    def __init__(
        self,
        message: str,
        *,
        entry: str | None = None,
        field: str | None = "model_path",
        repository: str | None = None,
        files: tuple[str, ...] = (),
    ):
        self.repository, self.files = repository, tuple(files)
        super().__init__(message, entry=entry, field=field)


class RegistryError(RewardZooError, LookupError):
    """A reward name or Python path cannot be resolved (names the config entry once one is known)."""

    entry: str | None = None
    field: str | None = None
    bare: str  # the message without the entry prefix, set by in_entry

    def in_entry(self, entry: str, field: str) -> RegistryError:
        """A copy that names the config entry and field it came from (replacing an inner entry's)."""
        bare = self.__dict__.get("bare", str(self))
        # a TimeoutError (an OSError) is not made by BaseException.__new__: copy it through its own reduction
        err = copy.copy(self) if isinstance(self, OSError) else type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        err.bare, err.entry, err.field = bare, entry, field
        err.args = (f"entry '{entry}', field '{field}': {bare}",)
        return err


class MissingExtraError(RegistryError, ImportError):
    """A reward needs an optional dependency that is not installed."""

    def __init__(self, reward: str, module: str, extra: str | None):
        self.reward, self.module, self.extra = reward, module, extra
        hint = f"pip install 'rewardzoo[{extra}]'" if extra else f"pip install {module}"
        super().__init__(f"reward '{reward}' needs the module '{module}', which is not installed: {hint}")


_I = TypeVar("_I", bound="InputError")


class InputError(RewardZooError, ValueError):
    """A sample cannot be scored: a missing field, unreadable media, a malformed value.

    ``sample`` is the index of the sample in the call (the CLI turns it into a manifest line number);
    ``samples`` is the same as a tuple, as every error of the family has it.
    """

    def __init__(self, message: str, *, reward: str | None = None, field: str | None = None, sample: int | None = None):
        self.message, self.reward, self.field, self.sample = message, reward, field, sample
        super().__init__(self._format())

    def _format(self, sample_label: str | None = None) -> str:
        parts = []
        if self.sample is not None:
            parts.append(sample_label or f"sample {self.sample}")
        if self.field is not None:
            parts.append(f"field '{self.field}'")
        if self.reward is not None:
            parts.append(f"reward '{self.reward}'")
        return f"{', '.join(parts)}: {self.message}" if parts else self.message

    @property
    def samples(self) -> tuple[int, ...] | None:  # type: ignore[override]
        return None if self.sample is None else (self.sample,)

    def located(
        self: _I,
        *,
        reward: str | None = None,
        field: str | None = None,
        sample: int | None = None,
        indices: Sequence[int] | None = None,
        renamed: Mapping[str, str] | None = None,
        prefix: str = "",
        suffix: str = "",
    ) -> _I:
        """A copy of this error placed in the caller's frame: the one way errors are re-located.

        ``reward``, ``field`` and ``sample`` fill in the parts this error does not name yet (parts it
        names are kept). ``indices`` maps a sample index local to a call onto the caller's index
        (``indices[self.sample]``; an index outside it becomes unknown). ``renamed`` maps the field this
        error names onto the caller's (a composite's inner ``image`` is its ``video``). ``prefix`` and
        ``suffix`` go around the message (the composite the error passed through, another rank's index).
        """
        own = self.sample
        if indices is not None and own is not None:
            own = indices[own] if 0 <= own < len(indices) else None
        own_field = (renamed or {}).get(self.field, self.field) if self.field is not None else None
        err = type(self).__new__(type(self))
        InputError.__init__(
            err,
            prefix + self.message + suffix,
            reward=self.reward if self.reward is not None else reward,
            field=own_field if own_field is not None else field,
            sample=own if own is not None else sample,
        )
        return err

    def with_label(self, label: Callable[[int], str]) -> str:
        """The message with the sample index ``i`` written as ``label(i)`` (e.g. 'line 7')."""
        return self._format(label(self.sample) if self.sample is not None else None)


def describe_samples(samples: Sequence[int], label: Callable[[int], str] | None = None) -> str:
    """'sample 3', 'samples 3, 4, 9' (at most 8 listed), or the caller's labels ('line 7, line 9')."""
    shown = [label(i) if label else str(i) for i in samples[:8]]
    more = f" and {len(samples) - 8} more" if len(samples) > 8 else ""
    if label:
        return ", ".join(shown) + more
    return f"sample{'s' if len(samples) > 1 else ''} {', '.join(shown)}{more}"


_E = TypeVar("_E", bound="_CallError")


class _CallError(RewardZooError):
    """An error about one reward call: names the reward and the samples of the call it concerns.

    ``samples`` are the caller's sample indices (global in a batch); the CLI relabels them as manifest
    lines with :meth:`with_label`.
    """

    def __init__(self, message: str, *, reward: str | None = None, samples: Sequence[int] | None = None):
        self.message, self.reward = message, reward
        self.samples = tuple(int(i) for i in samples) if samples is not None else None
        super().__init__(self._format())

    def _format(self, label: Callable[[int], str] | None = None) -> str:
        text = f"reward '{self.reward}': {self.message}" if self.reward else self.message
        return f"{text} ({describe_samples(self.samples, label)})" if self.samples else text

    def with_label(self, label: Callable[[int], str]) -> str:
        """The message with each sample index replaced by ``label(index)`` (e.g. 'line 7')."""
        return self._format(label)

    def _copy(self: _E, **changes: object) -> _E:
        # a TimeoutError (an OSError) is not made by BaseException.__new__: copy it through its own reduction
        err = copy.copy(self) if isinstance(self, OSError) else type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        err.__dict__.update(changes)
        Exception.__init__(err, err._format())
        return err

    def located(self: _E, *, reward: str | None = None, indices: Sequence[int] | None = None) -> _E:
        """A copy placed in the caller's frame: naming ``reward`` when it names none, and the caller's samples
        ``indices`` (the call's); this error itself when it already names its samples (an inner call's)."""
        if self.samples is not None:
            return self
        changes: dict[str, object] = {"reward": reward} if self.reward is None and reward is not None else {}
        if indices is not None:
            changes["samples"] = tuple(int(i) for i in self._offending(indices))
        return self._copy(**changes) if changes else self

    def _offending(self, indices: Sequence[int]) -> Sequence[int]:
        return indices


class RewardOutputError(_CallError, ValueError):
    """A reward returned something other than one finite score per input, within its declared range.

    ``inputs``: the positions within the call of the offending scores, when known (see :meth:`located`).
    """

    def __init__(
        self,
        message: str,
        *,
        reward: str | None = None,
        inputs: Sequence[int] | None = None,
        samples: Sequence[int] | None = None,
    ):
        self.inputs = tuple(int(i) for i in inputs) if inputs is not None else None
        super().__init__(message, reward=reward, samples=samples)

    def remapped(self, positions: Sequence[int]) -> RewardOutputError:
        """A copy whose inputs are positions in the enclosing call (a composite's inner call -> its own)."""
        return self._copy(inputs=tuple(int(positions[i]) for i in self.inputs) if self.inputs else None)

    def _offending(self, indices: Sequence[int]) -> Sequence[int]:
        """The offending inputs mapped through ``indices``, else all of them."""
        return [indices[i] for i in self.inputs if 0 <= i < len(indices)] if self.inputs else list(indices)


class RewardExecutionError(_CallError, RuntimeError):
    """A reward raised while scoring (re-raised with the reward's name and the call's samples; the
    original is the cause)."""


class OutputWriteError(RewardZooError):
    """An output file could not be written (a full disk, a quota, a lost mount): names the file and the reason,
    and where the work done so far was kept. ``errno`` is the operating system's error number."""

    def __init__(self, message: str, *, errno: int | None = None):
        self.errno = errno
        super().__init__(message)


class RunnerClosedError(RewardZooError, RuntimeError):
    """An :class:`~rewardzoo.core.async_runner.AsyncRewardRunner` was used after ``close()``."""


class RunnerStateError(RewardZooError, RuntimeError):
    """An :class:`~rewardzoo.core.async_runner.AsyncRewardRunner` call out of turn: ``add`` while the round's
    results are being read (``ready``/``results``, until ``finalize``), or an iterator of a finished round."""


class WakeError(RewardZooError, RuntimeError):
    """A sleeping reward's weights could not be brought back (``offload: drop``: a checkpoint file gone or rewritten
    since load; an ONNX model file gone): names the reward and the file; the reward stays asleep."""


class WorkerError(RewardExecutionError):
    """A reward's worker process (``environment:``) failed: it did not start within its ``start_timeout_s``,
    crashed at import, died mid-call (after its restart and one retry), did not answer a call within its
    ``call_timeout_s`` (it was killed), or answered something malformed.
    ``entry`` is the config entry, ``environment`` the environment (as its spec describes it), ``stderr`` the
    worker's last stderr lines; the message names all three."""

    def __init__(
        self,
        message: str,
        *,
        entry: str | None,
        environment: str,
        stderr: str = "",
        samples: Sequence[int] | None = None,
    ):
        self.entry, self.environment, self.stderr = entry, environment, stderr
        tail = "\n".join("  | " + line for line in stderr.splitlines()) if stderr.strip() else "  | (nothing)"
        super().__init__(
            f"{message} [{environment}]; the worker's last stderr lines:\n{tail}", reward=entry, samples=samples
        )


class RewardTimeoutError(RewardExecutionError, TimeoutError):
    """Asynchronous reward calls did not finish within the runner's timeout (names the rewards)."""


class DeadlineError(RewardTimeoutError):
    """A call of a required entry ran past its ``timeout_s`` (names the entry and the call's samples); an
    ``optional: true`` entry abstains instead (see :mod:`rewardzoo.core.deadlines`)."""


class RemoteRankError(RewardExecutionError):
    """Another rank failed during a cross-rank reward exchange (names that rank and its reward)."""

    def __init__(self, message: str, *, rank: int, reward: str | None = None):
        self.rank, self.reward, self.message, self.samples = rank, reward, message, None
        RuntimeError.__init__(self, message)  # the message already names the reward

    def _format(self, label: Callable[[int], str] | None = None) -> str:
        return self.message


class HttpError(RewardZooError, RuntimeError):
    """An HTTP call failed: a non-retryable status, or still failing after the last retry.

    ``status`` is None when no response came (refused connection, timeout). The message names the URL,
    the status or reason and the number of tries, never a request header (no token leaks).
    """

    def __init__(self, url: str, *, status: int | None, attempts: int, reason: str, body: bytes = b""):
        self.url, self.status, self.attempts, self.reason, self.body = url, status, attempts, reason, body[:2048]
        answered = f"HTTP {status}" if status is not None else "no response"
        tries = f" after {attempts} tries" if attempts > 1 else ""
        excerpt = body[:200].decode("utf-8", "replace").strip()
        super().__init__(f"{url}: {answered} ({reason}){tries}" + (f": {excerpt}" if excerpt else ""))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A ' (did you mean ...?)' suffix for close matches, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
