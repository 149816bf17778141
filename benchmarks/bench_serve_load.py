"""Horizontal scale of ``rewardzoo serve``, measured: N clients x M requests against ``serve`` and ``serve --ray`` with
1, 2 and 4 replicas on this machine (CPU; Ray's logical CPUs), throughput and p50 / p90 / p99 latency, and the same
load against flow_grpo's reward server (gunicorn with 1, 2 and 4 sync workers, run from its snapshot: see
``anchor_servers.py``) where it can run here.

Two rewards:

- ``fixed``: a call costs ``--call-ms`` whatever its size and holds no CPU while it waits (``serve_rewards.py``: a GPU
  model below saturation, or a served judge): calls are independent, so replicas can overlap them;
- ``model``: ``laion_aesthetic`` on the tiny open_clip (CPU-bound, one torch thread per replica): the machine's cores
  bound what replicas can add.

Each request carries ``--per-request`` images 64x64 (raw, MessagePack); every server batches at most one request per
call (``--max-batch`` = the request's size, ``--max-wait-ms 0``), so the server's own batching does not blur what
the replicas add. The figures' ratios are against the 1-replica run of the same reward in the same invocation.

Run: ``python benchmarks/bench_serve_load.py [--quick] [--flow-grpo-src ... --flow-grpo-client-src ... --flask-path
...]`` (under ``flock /tmp/rewardzoo-heavy.lock``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from anchor_servers import FlowGrpoServer, flow_grpo_client, flow_grpo_missing
from bench_serve import Server, textured
from results_io import figure, measure, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COSMOS_SKIP = (
    "cosmos-rl's reward_service (nvidia-cosmos/cosmos-rl, reward_service/) needs a redis-server binary, the redis "
    "client, the cosmos_rl package (its launcher imports cosmos_rl.utils.network_util) and a CUDA VAE for its "
    "decode stage; none is installed on this CPU machine"
)


def write_configs(root: Path, call_ms: float) -> dict[str, Path]:
    import yaml

    from rewardzoo import testing as rzt

    oc = rzt.tiny_open_clip_dir(root / "tiny-open-clip", seed=0)
    head = rzt.aesthetic_head_file(root / "head.safetensors", seed=7)
    entries = {
        "fixed": {
            "name": "fixed",
            "reward_model": "serve_rewards:FixedCostPerCall",
            "kwargs": {"call_ms": call_ms},
        },
        "model": {
            "name": "aesthetic",
            "reward_model": "laion_aesthetic",
            "model_path": str(head),
            "device": "cpu",
            "kwargs": {"clip_model": str(oc)},
        },
    }
    paths = {}
    for kind, entry in entries.items():
        paths[kind] = root / f"{kind}.yaml"
        paths[kind].write_text(yaml.safe_dump({"rewards": [{**entry, "batch_size": 64}]}))
    return paths


def load(call: Callable[[int], Callable[[], Any]], clients: int, requests: int) -> dict[str, float]:
    """``clients`` threads, each making ``requests`` calls of its own ``call(c)()``; throughput and latency."""
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    fns = [call(c) for c in range(clients)]
    for fn in fns:  # one warm call per client (connections, first batch)
        fn()
    start = threading.Barrier(clients + 1)

    def run(c: int) -> None:
        start.wait()
        try:
            for _ in range(requests):
                t0 = time.perf_counter()
                fns[c]()
                with lock:
                    latencies.append(time.perf_counter() - t0)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join(timeout=600)
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    q = np.percentile(np.array(latencies) * 1e3, [50, 90, 99])
    return {"rps": len(latencies) / elapsed, "p50": q[0], "p90": q[1], "p99": q[2], "seconds": elapsed}


def rewardzoo_side(url: str, batch: list) -> Callable[[int], Callable[[], Any]]:
    from rewardzoo.serve.client import RewardClient

    def call(c: int) -> Callable[[], Any]:
        client = RewardClient(url, image_format="raw", timeout_s=300)
        return lambda: client.score(batch)

    return call


def flow_side(client_src: Path, arrays: np.ndarray) -> Callable[[int], Callable[[], Any]]:
    def call(c: int) -> Callable[[], Any]:
        fn = flow_grpo_client(client_src)  # its own requests session per client
        return lambda: fn(arrays, [""] * len(arrays), [{}] * len(arrays))

    return call


def run_target(name: str, start: Callable[[], Any], side: Callable[[Any], Any], args: argparse.Namespace) -> dict:
    server = start()
    try:
        stats = load(side(server), args.clients, args.requests)
    finally:
        server.stop()
    print(
        f"{name}: {stats['rps']:.1f} req/s, p50 {stats['p50']:.0f} ms, p90 {stats['p90']:.0f} ms, "
        f"p99 {stats['p99']:.0f} ms",
        flush=True,
    )
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (a check, not a measurement)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=0, help="requests per client (default 12; --quick 3)")
    parser.add_argument("--per-request", type=int, default=4, help="images per request")
    parser.add_argument("--call-ms", type=float, default=100.0, help="the fixed reward's cost per call")
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--kinds", default="fixed,model")
    parser.add_argument("--flow-grpo-src", type=Path, help="a yifan123/reward-server snapshot (flow_grpo's server)")
    parser.add_argument("--flow-grpo-client-src", type=Path, help="a yifan123/flow_grpo snapshot (its client)")
    parser.add_argument("--flask-path", type=Path, help="a folder holding flask and gunicorn (pip install --target)")
    args = parser.parse_args()
    args.requests = args.requests or (3 if args.quick else 12)
    if args.flask_path:
        sys.path.append(str(args.flask_path))
    import rewardzoo

    images = textured(args.per_request, 64, seed=1)
    batch = [rewardzoo.Sample(image=img) for img in images]
    arrays = np.stack([np.asarray(img) for img in images])
    replicas = [int(r) for r in args.replicas.split(",")]
    skip = flow_grpo_missing(args.flow_grpo_src, args.flow_grpo_client_src, args.flask_path)
    serve_args = ["--max-batch", str(args.per_request), "--max-wait-ms", "0"]
    figs, table = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        configs = write_configs(Path(tmp), args.call_ms)
        for kind in args.kinds.split(","):
            config = configs[kind]
            rows: dict[str, dict[str, float]] = {}
            rows["serve"] = run_target(
                f"{kind} serve", lambda: Server(config, *serve_args), lambda s: rewardzoo_side(s.url, batch), args
            )
            for n in replicas:
                ray_args = [*serve_args, "--ray", "--replicas", str(n), "--cpus-per-replica", f"{2 / max(replicas):g}"]
                rows[f"ray{n}"] = run_target(
                    f"{kind} serve --ray --replicas {n}",
                    lambda ray_args=ray_args: Server(config, *ray_args),
                    lambda s: rewardzoo_side(s.url, batch),
                    args,
                )
            if skip is None:
                for n in replicas:
                    rows[f"flow_grpo{n}"] = run_target(
                        f"{kind} flow_grpo reward server, {n} gunicorn worker(s)",
                        lambda n=n: FlowGrpoServer(args.flow_grpo_src, config, args.flask_path, workers=n),
                        lambda s: flow_side(args.flow_grpo_client_src, arrays),
                        args,
                    )
            table[kind] = rows
            figs += figures(kind, rows, replicas, args, skip)
    figs.append(
        figure(
            "serve.load.cosmos_rl",
            "the same load against cosmos-rl's reward_service (enqueue then pull over Redis)",
            measure("cosmos-rl reward_service", 0, "req/s"),
            notes=f"skipped: {COSMOS_SKIP}",
        )
    )
    print(write_results(__file__, figs, parts=None if not args.quick else ["serve.load."]))


def what(kind: str, args: argparse.Namespace) -> str:
    reward = (
        f"a reward whose call costs {args.call_ms:g} ms and holds no CPU (independent calls)"
        if kind == "fixed"
        else "`laion_aesthetic` on the tiny open_clip (CPU-bound, one torch thread per replica)"
    )
    return (
        f"{args.clients} clients x {args.requests} requests of {args.per_request} images 64x64 (raw), {reward}, "
        f"on this {os.cpu_count()}-core machine"
    )


def figures(
    kind: str, rows: dict[str, dict[str, float]], replicas: list[int], args: argparse.Namespace, skip: str | None
) -> list[dict]:
    out = []

    def latency(stats: dict[str, float]) -> str:
        return f"p50 {stats['p50']:.0f} ms, p90 {stats['p90']:.0f} ms, p99 {stats['p99']:.0f} ms"

    one = rows["ray1"]
    out.append(
        figure(
            f"serve.load.{kind}.serve",
            f"{what(kind, args)}: `serve` (uvicorn, one process) vs `serve --ray` with 1 replica",
            measure("serve", rows["serve"]["rps"], "req/s"),
            baseline=measure("serve --ray, 1 replica", one["rps"], "req/s"),
            ratio=rows["serve"]["rps"] / one["rps"],
            ratio_label="x the throughput",
            rewards=["remote"],
            notes=f"serve: {latency(rows['serve'])}; ray 1 replica: {latency(one)}",
        )
    )
    for n in replicas[1:]:
        stats = rows[f"ray{n}"]
        out.append(
            figure(
                f"serve.load.{kind}.ray{n}",
                f"{what(kind, args)}: `serve --ray --replicas {n}` vs 1 replica",
                measure(f"{n} replicas", stats["rps"], "req/s"),
                baseline=measure("1 replica", one["rps"], "req/s"),
                ratio=stats["rps"] / one["rps"],
                ratio_label="x the throughput",
                goal=">= 3x" if kind == "fixed" and n == 4 else None,
                rewards=["remote"],
                notes=f"{n} replicas: {latency(stats)}; 1 replica: {latency(one)}",
            )
        )
    if skip is not None:
        out.append(
            figure(
                f"serve.load.{kind}.flow_grpo",
                f"{what(kind, args)}: flow_grpo's reward server",
                measure("flow_grpo reward server", 0, "req/s"),
                notes=f"skipped: {skip}",
            )
        )
        return out
    theirs = rows[f"flow_grpo{replicas[0]}"]
    out.append(
        figure(
            f"serve.load.{kind}.serve_vs_flow_grpo",
            f"{what(kind, args)}: `serve` (uvicorn, one process) vs flow_grpo's reward server with {replicas[0]} "
            "gunicorn sync worker(s) (its app_deqa from its snapshot, the same reward; its own client: JPEG + pickle)",
            measure("rewardzoo serve", rows["serve"]["rps"], "req/s"),
            baseline=measure(f"flow_grpo, {replicas[0]} worker(s)", theirs["rps"], "req/s"),
            ratio=rows["serve"]["rps"] / theirs["rps"],
            ratio_label="x the throughput",
            rewards=["remote"],
            notes=f"rewardzoo: {latency(rows['serve'])}; flow_grpo: {latency(theirs)}",
        )
    )
    for n in replicas:
        theirs, ours = rows[f"flow_grpo{n}"], rows[f"ray{n}"]
        out.append(
            figure(
                f"serve.load.{kind}.vs_flow_grpo{n}",
                f"{what(kind, args)}: `serve --ray --replicas {n}` vs flow_grpo's reward server with {n} gunicorn "
                "sync worker(s) (its app_deqa from its snapshot, the same reward; its own client: JPEG + pickle)",
                measure(f"rewardzoo, {n} replica(s)", ours["rps"], "req/s"),
                baseline=measure(f"flow_grpo, {n} worker(s)", theirs["rps"], "req/s"),
                ratio=ours["rps"] / theirs["rps"],
                ratio_label="x the throughput",
                rewards=["remote"],
                notes=f"rewardzoo: {latency(ours)}; flow_grpo: {latency(theirs)}",
            )
        )
    return out


if __name__ == "__main__":
    main()
