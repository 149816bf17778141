"""Results as they are ready: time to the first scored sample against ``finalize()``.

    python benchmarks/bench_ready.py        # about 20 s on 2 CPU cores

One round of 64 samples (images 256x256) and two async streams of batch 8, one worker each: a fast
one, ``jpeg_incompressibility`` (Pillow's encoder), and a slow one, ``bench_slow_judge``, which sleeps
SLOW_S per call like a served judge waiting for its answers (8 calls). Each side adds the 64 samples
and then: ``finalize`` waits for the whole round; ``ready`` iterates ``runner.ready()`` (completion
order) and ``ordered`` ``runner.results(ordered=True)`` (input order), noting when the first row came,
then finish the round. Ratio = time to the first row / time of ``finalize()``, per repetition (the
sides interleaved by ``timing.interleaved_runs``), median over REPEATS after one warm-up. The rows are
checked to be ``finalize()``'s result, bit for bit.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np
from results_io import figure, measure, write_results
from timing import interleaved_runs

import rewardzoo
from rewardzoo import RewardProcessor, Sample
from rewardzoo.registry import register
from rewardzoo.rewards.base import Inputs, PointwiseReward

N, BATCH, SIZE, SLOW_S, REPEATS = 64, 8, 256, 0.04, 15


@register("bench_slow_judge")
class SlowJudge(PointwiseReward):
    """A stand-in for a served judge: sleeps SLOW_S per call, then scores the prompt length."""

    inputs = Inputs(("prompt",))

    def __call__(self, prompt, **_):
        time.sleep(SLOW_S)
        return [float(len(p)) for p in prompt]


def _samples() -> list[Sample]:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (N, SIZE, SIZE, 3), dtype=np.uint8)
    images[:, ::2] //= 3  # compressible rows, varied sizes
    return [Sample(image=img, prompt="p" * (i % 9 + 1)) for i, img in enumerate(images)]


def bench() -> dict:
    a = {"async_reward": True, "num_workers": 1, "batch_size": BATCH}
    proc = RewardProcessor(
        [
            {"name": "jpeg", "reward_model": "jpeg_incompressibility", **a},
            {"name": "judge", "reward_model": "bench_slow_judge", **a},
        ]
    )
    samples = _samples()
    expected = proc(samples)
    first: dict[str, list[float]] = {"ready": [], "ordered": []}
    with proc.incremental(timeout=120) as runner:

        def run_finalize():
            runner.add(samples)
            runner.finalize()

        def iterate(side: str, rows):
            start = time.perf_counter()
            runner.add(samples)
            for k, (_index, _row) in enumerate(rows()):
                if k == 0:
                    first[side].append(time.perf_counter() - start)
            runner.finalize()

        times = interleaved_runs(
            {
                "finalize": run_finalize,
                "ready": lambda: iterate("ready", runner.ready),
                "ordered": lambda: iterate("ordered", runner.results),
            },
            REPEATS,
        )
        # the rows are finalize()'s numbers
        runner.add(samples)
        rows = dict(runner.ready())
        result = runner.finalize()
    for name in expected.rewards:
        assert np.array_equal(result.rewards[name], expected.rewards[name], equal_nan=True)
        assert np.array_equal(
            np.concatenate([rows[i].rewards[name] for i in range(N)]), result.rewards[name], equal_nan=True
        )
    assert np.array_equal(np.concatenate([rows[i].total for i in range(N)]), result.total)
    out = {"finalize_s": statistics.median(times["finalize"])}
    for side in ("ready", "ordered"):
        firsts = first[side][1:]  # the warm-up's first
        out[side] = {
            "first_s": statistics.median(firsts),
            "all_s": statistics.median(times[side]),
            "ratio": statistics.median(f / t for f, t in zip(firsts, times["finalize"])),
            "all_ratio": statistics.median(a / t for a, t in zip(times[side], times["finalize"])),
        }
    return out


def figures(r: dict) -> list[dict]:
    work = (
        f"{N} samples (images {SIZE}x{SIZE}), two async streams of batch {BATCH}: `jpeg_incompressibility` "
        f"and a judge that sleeps {SLOW_S * 1e3:.0f} ms per call ({N // BATCH} calls)"
    )
    ideal = 1 / (N // BATCH)
    out = []
    for side, how in (("ready", "`runner.ready()`"), ("ordered", "`runner.results(ordered=True)`")):
        g = r[side]
        out.append(
            figure(
                f"execution.ready.first_{side}",
                f"time to the first row of {how} vs `finalize()`; " + work,
                measure("first row", g["first_s"] * 1e3, "ms"),
                baseline=measure("finalize()", r["finalize_s"] * 1e3, "ms"),
                ratio=g["ratio"],
                ratio_label="first row / finalize",
                goal="<= 0.25" if side == "ready" else None,
                notes=f"ideal ratio {ideal:.3f}: one of the judge's {N // BATCH} calls",
            )
        )
    g = r["ready"]
    out.append(
        figure(
            "execution.ready.all_rows",
            "all rows of `runner.ready()`, then `finalize()`, vs `finalize()` alone (the cost of the rows); " + work,
            measure("ready() + finalize()", g["all_s"] * 1e3, "ms"),
            baseline=measure("finalize()", r["finalize_s"] * 1e3, "ms"),
            ratio=g["all_ratio"],
            ratio_label="ready / finalize",
        )
    )
    return out


def main() -> None:
    print(f"rewardzoo {rewardzoo.__version__}, {os.cpu_count()} CPU cores, medians of {REPEATS} after warm-up")
    r = bench()
    print(f"finalize(): {r['finalize_s'] * 1e3:.0f} ms")
    for side in ("ready", "ordered"):
        g = r[side]
        print(
            f"  {side:8s}: first row {g['first_s'] * 1e3:.0f} ms ({g['ratio']:.3f} of finalize), "
            f"all rows + finalize {g['all_s'] * 1e3:.0f} ms ({g['all_ratio']:.2f})"
        )
    write_results(__file__, figures(r))


if __name__ == "__main__":
    sys.exit(main())
