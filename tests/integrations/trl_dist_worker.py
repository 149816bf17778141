"""One rank of the 2-process gloo check of TRL's concurrent reward functions.

Usage: python -m tests.integrations.trl_dist_worker RANK WORLD PORT OUTFILE
Each rank holds every other completion (so every prompt's group is split across the ranks), gathers the
concurrent functions on an event-loop thread as TRL's GRPOTrainer does (TRL's own loop helper), calls the
plain functions too, and pickles both.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

import torch.distributed as dist

from ..no_extras.rewards import MetadataValue, path
from ..ranks import finish_rank, run_rank

CONFIG = {
    "rewards": [
        {"name": "rank", "reward_model": "group_rank", "kwargs": {"base": path(MetadataValue)}},
        {"name": "value", "reward_model": path(MetadataValue)},
        {"name": "norm", "reward_model": "group_normalized", "kwargs": {"base": path(MetadataValue)}},
    ]
}
PROMPTS = [p for p in ("the cat", "a dog", "one") for _ in range(4)]
VALUES = [3.0, 1.0, 2.0, 5.0, 0.5, 0.25, 4.0, 1.0, 7.0, 2.0, 6.0, 3.0]


def batch(rank: int | None = None, world: int = 2) -> dict:
    """TRL's keyword arguments for all completions, or for this rank's share."""
    idx = [i for i in range(len(PROMPTS)) if rank is None or i % world == rank]
    return {
        "prompts": [PROMPTS[i] for i in idx],
        "completions": [" ok"] * len(idx),
        "completion_ids": [[0]] * len(idx),
        "value": [VALUES[i] for i in idx],
    }


def main() -> None:
    rank, world, port, outfile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=timedelta(seconds=30)
    )
    from trl.trainer.utils import start_event_loop_in_daemon

    from rewardzoo.integrations import trl_reward_funcs

    kwargs = batch(rank, world)
    concurrent, _ = trl_reward_funcs(CONFIG, group_by="prompt", concurrent=True)
    plain, _ = trl_reward_funcs(CONFIG, group_by="prompt")
    _, loop, ready = start_event_loop_in_daemon(name="trl-loop")
    ready.wait()

    async def gather():
        return await asyncio.gather(*(f(**kwargs) for f in concurrent))

    finish_rank(
        outfile,
        {
            "concurrent": asyncio.run_coroutine_threadsafe(gather(), loop).result(timeout=60),
            "plain": [f(**kwargs) for f in plain],
        },
    )


if __name__ == "__main__":
    run_rank(main)
