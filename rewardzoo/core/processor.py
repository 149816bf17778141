"""The synchronous front end: score a batch of samples with a list of reward specs, calls inline.

The steps themselves live in :mod:`rewardzoo.core.engine`. A front end decides how calls run; this one
runs them on the caller's thread. :class:`RewardProcessor` is also the base of the other front ends:
:meth:`RewardProcessor.score_into` is where a subclass (the cross-rank processor) changes how a
batch is scored, and :attr:`RewardProcessor.collective` says whether every rank must take part in
each call.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..rewards.base import Reward
from ..spec.config import DecodeSpec, RewardSpec
from ..spec.sample import Sample
from .decode import LatentDecoder, decoder_for
from .engine import ConversionCache, RewardResult, ScoreTable, Scoring, as_samples, score_specs
from .loader import RewardLoader
from .memory_plan import place_auto_entries
from .resolve import parse_specs
from .streams import resolve_streams

if TYPE_CHECKING:
    from .async_runner import AsyncRewardRunner

__all__ = ["RewardProcessor", "RewardResult"]


class RewardProcessor:
    """Score samples with a list of reward specs; each unique model is loaded once (through ``loader``).

    >>> import numpy as np
    >>> from rewardzoo import Sample
    >>> proc = RewardProcessor(["jpeg_compressibility", {"name": "big", "reward_model": "jpeg_incompressibility"}])
    >>> result = proc([Sample(image=np.zeros((32, 32, 3), np.uint8), prompt="a black square")])
    >>> result.applied
    [['jpeg_compressibility', 'big']]
    >>> small, big = result.rewards["jpeg_compressibility"].item(), result.rewards["big"].item()
    >>> small == -big / 500  # -kB / 500 and kB
    True
    """

    def __init__(
        self,
        specs: Sequence[RewardSpec | Mapping[str, Any] | str],
        loader: RewardLoader | None = None,
        *,
        advantage: str = "sum",
        decode: DecodeSpec | Mapping[str, Any] | None = None,
    ) -> None:
        from ..spec.config import check_mode

        self.specs: tuple[RewardSpec, ...] = parse_specs(list(specs))
        self.advantage = check_mode(advantage)  # the default mode of result.advantages()
        self._owns_loader = loader is None
        self.loader = loader or RewardLoader()
        place_auto_entries(self.loader, self.specs)  # `device: auto` over several GPUs: by the memory plan
        self.rewards: dict[str, Reward] = {spec.name: self.loader.load(spec) for spec in self.specs}
        self.specs = tuple(resolve_streams(spec, self.rewards[spec.name]) for spec in self.specs)
        #: the config's ``decode:`` stage (rewardzoo.core.decode): latents decoded once per batch for the pixel rewards
        self.decoder: LatentDecoder | None = decoder_for(decode, self.loader)
        self._held = 0  # open `awake()` blocks
        self.sleep()

    def sleep(self) -> None:
        """Put the rewards of entries with ``offload: cpu|drop`` to sleep (their weights off the device); those
        with ``offload: none`` (or sharing a model with such an entry) stay. A call wakes what it needs."""
        self.loader.sleep(self.rewards.values())

    def wake(self) -> None:
        """Bring every sleeping reward of this processor back to its device (a call does it by itself)."""
        self.loader.wake(self.rewards.values())

    @contextmanager
    def awake(self) -> Iterator[RewardProcessor]:
        """Keep the rewards awake across several calls (one reward phase); asleep again at the end."""
        self.wake()
        self._held += 1
        try:
            yield self
        finally:
            self._held -= 1
            self.phase_done()

    def phase_done(self) -> None:
        """The end of a reward phase: entries with ``offload`` go back to sleep (unless inside ``awake()``)."""
        if self._held == 0:
            self.sleep()

    def close(self) -> None:
        """Stop the worker processes of this processor's ``environment:`` entries (when it made its loader; a
        loader passed in is closed by its owner). Also at exit, and as a context manager."""
        if self._owns_loader:
            self.loader.close()

    def __enter__(self) -> RewardProcessor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def collective(self) -> bool:
        """Whether scoring is a collective operation (every rank must call at the same point)."""
        return False

    def __call__(self, samples: Iterable[Sample | Mapping[str, Any]], *, step: int | None = None) -> RewardResult:
        """Score ``samples``; ``step``: the trainer's global step, at which scheduled weights
        (``weight: {schedule: ...}``) are read (``result.weights`` holds the weight each sample got)."""
        try:
            batch, error = self.with_pixels(as_samples(samples)), None
        except InputError as exc:
            if not self.collective:
                raise
            batch, error = [], exc  # every rank must still reach the exchange; then all of them raise
        table = ScoreTable(self.specs, batch, self.advantage, step)
        try:
            self.score_into(table, ConversionCache(batch), Scoring(error=error))
        finally:
            self.phase_done()
        return table.result()

    def with_pixels(self, samples: list[Sample], start: int = 0) -> list[Sample]:
        """``samples`` with the decode stage's pixels to come where a pixel reward will read a latent's pixels
        (:meth:`~rewardzoo.core.decode.LatentDecoder.attach`; errors name the samples from ``start``); unchanged
        without a decode stage."""
        return samples if self.decoder is None else self.decoder.attach(samples, self.specs, self.rewards, start)

    def score_into(self, table: ScoreTable, cache: ConversionCache, run: Scoring = Scoring()) -> None:
        """Fill ``table`` for every spec except those in ``run.skip`` (already handled by the caller).

        ``run`` (a :class:`~rewardzoo.core.engine.Scoring`): ``run_jobs`` runs a stream's prepared calls;
        ``error`` is a failure the caller already had (raised here, after any collective step); ``finish()``
        is the caller's remaining work (e.g. waiting for its workers), run once the local scoring is done.
        """
        if run.error is not None:
            raise run.error
        score_specs(self.specs, self.rewards, table, cache, run)
        if run.finish is not None:
            run.finish()

    def incremental(self, *, timeout: float | None = None, group_size: int | None = None) -> AsyncRewardRunner:
        """An :class:`~rewardzoo.core.async_runner.AsyncRewardRunner` over this processor (``add`` then ``finalize``)."""
        from .async_runner import AsyncRewardRunner

        return AsyncRewardRunner(self, timeout=timeout, group_size=group_size)
