"""One rank of the 2-process gloo test: runs every distributed scenario, pickling results as it goes.

Usage: python -m tests.execution.dist_worker RANK WORLD PORT OUTDIR
"""

from __future__ import annotations

import os
import pickle
import sys
import time
import traceback
from datetime import timedelta

import torch.distributed as dist

import rewardzoo
from rewardzoo import DistributedRewardProcessor, RewardLoader
from rewardzoo.core.distributed import rank_ordered
from rewardzoo.core.resolve import load_config

from .rewards import (
    CenteredValue,
    FailOnRank,
    SlowInit,
    dist_samples,
    dist_specs,
    path,
    rank_indices,
)


def plain(result):
    return {"rewards": result.rewards, "total": result.total, "applied": result.applied, "extras": result.extras}


def error_record(exc, start):
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "reward": getattr(exc, "reward", None),
        "rank": getattr(exc, "rank", None),
        "elapsed": time.monotonic() - start,
    }


def main() -> None:
    rank, world, port, outfile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=timedelta(seconds=20)
    )
    out: dict = {}

    def save():
        with open(outfile, "wb") as f:
            pickle.dump(out, f)

    # record what every all_gather_object sends, to check that only declared fields travel
    sent = out.setdefault("sent", [])
    original = dist.all_gather_object

    def recording(obj_list, obj, group=None):
        sent.append(obj)
        return original(obj_list, obj, group=group)

    dist.all_gather_object = recording
    mine = [dist_samples()[i] for i in rank_indices(rank)]

    # 1. synchronous cross-rank scoring
    proc = DistributedRewardProcessor(dist_specs())
    out["sync"] = plain(proc(mine))
    out["scored"] = list(CenteredValue.scored)
    out["rounds_sync"] = len(sent)
    save()

    # 2. incremental, async, two rounds on the same runner (reusable)
    aproc = DistributedRewardProcessor(dist_specs(async_reward=True))
    runner = aproc.incremental(timeout=30)
    out["async"] = []
    for _ in range(2):
        for k in range(0, len(mine), 3):
            runner.add(mine[k : k + 3])
        out["async"].append(plain(runner.finalize()))
    # a third round read with results(ordered=True) first: the rows come after the exchange
    for k in range(0, len(mine), 3):
        runner.add(mine[k : k + 3])
    out["ready_rows"] = [(index, plain(row)) for index, row in runner.results(ordered=True)]
    out["ready_final"] = plain(runner.finalize())
    runner.close()
    save()

    # 3. rank-ordered loading; train and eval share one loader: one construction per identity
    cfg = load_config(
        {
            "rewards": [{"name": "slow", "reward_model": path(SlowInit)}, "jpeg_compressibility"],
            "eval_rewards": [
                {"name": "slow_eval", "reward_model": path(SlowInit), "weight": 3.0},
                {"name": "jpeg_small", "reward_model": "jpeg_compressibility", "batch_size": 2},
            ],
        }
    )
    loader = RewardLoader()
    with rank_ordered():
        rewardzoo.build_processors(cfg, loader)
    out["built"] = list(SlowInit.built)
    out["constructions"] = loader.constructions
    save()

    # 4. a reward raising on rank 1 while scoring groups: both ranks raise at the same point
    fail = DistributedRewardProcessor([{"name": "failing", "reward_model": path(FailOnRank)}] + dist_specs()[:2])
    start = time.monotonic()
    try:
        fail(mine)
        out["fail_group"] = None
    except Exception as exc:
        out["fail_group"] = error_record(exc, start)
    save()

    # 5. bad input on rank 1 only (a missing prompt), async runner: both ranks raise at finalize
    runner = DistributedRewardProcessor(dist_specs(async_reward=True)).incremental(timeout=30)
    start = time.monotonic()
    try:
        batch = list(mine)
        if rank == 1:
            batch[0] = rewardzoo.Sample(metadata={"value": 1.0}, group_id=0, dataset="t2i")
        runner.add(batch)
        runner.finalize()
        out["fail_input"] = None
    except Exception as exc:
        out["fail_input"] = error_record(exc, start)
    save()

    # 5b. a malformed sample on rank 1 only, synchronous call: both ranks raise, none waits for the other
    start = time.monotonic()
    try:
        proc(mine if rank == 0 else [{"prompt": "x", "colour": "red"}])
        out["fail_malformed"] = None
    except Exception as exc:
        out["fail_malformed"] = error_record(exc, start)
    save()

    # 6. the processor still works after those failures (no collective left unmatched)
    out["after_failures"] = plain(proc(mine))
    save()

    # 7. rank 1 dies outside the processor; rank 0 must fail in bounded time, not hang
    if rank == 1:
        save()
        os._exit(3)
    start = time.monotonic()
    try:
        proc(mine)
        out["peer_died"] = None
    except Exception as exc:
        out["peer_died"] = error_record(exc, start)
    save()
    os._exit(0)


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        traceback.print_exc()
        os._exit(1)
