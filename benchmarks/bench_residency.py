"""Residency on the CPU (issue 38): a ``drop`` reward's weights leave the process; waking beats a cold load;
``offload: cpu`` costs nothing on a CPU-only machine.

The reward: ``sequence_reward`` over a random-init GPT-2 classifier of ~250 MB (float32), saved with
``save_pretrained`` (safetensors) and loaded through the loader as a user would.

1. RSS after ``processor.sleep()`` with ``offload: drop``: the fall in resident memory over the parameter bytes
   (goal >= 0.9).
2. Wake from ``drop`` (re-read from the reward's own checkpoint files) against a cold load of the same entry (new
   loader: build + read the checkpoint), each followed by a read of every memory page of every weight (either side
   may map its file lazily), interleaved; goal <= 0.3x, met while a wake mapped the file (0.14x). Since issue 49
   a wake copies the weights into private memory and checks them (no write to the file reaches a woken model),
   while transformers' cold load still maps the file: the wake now costs that copy (~3x a cold load here).
3. A reward phase (one call on 8 samples) with ``offload: cpu`` against ``offload: none``, interleaved; goal <= 1.05x.

Run: python benchmarks/bench_residency.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path

from results_io import figure, measure, write_results
from timing import interleaved

SAMPLES = [{"prompt": "the cat sat", "completion": "on the mat and the dog ran"} for _ in range(8)]


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _touch(processor) -> float:
    """Read one value from every memory page of every weight: either side may map its checkpoint lazily, so both
    pay here for bringing every page in; the read itself is as light as possible (summing every value would add
    the same arithmetic to both sides and hide the difference in loading)."""
    residency = processor.loader.residency
    total = 0.0
    for reward in processor.rewards.values():
        for t in residency.tensors(reward):
            flat = t.data.reshape(-1)
            total += float(flat[:: max(1, 4096 // flat.element_size())].sum())
    return total


def _build(root: Path) -> str:
    import torch
    from transformers import GPT2ForSequenceClassification

    from rewardzoo.testing.text import gpt2_config, word_tokenizer

    torch.manual_seed(0)
    model = GPT2ForSequenceClassification(gpt2_config(n_embd=1024, n_layer=5, n_head=8, num_labels=1))
    path = root / "rm"
    model.save_pretrained(path)
    word_tokenizer().save_pretrained(path)
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    import torch

    from rewardzoo import RewardLoader, RewardProcessor

    torch.set_num_threads(1)  # both sides alike; on the shared 2-core machine OpenMP spin-waits dominate the spread

    with tempfile.TemporaryDirectory() as root:
        path = _build(Path(root))
        entry = {"name": "rm", "reward_model": "sequence_reward", "model_path": path, "device": "cpu"}
        gc.collect()

        drop = RewardProcessor([{**entry, "offload": "drop"}], RewardLoader())
        with drop.awake():
            drop(SAMPLES)
            param_bytes = drop.loader.residency.weight_bytes(drop.rewards["rm"])
            gc.collect()
            awake = _rss()
        gc.collect()
        asleep = _rss()
        freed = (awake - asleep) / param_bytes

        def cold() -> float:
            gc.collect()
            start = time.perf_counter()
            _touch(RewardProcessor([entry], RewardLoader()))
            return time.perf_counter() - start

        def wake() -> float:
            drop.sleep()
            gc.collect()
            start = time.perf_counter()
            drop.wake()
            _touch(drop)
            return time.perf_counter() - start

        cold()  # warm-up: imports, the page cache
        wakes, colds = [], []
        for r in range(args.repeats):  # round-robin, the first side alternating: load drift hits both alike
            for side in (wake, cold) if r % 2 else (cold, wake):
                (wakes if side is wake else colds).append(side())
        wake_s, cold_s = statistics.median(wakes), statistics.median(colds)
        wake_ratio = statistics.median(w / c for w, c in zip(wakes, colds))
        drop.close()

        none = RewardProcessor([entry], RewardLoader())
        cpu = RewardProcessor([{**entry, "offload": "cpu"}], RewardLoader())
        phase, ratios = interleaved({"none": lambda: none(SAMPLES), "cpu": lambda: cpu(SAMPLES)}, args.repeats)

    mb = param_bytes / 2**20
    figures = [
        figure(
            "residency.drop.rss",
            f"RSS freed by sleep() with offload: drop, sequence_reward {mb:.0f} MB float32",
            measure("RSS freed", (awake - asleep) / 2**20, "MB"),
            baseline=measure("parameter bytes", mb, "MB"),
            ratio=freed,
            ratio_label="freed / parameter bytes",
            goal=">= 0.9",
            rewards=["sequence_reward"],
        ),
        figure(
            "residency.drop.wake",
            f"wake from offload: drop vs a cold load, sequence_reward {mb:.0f} MB",
            measure("drop wake", wake_s * 1e3, "ms"),
            baseline=measure("cold load", cold_s * 1e3, "ms"),
            ratio=wake_ratio,
            ratio_label="wake / cold load (median per repetition)",
            goal="<= 0.3",
            rewards=["sequence_reward"],
        ),
        figure(
            "residency.cpu.phase",
            f"reward phase (8 samples) with offload: cpu vs none on the CPU, {mb:.0f} MB",
            measure("offload: cpu", phase["cpu"] * 1e3, "ms"),
            baseline=measure("offload: none", phase["none"] * 1e3, "ms"),
            ratio=ratios["cpu"],
            ratio_label="cpu / none (median per repetition)",
            goal="<= 1.05",
            rewards=["sequence_reward"],
        ),
    ]
    for f in figures:
        print(f["id"], f["value"], f["baseline"], f["ratio"])
    write_results(__file__, figures)


if __name__ == "__main__":
    main()
