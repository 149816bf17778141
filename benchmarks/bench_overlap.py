"""Overlap inside one processor call: a served reward's requests stay in flight while a local stream scores.

- remote: one processor call over 160 prompted images 512x512 with two entries: a ``remote`` reward whose
  server spends 300 ms per call on the prompts (``serve_rewards:FixedCostText``, one request) and the local
  ``jpeg_compressibility`` on the images (of similar cost on this machine, measured alone too). The processor
  call (the remote entry on its own thread, the local one on the caller's) against the same processor's entries
  scored one after the other (``rewardzoo.core.engine.score_specs(..., overlap=False)``, what a processor call did
  before), interleaved, identical scores checked.
- async: the same for two ``async_reward: true`` entries on the CPU (one per thread; the CUDA side streams are
  checked by ``scripts/gpu_check_overlap.py`` on a machine with a GPU): ``jpeg_compressibility`` and the
  ``remote`` entry marked async, which is the same mechanism keyed on the entry instead of the reward.

Run: ``python benchmarks/bench_overlap.py [--quick]`` (figures are ratios from interleaved runs).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_serve import Server, textured
from results_io import figure, measure, print_figures, write_results
from timing import interleaved

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVER_MS = 300.0


def one_by_one(proc, samples):
    """The processor's result with its entries scored in turn on this thread (no overlap)."""
    from rewardzoo.core.engine import ConversionCache, ScoreTable, score_specs

    table = ScoreTable(proc.specs, samples, proc.advantage)
    score_specs(proc.specs, proc.rewards, table, ConversionCache(samples), overlap=False)
    return table.result()


def bench_call(url: str, samples: list, repeats: int, *, async_entries: bool) -> dict:
    import rewardzoo

    extra = {"async_reward": True} if async_entries else {}
    proc = rewardzoo.RewardProcessor(
        [
            {
                "name": "served",
                "reward_model": "remote",
                "batch_size": len(samples),
                **extra,
                "kwargs": {"url": url, "rewards": ["judge"]},
            },
            {"name": "jpeg", "reward_model": "jpeg_compressibility", "batch_size": len(samples), **extra},
        ]
    )
    overlapped, in_turn = proc(samples), one_by_one(proc, samples)
    for name in proc.rewards:
        np.testing.assert_array_equal(overlapped.rewards[name], in_turn.rewards[name], err_msg=name)
    local_only = rewardzoo.RewardProcessor([proc.specs[1]])
    med, ratios = interleaved(
        {
            "one by one": lambda: one_by_one(proc, samples),
            "overlapped": lambda: proc(samples),
            "local alone": lambda: local_only(samples),
        },
        repeats,
    )
    kind = "async" if async_entries else "remote"
    what = (
        "two `async_reward: true` entries on the CPU"
        if async_entries
        else "a `remote` entry (io-bound) and a local entry"
    )
    return figure(
        f"overlap.{kind}",
        f"one processor call of 160 prompted images 512x512: {what}: a served reward "
        f"whose server spends {SERVER_MS:.0f} ms per call + `jpeg_compressibility` (alone: "
        f"{med['local alone'] * 1e3:.0f} ms), overlapped vs scored one after the other (median of {repeats} "
        "paired ratios)",
        measure("overlapped", med["overlapped"] * 1e3, "ms"),
        baseline=measure("one by one", med["one by one"] * 1e3, "ms"),
        ratio=ratios["overlapped"],
        ratio_label="overlapped / one by one",
        goal="<= 0.6x",
        rewards=["remote"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a check, not a measurement)")
    args = parser.parse_args()
    import yaml

    import rewardzoo

    repeats = 3 if args.quick else 11
    samples = [rewardzoo.Sample(prompt="p" * (i % 9 + 1), image=img) for i, img in enumerate(textured(160, 512))]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "judge.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "rewards": [
                        {
                            "name": "judge",
                            "reward_model": "serve_rewards:FixedCostText",
                            "batch_size": 256,
                            "kwargs": {"call_ms": SERVER_MS},
                        }
                    ]
                }
            )
        )
        server = Server(config, "--max-wait-ms", "2")
        try:
            figs = [bench_call(server.url, samples, repeats, async_entries=flag) for flag in (False, True)]
        finally:
            server.stop()
    print_figures(figs)
    print(write_results(__file__, figs))


if __name__ == "__main__":
    main()
