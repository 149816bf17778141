"""Processor overhead and import cost (issue 2).

1. Overhead: the JPEG rewards scored through RewardProcessor vs. calling the reward objects directly on
   the same batches (same PIL images, same chunking). Calls alternate; median per-call ratio, goal <= 1.05.
2. Import: wall time (best of N) of `import rewardzoo; rewardzoo.list_rewards()` in a fresh interpreter,
   next to a bare interpreter start measured in the same run. Goal: under 0.3 s.

Run: python benchmarks/bench_processor.py [--repeats 21]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np
from PIL import Image
from results_io import figure, measure, write_results
from timing import interleaved


def bench_overhead(repeats: int, n: int = 64, size: int = 512, batch: int = 16) -> dict:
    from rewardzoo import RewardProcessor, Sample

    rng = np.random.default_rng(0)
    base = rng.random((size, size, 3))
    images = [
        Image.fromarray((np.clip(base + 0.1 * i / n * rng.random((size, size, 3)), 0, 1) * 255).astype(np.uint8))
        for i in range(n)
    ]
    specs = [{"name": name, "batch_size": batch} for name in ("jpeg_compressibility", "jpeg_incompressibility")]
    proc = RewardProcessor(specs)
    samples = [Sample(image=img) for img in images]
    rewards = list(proc.rewards.values())

    def direct():
        for reward in rewards:
            for i in range(0, n, batch):
                reward(image=images[i : i + batch])

    def processed():
        proc(samples)

    from rewardzoo.core.fields import protected

    def protection():  # what the processor adds so that no reward can write over another's input
        for _ in rewards:
            for img in images:
                protected(img)

    medians, ratios = interleaved({"direct": direct, "processor": processed, "protection": protection}, repeats)
    direct_s, proc_s = medians["direct"], medians["processor"]
    return {
        "direct_s": direct_s,
        "processor_s": proc_s,
        "ratio": ratios["processor"],
        "protection_s": medians["protection"],
        "protection_ratio": medians["protection"] / direct_s,
    }


def bench_import(repeats: int) -> dict:
    codes = {"bare": "pass", "full": "import rewardzoo; rewardzoo.list_rewards()"}
    times: dict[str, list[float]] = {k: [] for k in codes}
    for _ in range(repeats + 1):  # alternate; the first round warms the file cache
        for key, code in codes.items():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times[key].append(time.perf_counter() - t0)
    bare, full = min(times["bare"][1:]), min(times["full"][1:])  # start-up noise only ever adds time
    return {"bare_python_s": bare, "import_and_list_s": full, "import_only_s": full - bare}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    o = bench_overhead(args.repeats)
    i = bench_import(args.repeats)
    print("| measurement | baseline | rewardzoo | ratio |")
    print("|---|---|---|---|")
    print(
        f"| JPEG rewards, 64 images 512x512, batch 16 | direct calls {o['direct_s'] * 1e3:.1f} ms | "
        f"processor {o['processor_s'] * 1e3:.1f} ms | {o['ratio']:.3f} |"
    )
    print(
        f"| `import rewardzoo; list_rewards()` (fresh process) | bare python {i['bare_python_s'] * 1e3:.0f} ms | "
        f"{i['import_and_list_s'] * 1e3:.0f} ms | +{i['import_only_s'] * 1e3:.0f} ms over bare |"
    )
    jpeg = ["jpeg_compressibility", "jpeg_incompressibility"]
    write_results(
        __file__,
        [
            figure(
                "processor.overhead.jpeg_rewards",
                "processor overhead: both JPEG rewards through RewardProcessor vs direct reward calls on the same "
                "batches, 64 images 512x512, batch 16",
                measure("processor", o["processor_s"] * 1e3, "ms"),
                baseline=measure("direct calls", o["direct_s"] * 1e3, "ms"),
                ratio=o["ratio"],
                ratio_label="processor / direct",
                goal="<= 1.05",
                rewards=jpeg,
                notes=f"median of {args.repeats} paired per-repetition ratios; includes the per-call protection of "
                "the inputs",
            ),
            figure(
                "processor.overhead.input_protection",
                "input protection alone: a read-only view of each of the 64 PIL images 512x512 for each of the two "
                "rewards, against the direct reward calls",
                measure("protection", o["protection_s"] * 1e3, "ms"),
                baseline=measure("direct calls", o["direct_s"] * 1e3, "ms"),
                ratio=o["protection_ratio"],
                ratio_label="protection / direct",
                rewards=jpeg,
            ),
            figure(
                "processor.import.import_and_list",
                "`import rewardzoo; rewardzoo.list_rewards()` in a fresh interpreter vs a bare interpreter start",
                measure("import + list", i["import_and_list_s"] * 1e3, "ms"),
                baseline=measure("bare python", i["bare_python_s"] * 1e3, "ms"),
                notes=f"best of {args.repeats} alternating starts",
            ),
            figure(
                "processor.import.import_only",
                "cost of `import rewardzoo; rewardzoo.list_rewards()` over a bare interpreter start",
                measure("import + list - bare", i["import_only_s"] * 1e3, "ms"),
                goal="< 300 ms",
            ),
        ],
    )


if __name__ == "__main__":
    main()
