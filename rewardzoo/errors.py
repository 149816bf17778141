"""One error family for everything a user can get wrong.

Every error rewardzoo raises on purpose derives from :class:`RewardZooError`, so a trainer can catch
them all in one place; each names what it can of the reward, the field and the sample.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Mapping, Sequence


class RewardZooError(Exception):
    """Base class of every error rewardzoo raises for bad configuration, input or output."""


class ConfigError(RewardZooError, ValueError):
    """A YAML/dict reward configuration is invalid (names the entry and the field)."""

    def __init__(self, message: str, *, entry: str | None = None, field: str | None = None):
        self.message, self.entry, self.field = message, entry, field
        where = ", ".join(p for p in (f"entry '{entry}'" if entry else "", f"field '{field}'" if field else "") if p)
        super().__init__(f"{where}: {message}" if where else message)


class RegistryError(RewardZooError, LookupError):
    """A reward name or Python path cannot be resolved."""


class MissingExtraError(RegistryError, ImportError):
    """A reward needs an optional dependency that is not installed."""

    def __init__(self, reward: str, module: str, extra: str | None):
        self.reward, self.module, self.extra = reward, module, extra
        hint = f"pip install 'rewardzoo[{extra}]'" if extra else f"pip install {module}"
        super().__init__(f"reward '{reward}' needs the module '{module}', which is not installed: {hint}")


class InputError(RewardZooError, ValueError):
    """A sample cannot be scored: a missing field, unreadable media, a malformed value.

    ``sample`` is the index of the sample in the call (the CLI turns it into a manifest line number).
    """

    def __init__(self, message: str, *, reward: str | None = None, field: str | None = None,
                 sample: int | None = None):
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

    def located(self, *, reward: str | None = None, field: str | None = None, sample: int | None = None,
                indices: Sequence[int] | None = None, renamed: Mapping[str, str] | None = None, prefix: str = "",
                suffix: str = "") -> "InputError":
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
        own_field = (renamed or {}).get(self.field, self.field)
        err = type(self).__new__(type(self))
        InputError.__init__(err, prefix + self.message + suffix,
                            reward=self.reward if self.reward is not None else reward,
                            field=own_field if own_field is not None else field,
                            sample=own if own is not None else sample)
        return err

    def with_label(self, sample_label: str) -> str:
        """The message with the sample index replaced by a caller's label (e.g. 'line 7')."""
        return self._format(sample_label)


class RewardOutputError(RewardZooError, ValueError):
    """A reward returned something other than one finite score per input."""

    def __init__(self, message: str, *, reward: str | None = None):
        self.reward = reward
        super().__init__(f"reward '{reward}': {message}" if reward else message)


class RewardExecutionError(RewardZooError, RuntimeError):
    """A reward raised while scoring (re-raised with the reward's name; the original is the cause)."""

    def __init__(self, message: str, *, reward: str | None = None):
        self.reward = reward
        super().__init__(f"reward '{reward}': {message}" if reward else message)


class RewardTimeoutError(RewardExecutionError, TimeoutError):
    """Asynchronous reward calls did not finish within the runner's timeout (names the rewards)."""


class RemoteRankError(RewardExecutionError):
    """Another rank failed during a cross-rank reward exchange (names that rank and its reward)."""

    def __init__(self, message: str, *, rank: int, reward: str | None = None):
        self.rank, self.reward = rank, reward
        RuntimeError.__init__(self, message)  # the message already names the reward


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A ' (did you mean ...?)' suffix for close matches, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
