"""Per-sample reward calls, as verl and verl-omni make them, gathered into batches.

Workload: 64 concurrent per-sample calls (``asyncio.gather`` of ``compute_score``-style coroutines) on a tiny
``clip_score`` (random-init open_clip, CPU, 64x64 images with their prompts), ``batch_size: 64``. Sides,
interleaved: ``gathered`` (rewardzoo.integrations.gather.BatchedScorer, max_wait 5 ms), ``per_sample`` (one
processor call per sample, what a per-sample function without gathering does, on a thread pool of 8) and
``one_call`` (one processor call over all 64 samples: the floor). Goals: gathered >= 4x the per-sample
throughput; gathered <= 1.2x the one call's time. Scores of the three sides are checked equal first.

Run: python benchmarks/bench_verl.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures as cf
import tempfile
from pathlib import Path

import numpy as np
from results_io import figure, measure, print_figures, write_results
from timing import interleaved

N = 64


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

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

        reference = one_call()
        np.testing.assert_allclose(gathered(), reference, atol=1e-5)
        np.testing.assert_allclose(per_sample(), reference, atol=1e-5)
        medians, ratios = interleaved(
            {"gathered": gathered, "per_sample": per_sample, "one_call": one_call}, args.repeats
        )
        pool.shutdown()
    title = f"{N} concurrent per-sample calls, tiny clip_score (CPU, 64x64 images), batch_size {N}"
    figures = [
        figure(
            "verl.gathered_vs_per_sample",
            f"{title}: gathered batches vs one processor call per sample",
            measure("gathered", N / medians["gathered"], "samples/s"),
            baseline=measure("one call per sample", N / medians["per_sample"], "samples/s"),
            ratio=ratios["per_sample"],
            ratio_label="x throughput",
            goal=">= 4x",
            rewards=["clip_score"],
        ),
        figure(
            "verl.gathered_vs_one_call",
            f"{title}: gathered batches vs one processor call over all {N}",
            measure("gathered", medians["gathered"] * 1000, "ms"),
            baseline=measure("one call", medians["one_call"] * 1000, "ms"),
            ratio=1.0 / ratios["one_call"],
            ratio_label="gathered/one call",
            goal="<= 1.2x",
            rewards=["clip_score"],
        ),
    ]
    print_figures(figures)
    write_results(__file__, figures)


if __name__ == "__main__":
    main()
