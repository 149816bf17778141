#!/usr/bin/env python
"""Padded-batch scoring vs a per-sequence loop for the sequence reward models (same run, same weights).

palm-rlhf-pytorch cannot pad (negative-id padding crashes), so its users score variable-length sequences one
at a time; rewardzoo pads and masks. This prints the median wall time of each way and their ratio, for
SequenceRewardModel (scalar head) and ImplicitPRM (policy + reference), and checks the two ways agree.

    python benchmarks/bench_text.py [--device auto] [--batch 16] [--repeats 7] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from results_io import figure, measure, write_results

from rewardzoo.rewards.models.text.backbones import HFBackbone
from rewardzoo.rewards.text.implicit_prm import ImplicitPRM
from rewardzoo.rewards.text.sequence_reward import SequenceRewardModel
from rewardzoo.shared.device import resolve_device


def timed_pair(first, second, device: str, repeats: int) -> tuple[float, float]:
    """Median seconds of ``first`` and ``second``, run alternately so background load hits both alike."""

    def once(fn) -> float:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - start

    first(), second()  # warm-up
    a, b = [], []
    for _ in range(repeats):
        a.append(once(first))
        b.append(once(second))
    return statistics.median(a), statistics.median(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--min-len", type=int, default=16)
    parser.add_argument("--max-len", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    from transformers import GPT2LMHeadModel

    from rewardzoo.testing import gpt2_config

    torch.manual_seed(0)
    config = gpt2_config(
        vocab_size=4096,
        n_positions=args.max_len,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=None,
        n_embd=args.dim,
        n_layer=args.layers,
        n_head=max(args.dim // 64, 1),
    )
    lm = GPT2LMHeadModel(config).eval()
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(args.min_len, args.max_len + 1, (args.batch,), generator=gen).tolist()
    seqs = [torch.randint(0, config.vocab_size, (n,), generator=gen) for n in lengths]
    n = max(lengths)
    ids = torch.zeros(args.batch, n, dtype=torch.long)
    mask = torch.zeros(args.batch, n, dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, : len(s)], mask[i, : len(s)] = s, True
    ids, mask = ids.to(device), mask.to(device)
    singles = [s[None].to(device) for s in seqs]
    print(
        f"device {device}, torch threads {torch.get_num_threads()}, GPT-2 {args.layers}x{args.dim}, "
        f"batch {args.batch}, lengths {min(lengths)}-{max(lengths)} (mean {sum(lengths) / len(lengths):.0f}), "
        f"median of {args.repeats} alternating runs after warm-up"
    )

    rm = SequenceRewardModel(HFBackbone(lm)).to(device)
    prm = ImplicitPRM(HFBackbone(lm), HFBackbone(GPT2LMHeadModel(config).eval())).to(device).eval()
    cases = {
        "SequenceRewardModel": (
            lambda: rm.score(ids, mask).rewards,
            lambda: torch.cat([rm.score(s).rewards for s in singles]),
        ),
        "ImplicitPRM outcome": (
            lambda: prm.outcome_reward(ids, mask),
            lambda: torch.cat([prm.outcome_reward(s) for s in singles]),
        ),
    }
    keys = {
        "SequenceRewardModel": ("sequence_reward", "`SequenceRewardModel` (scalar head, `sequence_reward`)"),
        "ImplicitPRM outcome": ("implicit_prm", "`ImplicitPRM` outcome reward (policy + reference, `implicit_prm`)"),
    }
    pad = 1 - sum(lengths) / (args.batch * n)
    work = (
        f"{args.batch} sequences of {min(lengths)}-{max(lengths)} tokens ({pad:.0%} of the padded batch is "
        f"padding), random-init GPT-2 {args.layers}x{args.dim}, vocabulary {config.vocab_size}, device {device}, "
        f"{torch.get_num_threads()} torch thread(s), median of {args.repeats} alternating runs"
    )
    figures = []
    with torch.no_grad():
        for name, (batched, loop) in cases.items():
            diff = (batched() - loop()).abs().max().item()
            t_batch, t_loop = timed_pair(batched, loop, device, args.repeats)
            print(
                f"{name:22s} padded batch {t_batch * 1e3:8.1f} ms | per-sequence loop {t_loop * 1e3:8.1f} ms | "
                f"speed-up x{t_loop / t_batch:5.2f} | max |diff| {diff:.1e}"
            )
            reward, what = keys[name]
            figures.append(
                figure(
                    f"text.{reward}.padded_vs_loop",
                    f"{what}: one padded batch vs a per-sequence loop; " + work,
                    measure("padded batch", t_batch * 1e3, "ms"),
                    baseline=measure("per-sequence loop", t_loop * 1e3, "ms"),
                    ratio=t_loop / t_batch,
                    ratio_label="x speed-up (loop / padded)",
                    rewards=[reward],
                )
            )
            figures.append(
                figure(
                    f"text.{reward}.max_diff",
                    f"{what}: max |difference| between the padded batch and the per-sequence loop; " + work,
                    measure("difference", diff, ""),
                    rewards=[reward],
                )
            )
    write_results(__file__, figures)


if __name__ == "__main__":
    main()
