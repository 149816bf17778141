"""Shared timing for the benchmark scripts: contestants run round-robin, so load drifting on a shared
machine hits every side alike (sequential medians drifted by up to 2x on the development machine)."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1
                ) -> tuple[dict[str, float], dict[str, float]]:
    """(median seconds per side, median over repetitions of side / first side).

    Each repetition runs every side once, the starting side rotating; the per-repetition ratio against
    the first side cancels most of the drift.
    """
    keys = list(fns)
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(repeats):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            t0 = time.perf_counter()
            fns[k]()
            times[k].append(time.perf_counter() - t0)
    first = times[keys[0]]
    ratios = {k: statistics.median(a / b for a, b in zip(times[k], first)) for k in keys}
    return {k: statistics.median(v) for k, v in times.items()}, ratios
