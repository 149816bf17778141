"""Worker benchmarks: what scoring in a worker process of another environment costs against scoring in process.

- roundtrip: 32 images 512x512 (PIL, as a trainer hands them over) scored by ``laion_aesthetic`` on the tiny
  random open_clip of ``rewardzoo.testing`` in a worker of a built environment (a venv with
  ``system_site_packages``, so the same torch) against the same entry in process; with shared memory (the
  default on one host) and socket-only (``shared_memory: false``: the pixels travel in the frames). The tiny model
  makes the overhead look large: a real ViT-L/14 costs ~100x more per image while the transfer costs the same.
  Both sides use one torch thread.
- startup: a worker's start-up (process start, imports, model build, ready to score) against loading the same
  entry in process in a fresh interpreter (``python -c`` importing rewardzoo and loading it).
- restart: the call that finds its worker killed (SIGKILL): restart, rebuild, retried call, against a worker's
  start-up plus a normal call (a restart should cost no more than that).

Run: ``python benchmarks/bench_workers.py [--quick]`` (figures are ratios from interleaved runs).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from results_io import figure, measure, print_figures, write_results
from timing import interleaved

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENVIRONMENT = {"requirements": ["pyyaml"], "system_site_packages": True, "start_timeout_s": 300}


def textured(n: int, size: int, seed: int = 0) -> list:
    """Smooth random textures plus a little noise (as bench_serve.py)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = rng.integers(0, 256, (size // 16 + 1, size // 16 + 1, 3)).repeat(16, 0).repeat(16, 1)[:size, :size]
        out.append(Image.fromarray(np.clip(base + rng.integers(-8, 9, (size, size, 3)), 0, 255).astype(np.uint8)))
    return out


def entry(root: Path, name: str, environment: dict | None) -> dict:
    from rewardzoo import testing as rzt

    oc = rzt.tiny_open_clip_dir(root / "tiny-open-clip", seed=0)
    head = rzt.aesthetic_head_file(root / "head.safetensors", seed=7)
    out = {
        "name": name,
        "reward_model": "laion_aesthetic",
        "model_path": str(head),
        "device": "cpu",
        "batch_size": 64,
        "kwargs": {"clip_model": str(oc)},
    }
    if environment is not None:
        out["environment"] = environment
    return out


def bench_roundtrip(root: Path, repeats: int) -> list[dict]:
    import rewardzoo
    from rewardzoo.core.processor import RewardProcessor

    samples = [rewardzoo.Sample(image=img) for img in textured(32, 512)]
    local = RewardProcessor([entry(root, "local", None)])
    shared = RewardProcessor([entry(root, "worker", ENVIRONMENT)])
    socket_only = RewardProcessor([entry(root, "worker", {**ENVIRONMENT, "shared_memory": False})])
    try:
        want = local(samples).total
        np.testing.assert_allclose(shared(samples).total, want, rtol=1e-6)
        np.testing.assert_allclose(socket_only(samples).total, want, rtol=1e-6)
        assert shared.rewards["worker"].worker._shared is not None
        assert socket_only.rewards["worker"].worker._shared is None
        times, ratios = interleaved(
            {"local": lambda: local(samples), "shm": lambda: shared(samples), "socket": lambda: socket_only(samples)},
            repeats=repeats,
        )
    finally:
        shared.close()
        socket_only.close()
    figs = []
    for path, label in (("shm", "shared memory"), ("socket", "socket only")):
        figs.append(
            figure(
                f"workers.roundtrip.{path}",
                f"`laion_aesthetic` (tiny open_clip): 32 images 512x512 through a worker of another environment "
                f"({label}) vs the same entry in process (median of {repeats} paired ratios)",
                measure(f"worker ({label})", times[path] * 1e3, "ms"),
                baseline=measure("in process", times["local"] * 1e3, "ms"),
                ratio=ratios[path],
                ratio_label="worker / in process",
                goal="<= 1.2x" if path == "shm" else "<= 3x",
            )
        )
    return figs


def bench_startup(root: Path, repeats: int) -> list[dict]:
    import json

    from rewardzoo.core.loader import RewardLoader

    script = (
        "import json, sys; from rewardzoo.core.loader import RewardLoader; "
        f"RewardLoader().load(json.loads({json.dumps(json.dumps(entry(root, 'local', None)))}))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cold, started = [], []
    for _ in range(repeats):  # interleaved by hand: a fresh interpreter each side
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", script], check=True, env=env)
        cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        reward = RewardLoader().load(entry(root, "worker", ENVIRONMENT))
        started.append(time.perf_counter() - t0)
        reward.close()
    c, s = statistics.median(cold), statistics.median(started)
    return [
        figure(
            "workers.startup",
            f"worker start-up (process, imports, `laion_aesthetic` tiny open_clip built, ready) vs loading the "
            f"entry in process in a fresh interpreter (median of {repeats})",
            measure("worker start-up", s, "s"),
            baseline=measure("in-process load, cold", c, "s"),
            ratio=s / c,
            ratio_label="worker / in process",
            goal="<= 1.5x",
        )
    ]


def bench_restart(root: Path, repeats: int, startup_s: float) -> list[dict]:
    import rewardzoo
    from rewardzoo.core.processor import RewardProcessor

    samples = [rewardzoo.Sample(image=img) for img in textured(32, 512, seed=3)]
    processor = RewardProcessor([entry(root, "worker", {**ENVIRONMENT, "max_restarts": repeats})])
    worker = processor.rewards["worker"].worker
    normal, restarted = [], []
    try:
        processor(samples)
        for _ in range(repeats):
            t0 = time.perf_counter()
            processor(samples)
            normal.append(time.perf_counter() - t0)
            os.kill(worker.pid, signal.SIGKILL)
            time.sleep(0.2)
            t0 = time.perf_counter()
            processor(samples)
            restarted.append(time.perf_counter() - t0)
        assert worker.restarts == repeats
    finally:
        processor.close()
    n, r = statistics.median(normal), statistics.median(restarted)
    return [
        figure(
            "workers.restart",
            f"a call that finds its worker SIGKILLed (restart, model rebuilt, call retried) vs a worker's "
            f"start-up plus a normal call, 32 images 512x512, `laion_aesthetic` tiny open_clip (median of "
            f"{repeats}; a normal call alone: {n * 1e3:.0f} ms)",
            measure("restart + retried call", r, "s"),
            baseline=measure("start-up + a call", startup_s + n, "s"),
            ratio=r / (startup_s + n),
            ratio_label="restart / (start-up + call)",
            goal="<= 1.2x",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a check, not a measurement)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"  # the workers too
    repeats = 3 if args.quick else 11
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ.setdefault("REWARDZOO_ENVS", str(root / "envs"))
        from rewardzoo.environments.venvs import interpreter
        from rewardzoo.spec.config import parse_environment

        interpreter(parse_environment(ENVIRONMENT))  # built once, before anything is timed
        figs = bench_roundtrip(root, repeats)
        figs += bench_startup(root, 3)
        startup_s = figs[-1]["value"]["value"]
        figs += bench_restart(root, 3 if args.quick else 5, startup_s)
    print_figures(figs)
    print(write_results(__file__, figs))


if __name__ == "__main__":
    main()
