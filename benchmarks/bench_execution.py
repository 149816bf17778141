"""Execution benchmarks: async overlap with generation, and the cost of the cross-rank group exchange.

    python benchmarks/bench_execution.py            # both parts (about a minute on 2 CPU cores)
    python benchmarks/bench_execution.py overlap    # one part
    python benchmarks/bench_execution.py gather

overlap: a simulated trainer generates ROUNDS batches; a real reward (JPEG incompressibility, Pillow's
encoder) scores them. The generator's cost per batch is calibrated to the measured cost of scoring
one batch, so generation and scoring cost about the same. Two generators are simulated:
``sleep`` (a GPU sampler: the host thread waits for the device) and ``numpy`` (a single-threaded CPU
sampler doing elementwise NumPy work, which releases the GIL; it competes with the reward for cores). Sync = generate, then score, per round;
async = generate, ``runner.add``, and ``finalize`` after the last round. Ratio = async / sync wall time.

gather: 2 gloo ranks on CPU, groups of 8, a groupwise reward on images (group-centred JPEG size) and
one on metadata (group-centred value). ``local``: each group lives on one rank (only group ids and
status travel); ``split``: every group has 4 members on each rank (declared fields travel to the
owner, scores travel back); ``plain``: the single-process processor on the same local samples.

Medians of REPEATS runs after one warm-up run.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import numpy as np
from results_io import figure, measure, write_results

import rewardzoo
from rewardzoo import RewardProcessor, Sample
from rewardzoo.registry import register
from rewardzoo.rewards.base import GroupwiseReward, Inputs
from rewardzoo.rewards.image.jpeg import jpeg_kilobytes

ROUNDS, BATCH, SIZE, REPEATS = 8, 8, 512, 5


@register("bench_centered_jpeg")
class CenteredJpeg(GroupwiseReward):
    """JPEG size (kB) minus its group's mean."""

    inputs = Inputs(("image", "group_id"))

    def __call__(self, image, **_):
        kb = np.array([jpeg_kilobytes(img) for img in image])
        return kb - kb.mean()


@register("bench_centered_value")
class CenteredValue(GroupwiseReward):
    """metadata["value"] minus its group's mean."""

    inputs = Inputs(("metadata",))

    def __call__(self, metadata, **_):
        v = np.array([json.loads(m)["value"] for m in metadata])
        return v - v.mean()


def _median(fn, repeats: int = REPEATS) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _batch(rng) -> list[Sample]:
    images = rng.integers(0, 256, (BATCH, SIZE, SIZE, 3), dtype=np.uint8)
    return [Sample(image=img, prompt="p") for img in images]


def bench_overlap() -> dict:
    spec = {"name": "jpeg", "reward_model": "jpeg_incompressibility", "batch_size": BATCH}
    sync_proc = RewardProcessor([spec])
    async_proc = RewardProcessor([{**spec, "async_reward": True, "num_workers": 1}])
    rng = np.random.default_rng(0)
    batches = [_batch(rng) for _ in range(ROUNDS)]
    score_cost = _median(lambda: sync_proc(batches[0]))
    # a single-threaded CPU sampler: elementwise NumPy work on a large array (releases the GIL)
    x = np.random.default_rng(1).standard_normal(1 << 20)
    buf = np.empty_like(x)
    step_cost = _median(lambda: np.exp(x, out=buf))
    reps = max(1, round(score_cost / step_cost))

    generators = {
        "sleep": lambda: time.sleep(score_cost),
        "numpy": lambda: [np.exp(x, out=buf) for _ in range(reps)],
    }
    out = {"score_cost_s": score_cost, "rounds": ROUNDS, "batch": BATCH, "image": SIZE}
    with async_proc.incremental(timeout=120) as runner:
        for gen_name, generate in generators.items():
            gen_cost = _median(generate)

            def run_sync():
                for batch in batches:
                    generate()
                    sync_proc(batch)

            def run_async():
                for batch in batches:
                    generate()
                    runner.add(batch)
                runner.finalize()

            t_sync, t_async = _median(run_sync), _median(run_async)
            out[gen_name] = {
                "generate_cost_s": gen_cost,
                "sync_s": t_sync,
                "async_s": t_async,
                "ratio": t_async / t_sync,
            }
    # the result is the same either way
    with async_proc.incremental() as runner:
        for batch in batches:
            runner.add(batch)
        got = runner.finalize()
    want = sync_proc([s for b in batches for s in b])
    assert np.array_equal(got.rewards["jpeg"], want.rewards["jpeg"])
    return out


# ------------------------------------------------------------------------------------------- gather
GROUPS, GROUP_SIZE = 32, 8


def _gather_samples(rank: int, mode: str) -> list[Sample]:
    rng = np.random.default_rng(7)
    samples = []
    for g in range(GROUPS):
        for k in range(GROUP_SIZE):
            owner = (0 if g < GROUPS // 2 else 1) if mode == "local" else k % 2
            img = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
            if owner == rank:
                samples.append(Sample(image=img, metadata={"value": float(rng.normal())}, group_id=g))
    return samples


def _gather_worker(rank: int, port: str, out_path: str) -> None:
    import torch.distributed as dist

    from rewardzoo import DistributedRewardProcessor

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=60)
    )
    results = {}
    for reward in ("bench_centered_jpeg", "bench_centered_value"):
        specs = [{"name": "g", "reward_model": reward}]
        dproc, plain = DistributedRewardProcessor(specs), RewardProcessor(specs)
        local, split = _gather_samples(rank, "local"), _gather_samples(rank, "split")

        def timed(fn):
            dist.barrier()
            return _median(fn)

        results[reward] = {
            "plain_s": timed(lambda: plain(local)),
            "local_s": timed(lambda: dproc(local)),
            "split_s": timed(lambda: dproc(split)),
        }
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


