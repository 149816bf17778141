"""Shared timing for the benchmark scripts: contestants run round-robin, so load drifting on a shared
machine hits every side alike (sequential medians drifted by up to 2x on the development machine)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def interleaved_runs(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds per side and repetition. Each repetition runs every side once, the starting side rotating."""
    keys = list(fns)
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(repeats):
        for k in keys[r % len(keys) :] + keys[: r % len(keys)]:
            t0 = time.perf_counter()
            fns[k]()
            times[k].append(time.perf_counter() - t0)
    return times


def interleaved(
    fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> tuple[dict[str, float], dict[str, float]]:
    """(median seconds per side, median over repetitions of side / first side).

    The per-repetition ratio against the first side (:func:`interleaved_runs`) cancels most of the drift.
    """
    times = interleaved_runs(fns, repeats, warmup)
    first = times[next(iter(fns))]
    ratios = {k: statistics.median(a / b for a, b in zip(v, first)) for k, v in times.items()}
    return {k: statistics.median(v) for k, v in times.items()}, ratios


def quiet_transformers() -> None:
    """Warnings, transformers' log lines below errors and its progress bars off: a benchmark's output is its figures."""
    import warnings

    from transformers.utils import logging as hf_logging

    warnings.simplefilter("ignore")
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
