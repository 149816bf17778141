"""Per-sample reward calls, as verl and verl-omni make them, gathered into batches.

Workload: 64 concurrent per-sample calls (``asyncio.gather`` of ``compute_score``-style coroutines) on a tiny
``clip_score`` (random-init open_clip, CPU, 64x64 images with their prompts), ``batch_size: 64``. Sides,
interleaved: ``gathered`` (rewardzoo.integrations.gather.BatchedScorer, max_wait 5 ms), ``per_sample`` (one
processor call per sample, what a per-sample function without gathering does, on a thread pool of 8) and
``one_call`` (one processor call over all 64 samples: the floor). Goals: gathered >= 4x the per-sample
throughput; gathered <= 1.2x the one call's time. Scores of the three sides are checked equal first.

Load: ``--load N`` runs N busy processes beside the benchmark (the machine under load); the record says which
condition each figure was measured in (``.quiet``: load average below 1 during the run; ``.shared``: other jobs ran
on the machine; ``.loaded``: with ``--load``, in its id) with the 1-minute load average seen during the run
(os.getloadavg, on this machine's cores), since load slows the one-call baseline more than the
gathered side's fixed cost and so flatters the ratio. A run replaces only its own condition's figures.

Run: python benchmarks/bench_verl.py [--repeats 5] [--load 2]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures as cf
import multiprocessing as mp
import os
import tempfile
from pathlib import Path

import numpy as np
from results_io import figure, measure, print_figures, write_results
from timing import interleaved

N = 64


class _Answering:
    """A processor stand-in answering every call with ``result`` (the gathering's fixed cost, without the model)."""

    def __init__(self, processor, result) -> None:
        self.processor, self.result = processor, result

    def __getattr__(self, name):
        return getattr(self.processor, name)

    def __call__(self, samples, step=None):
        return self.result


def _busy() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the benchmark (0: none)")
    args = parser.parse_args()
    hogs = [mp.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for hog in hogs:
        hog.start()
    try:
        run(args)
    finally:
        for hog in hogs:
            hog.terminate()


def run(args: argparse.Namespace) -> None:
    import torch

    from rewardzoo import testing as rzt
    from rewardzoo.core.loader import RewardLoader
    from rewardzoo.core.processor import RewardProcessor
    from rewardzoo.core.resolve import load_config
    from rewardzoo.integrations.gather import BatchedScorer
    from rewardzoo.spec.sample import Sample

    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        clip_dir = rzt.tiny_open_clip_dir(Path(tmp) / "clip", seed=0)
        specs = load_config(
            {
                "rewards": [
                    {
                        "name": "clip",
                        "reward_model": "clip_score",
                        "model_path": str(clip_dir),
                        "device": "cpu",
                        "batch_size": N,
                    }
                ]
            }
        ).rewards
        loader = RewardLoader()
        processor = RewardProcessor(specs, loader)
        scorer = BatchedScorer(specs, loader, max_wait_s=0.005)
        samples = [
            Sample(image=rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), prompt=f"a photo number {i}")
            for i in range(N)
        ]
        pool = cf.ThreadPoolExecutor(8)

        async def gathered_calls():
            return await asyncio.gather(*[scorer.score(s) for s in samples])

        def gathered():
            return np.concatenate([r.rewards["clip"] for r in asyncio.run(gathered_calls())])

        def per_sample():
            return np.concatenate([r.rewards["clip"] for r in pool.map(lambda s: processor([s]), samples)])

        def one_call():
            return processor(samples).rewards["clip"]

        # the gathering alone: the same 64 calls through a gatherer whose processor answers at once (the one
        # call's result), so what is timed is the fixed cost: submitting, waking, handing the rows back
        stub = BatchedScorer(specs, loader, max_wait_s=0.005)
        answer = processor(samples)
        stub.gatherers["clip"].processor = _Answering(stub.gatherers["clip"].processor, answer)

        async def stub_calls():
            return await asyncio.gather(*[stub.score(s) for s in samples])

        def gathering_only():
            return np.concatenate([r.rewards["clip"] for r in asyncio.run(stub_calls())])

        reference = one_call()
        np.testing.assert_allclose(gathered(), reference, atol=1e-5)
        np.testing.assert_allclose(per_sample(), reference, atol=1e-5)
        load_before = os.getloadavg()[0]
        medians, ratios = interleaved(
            {"gathered": gathered, "per_sample": per_sample, "one_call": one_call, "gathering_only": gathering_only},
            args.repeats,
        )
        load = max(load_before, os.getloadavg()[0])
        pool.shutdown()
    cores = os.cpu_count() or 1
    # quiet: nothing else ran (load average under one per core... of the benchmark's own two threads, below 1.0)
    condition = "loaded" if args.load else "quiet" if load < 1.0 else "shared"
    said = {
        "loaded": f"loaded: {args.load} busy processes beside the benchmark",
        "quiet": "quiet: nothing else ran on the machine",
        "shared": "shared: no load of the benchmark's own, but other jobs ran on the machine",
    }[condition] + f"; 1-minute load average up to {load:.1f} on {cores} cores during the run"
    title = f"{N} concurrent per-sample calls, tiny clip_score (CPU, 64x64 images), batch_size {N}"
    figures = [
        figure(
            f"verl.{condition}.gathered_vs_per_sample",
            f"{title}: gathered batches vs one processor call per sample",
            measure("gathered", N / medians["gathered"], "samples/s"),
            baseline=measure("one call per sample", N / medians["per_sample"], "samples/s"),
            ratio=ratios["per_sample"],
            ratio_label="x throughput",
            goal=">= 4x",
            rewards=["clip_score"],
            notes=said,
        ),
        figure(
            f"verl.{condition}.gathered_vs_one_call",
            f"{title}: gathered batches vs one processor call over all {N}",
            measure("gathered", medians["gathered"] * 1000, "ms"),
            baseline=measure("one call", medians["one_call"] * 1000, "ms"),
            ratio=1.0 / ratios["one_call"],
            ratio_label="gathered/one call",
            goal="<= 1.2x",
            rewards=["clip_score"],
            notes=said,
        ),
        figure(
            f"verl.{condition}.fixed_cost",
            f"{title}: the gathering's own cost (the same calls, a processor that answers at once) vs one call",
            measure("gathering only", medians["gathering_only"] * 1000, "ms"),
            baseline=measure("one call", medians["one_call"] * 1000, "ms"),
            ratio=ratios["gathering_only"] / ratios["one_call"],
            ratio_label="fixed cost / one call",
            goal="<= 0.2x",
            rewards=["clip_score"],
            notes=said,
        ),
    ]
    print_figures(figures)
    print(said)
    # the figures of the other condition are kept; those of before the conditions were told apart are dropped
    write_results(
        __file__, figures, parts=[f"verl.{condition}", "verl.gathered_vs_per_sample", "verl.gathered_vs_one_call"]
    )


if __name__ == "__main__":
    main()