def bench_gather() -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "gather.json")
        procs = [
            subprocess.Popen([sys.executable, __file__, "--gather-rank", str(r), port, out_path]) for r in range(2)
        ]
        for p in procs:
            p.wait(timeout=300)
        with open(out_path) as f:
            results = json.load(f)
    for r in results.values():
        r["split_over_local"] = r["split_s"] / r["local_s"]
        r["local_over_plain"] = r["local_s"] / r["plain_s"]
    return {
        "groups": GROUPS,
        "group_size": GROUP_SIZE,
        "samples_per_rank": GROUPS * GROUP_SIZE // 2,
        "image": "64x64",
        **results,
    }


GENERATORS = {
    "sleep": "a GPU sampler: the host waits for the device",
    "numpy": "a single-threaded CPU NumPy sampler competing for the cores",
}
GATHER_REWARDS = {
    "bench_centered_jpeg": "group-centred JPEG size (the images travel)",
    "bench_centered_value": "group-centred metadata value (a JSON string travels)",
}


def overlap_figures(r: dict) -> list[dict]:
    ideal = (r["rounds"] + 1) / (2 * r["rounds"])
    out = []
    for gen, what in GENERATORS.items():
        g = r[gen]
        out.append(
            figure(
                f"execution.overlap.{gen}",
                f"async overlap: {r['rounds']} rounds of {r['batch']} images {r['image']}x{r['image']}, "
                f"`jpeg_incompressibility` async with 1 worker; generator `{gen}` ({what}) costs "
                f"{g['generate_cost_s'] * 1e3:.0f} ms per batch, scoring one batch {r['score_cost_s'] * 1e3:.0f} ms",
                measure("async", g["async_s"], "s"),
                baseline=measure("sync", g["sync_s"], "s"),
                ratio=g["ratio"],
                ratio_label="async / sync",
                goal="<= 0.65" if gen == "sleep" else None,
                notes=f"ideal ratio {ideal:.2f} for {r['rounds']} rounds"
                if gen == "sleep"
                else "the generator and the reward compete for the same cores",
            )
        )
    return out


def gather_figures(r: dict) -> list[dict]:
    work = (
        f"2 gloo ranks on CPU, {r['groups']} groups of {r['group_size']} ({r['samples_per_rank']} samples per "
        f"rank, images {r['image']}), times on rank 0"
    )
    out = []
    for reward, what in GATHER_REWARDS.items():
        g, key = r[reward], reward.removeprefix("bench_centered_")
        out.append(
            figure(
                f"execution.gather.{key}.split_over_local",
                f"cross-rank group exchange, {what}: every group split 4+4 over the ranks vs every group on one rank; "
                + work,
                measure("split", g["split_s"] * 1e3, "ms"),
                baseline=measure("local", g["local_s"] * 1e3, "ms"),
                ratio=g["split_over_local"],
                ratio_label="split / local",
            )
        )
        out.append(
            figure(
                f"execution.gather.{key}.local_over_plain",
                f"DistributedRewardProcessor with all-local groups vs the single-process RewardProcessor, {what}; "
                + work,
                measure("distributed, local groups", g["local_s"] * 1e3, "ms"),
                baseline=measure("plain", g["plain_s"] * 1e3, "ms"),
                ratio=g["local_over_plain"],
                ratio_label="local / plain",
            )
        )
    return out


def main(argv: list[str]) -> None:
    if argv[:1] == ["--gather-rank"]:
        _gather_worker(int(argv[1]), argv[2], argv[3])
        return
    parts = argv or ["overlap", "gather"]
    figures = []
    print(f"rewardzoo {rewardzoo.__version__}, {os.cpu_count()} CPU cores, medians of {REPEATS} after warm-up")
    if "overlap" in parts:
        r = bench_overlap()
        print(
            f"\n[overlap] {r['rounds']} rounds x {r['batch']} images {r['image']}x{r['image']}, "
            f"scoring one batch {r['score_cost_s'] * 1e3:.0f} ms"
        )
        for gen in ("sleep", "numpy"):
            g = r[gen]
            print(
                f"  generator={gen:5s} (gen {g['generate_cost_s'] * 1e3:.0f} ms/batch): sync {g['sync_s']:.2f} s, "
                f"async {g['async_s']:.2f} s, async/sync = {g['ratio']:.2f}"
            )
        figures += overlap_figures(r)
    if "gather" in parts:
        r = bench_gather()
        print(
            f"\n[gather] 2 gloo ranks, {r['groups']} groups of {r['group_size']}, {r['samples_per_rank']} "
            f"samples per rank, images {r['image']} (times on rank 0)"
        )
        for reward in ("bench_centered_jpeg", "bench_centered_value"):
            g = r[reward]
            print(
                f"  {reward:21s}: plain {g['plain_s'] * 1e3:.1f} ms, local {g['local_s'] * 1e3:.1f} ms, "
                f"split {g['split_s'] * 1e3:.1f} ms; split/local = {g['split_over_local']:.2f}, "
                f"local/plain = {g['local_over_plain']:.2f}"
            )
        figures += gather_figures(r)
    write_results(__file__, figures, parts=[f"execution.{p}" for p in parts])


if __name__ == "__main__":
    main(sys.argv[1:])
