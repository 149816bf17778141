"""One rank of the 2-process gloo check of the groupwise wrappers.

Usage: python -m tests.group.dist_worker RANK WORLD PORT OUTFILE
Scores this rank's share of ``dist_batch()`` (groups split across the ranks) and pickles the result
and the number of base evaluations made on this rank.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from datetime import timedelta

import torch.distributed as dist

from .rewards import meta_samples

#: (group_id, score): groups of 5, 1, 3, 8 and 2 with ties, listed in an interleaved order
ITEMS = [
    (0, 3.0),
    (1, 7.0),
    (3, 1.0),
    (0, 1.0),
    (2, 2.0),
    (3, 4.0),
    (0, 3.0),
    (4, 0.5),
    (3, 1.0),
    (2, 2.0),
    ("x", 9.0),
    (3, 6.0),
    (0, 5.0),
    (3, 0.0),
    (4, 0.25),
    (2, 8.0),
    (3, 2.5),
    (0, 2.0),
    (3, 4.0),
    ("x", 1.0),
]
SPECS = [
    {"name": "base", "reward_model": "group_test_meta"},
    {"name": "rank", "reward_model": "group_rank", "kwargs": {"base": "group_test_meta"}},
    {"name": "win_hard", "reward_model": "pairwise_winrate", "kwargs": {"base": "group_test_meta"}},
    {
        "name": "win_soft",
        "reward_model": "pairwise_winrate",
        "kwargs": {"base": "group_test_meta", "mode": "soft", "temperature": 2.0},
    },
    {"name": "norm", "reward_model": "group_normalized", "kwargs": {"base": "group_test_meta", "ddof": 1, "eps": 1e-8}},
    {"name": "judge", "reward_model": "pairwise_winrate", "kwargs": {"judge": "tests.group.judges:MetaJudge"}},
]


def rank_indices(rank: int, world: int = 2) -> list[int]:
    return [i for i in range(len(ITEMS)) if i % world == rank]


def main() -> None:
    rank, world, port, outfile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=timedelta(seconds=30)
    )
    from rewardzoo.core.distributed import DistributedRewardProcessor

    proc = DistributedRewardProcessor(SPECS)
    samples = meta_samples(ITEMS)
    result = proc([samples[i] for i in rank_indices(rank, world)])
    base = proc.rewards["base"]
    out = {
        "rewards": result.rewards,
        "total": result.total,
        "pref_grpo": result.advantages("pref_grpo"),  # renormalised over both ranks' samples (an all-gather)
        "base_inputs": sum(base.calls),
        "judge_pairs": len(proc.rewards["judge"].judge.pairs),
    }
    with open(outfile, "wb") as f:
        pickle.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        traceback.print_exc()
        os._exit(1)
