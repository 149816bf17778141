"""Offline scoring on Ray Data (``rewardzoo score --engine ray``) against the local command.

N PNG images 512x512 (generated once into a temp dir) scored with both JPEG-size rewards:

1. ``--engine ray --actors 2`` vs ``rewardzoo score`` in one process (goal >= 1.6x; 2x is the ideal on 2 cores);
2. ``--engine ray --actors 1`` vs local: the engine's overhead (goal <= 1.25x);
3. the fixed start-up cost of the local Ray instance (a one-row manifest through ``--engine ray``, minus local).

Every run is a fresh ``rewardzoo score`` process, timed end to end (wall clock); the Ray runs include
starting the local Ray instance. The outputs of all runs are checked to be byte-identical.

Run: python benchmarks/bench_ray.py [--n 2000] [--chunk-size 50]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image
from results_io import figure, measure, write_results

ROOT = Path(__file__).resolve().parents[1]
REWARDS = ["jpeg_compressibility", "jpeg_incompressibility"]


def _make(folder: Path, n: int, size: int = 512) -> Path:
    rng = np.random.default_rng(0)
    base = rng.random((size, size, 3))
    lines = []
    for i in range(n):
        img = np.clip(base * (0.5 + 0.5 * i / n) + 0.05 * rng.random((size, size, 3)), 0, 1)
        Image.fromarray((img * 255).astype(np.uint8)).save(folder / f"{i}.png", compress_level=1)
        lines.append(json.dumps({"image": f"{i}.png"}))
    (folder / "m.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "m.jsonl"


def _run(config: Path, manifest: Path, out: Path, chunk: int, *extra: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rewardzoo.cli", "score", str(config), "-i", str(manifest), "-o", str(out),
                    "-q", "--chunk-size", str(chunk), *extra], check=True, cwd=ROOT, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--chunk-size", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        manifest = _make(folder, args.n)
        print(f"generated {args.n} PNGs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        config = folder / "cfg.yaml"
        config.write_text("rewards:\n" + "".join(f"  - name: {r}\n    batch_size: 16\n" for r in REWARDS))
        one = folder / "one.jsonl"
        one.write_text(manifest.read_text().splitlines()[0] + "\n")
        c = args.chunk_size
        local = _run(config, manifest, folder / "local.jsonl", c)
        ray2 = _run(config, manifest, folder / "ray2.jsonl", c, "--engine", "ray", "--actors", "2")
        ray1 = _run(config, manifest, folder / "ray1.jsonl", c, "--engine", "ray", "--actors", "1")
        start_local = _run(config, one, folder / "one_local.jsonl", c)
        start_ray = _run(config, one, folder / "one_ray.jsonl", c, "--engine", "ray")
        ref = (folder / "local.jsonl").read_bytes()
        assert (folder / "ray2.jsonl").read_bytes() == ref and (folder / "ray1.jsonl").read_bytes() == ref
    startup = start_ray - start_local
    print(f"local {local:.1f} s | ray x2 {ray2:.1f} s | ray x1 {ray1:.1f} s | ray start-up {startup:.1f} s",
          file=sys.stderr)
    work = f"{args.n} PNG images 512x512, both JPEG rewards, chunk {c}"
    steady2, steady1 = ray2 - startup, ray1 - startup
    write_results(__file__, [
        figure("ray.speedup.actors2", f"`--engine ray --actors 2` vs `rewardzoo score` in one process, {work}",
               measure("ray, 2 actors", ray2, "s"), baseline=measure("local", local, "s"), ratio=local / ray2,
               ratio_label="x faster", goal=">= 1.6x", rewards=REWARDS,
               notes=f"end to end, Ray start-up included; without it {local / steady2:.2f}x; 2 CPU cores"),
        figure("ray.overhead.actors1", f"`--engine ray --actors 1` vs `rewardzoo score` in one process, {work}",
               measure("ray, 1 actor", ray1, "s"), baseline=measure("local", local, "s"), ratio=ray1 / local,
               ratio_label="ray / local", goal="<= 1.25", rewards=REWARDS,
               notes=f"end to end, Ray start-up included; without it {steady1 / local:.2f}"),
        figure("ray.startup.local_instance",
               "fixed cost of `--engine ray` over local on a one-row manifest (local Ray start, actor pool, shutdown)",
               measure("start-up", startup, "s"), baseline=measure("local, one row", start_local, "s"), rewards=[]),
    ])


if __name__ == "__main__":
    main()
