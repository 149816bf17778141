"""Offline scoring on Ray Data (``rewardzoo score --engine ray``) against the local command.

N PNG images 512x512 (generated once into a temp dir), two CPU-bound workloads: both JPEG-size rewards, and
``clip_score`` on a tiny random-init open_clip model (``rewardzoo.testing.tiny_open_clip_dir``, saved to the temp
dir; image decoding and preprocessing dominate, as for a real model's CPU share). Per workload:

1. ``--engine ray --actors 2`` vs ``rewardzoo score`` in one process (goal >= 1.6x; the ideal on 2 cores is 2x
   less the share of the driver, the raylet and Ray Data's executor, which run on the same two cores);
2. ``--engine ray --actors 1 --cpus-per-actor <all cores>`` vs local: the engine's own overhead (goal <= 1.25x); the
   one actor gets the cores the local process has (Ray sets an actor's torch threads from its CPUs);

and 3. the fixed start-up cost of the local Ray instance: a one-row manifest through ``--engine ray`` minus the
same through the local command, with its phases (``import ray``, ``ray.init``, the first Ray Data run with the
actor pool, ``ray.shutdown``) timed inside one process.

Every run is a fresh ``rewardzoo score`` process timed end to end (wall clock), sides interleaved
(``timing.interleaved``); the Ray runs include starting and stopping the local Ray instance. Ratios are given end
to end and without the start-up (each workload's one-row run, ray minus local, subtracted: Ray's own start-up
plus what its actor imports and loads, e.g. torch and open_clip for ``clip_score``). The outputs of all runs are
checked to be byte-identical to the local run's.

Run: python benchmarks/bench_ray.py [--n 2000] [--chunk-size 50] [--repeats 3] [--only jpeg,clip] [--results PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image
from results_io import figure, measure, write_results
from timing import interleaved

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
JPEG = ["jpeg_compressibility", "jpeg_incompressibility"]
PHASES = """
import json, sys, time
t0 = time.perf_counter()
import ray
t1 = time.perf_counter()
from rewardzoo.ray.engine import configure_data, ensure_ray, score_dataset
ensure_ray(None, quiet=True)
t2 = time.perf_counter()
configure_data(True)
rows = score_dataset(sys.argv[1], sys.argv[2]).take_all()
t3 = time.perf_counter()
ray.shutdown()
t4 = time.perf_counter()
print(json.dumps({"import ray": t1 - t0, "ray.init": t2 - t1, "first run (actor pool, one row)": t3 - t2,
                  "ray.shutdown": t4 - t3}))
"""


def _make(folder: Path, n: int, size: int = 512) -> Path:
    rng = np.random.default_rng(0)
    base = rng.random((size, size, 3))
    lines = []
    for i in range(n):
        img = np.clip(base * (0.5 + 0.5 * i / n) + 0.05 * rng.random((size, size, 3)), 0, 1)
        Image.fromarray((img * 255).astype(np.uint8)).save(folder / f"{i}.png", compress_level=1)
        lines.append(json.dumps({"image": f"{i}.png", "prompt": f"a photo of pattern {i % 7}"}))
    (folder / "m.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "m.jsonl"


def _configs(folder: Path) -> dict[str, tuple[Path, list[str], str]]:
    from rewardzoo.testing import tiny_open_clip_dir

    jpeg = folder / "jpeg.yaml"
    jpeg.write_text("rewards:\n" + "".join(f"  - name: {r}\n    batch_size: 16\n" for r in JPEG))
    clip = folder / "clip.yaml"
    clip_dir = tiny_open_clip_dir(folder / "tiny_clip")
    clip.write_text(f"rewards:\n  - name: clip_score\n    model_path: {str(clip_dir)!r}\n    device: cpu\n"
                    "    batch_size: 16\n")
    return {"jpeg": (jpeg, JPEG, "both JPEG rewards"),
            "clip": (clip, ["clip_score"], "`clip_score` on a tiny open_clip model (ViT, 1 layer, 64 px input)")}


def _runner(config: Path, manifest: Path, out: Path, chunk: int, *extra: str):
    def run() -> None:
        subprocess.run([sys.executable, "-m", "rewardzoo.cli", "score", str(config), "-i", str(manifest), "-o",
                        str(out), "-q", "--chunk-size", str(chunk), *extra], check=True, cwd=ROOT,
                       stderr=subprocess.DEVNULL)
    return run


def _phases(config: Path, one: Path, repeats: int) -> dict[str, float]:
    runs = [json.loads(subprocess.run([sys.executable, "-c", PHASES, str(one), str(config)], check=True, cwd=ROOT,
                                      capture_output=True, text=True).stdout.strip().splitlines()[-1])
            for _ in range(repeats)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--chunk-size", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="jpeg,clip", help="workloads, comma-separated: jpeg, clip")
    parser.add_argument("--results", type=Path, help="write the figures here instead (a sanity run)")
    args = parser.parse_args()
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    c, figures = args.chunk_size, []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        manifest = _make(folder, args.n)
        print(f"generated {args.n} PNGs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        one = folder / "one.jsonl"
        one.write_text(manifest.read_text().splitlines()[0] + "\n")
        configs = _configs(folder)
        jpeg_config = configs["jpeg"][0]
        start_times, _ = interleaved({  # Ray's own fixed cost: the JPEG rewards need no torch
            "local": _runner(jpeg_config, one, folder / "one_local.jsonl", c),
            "ray": _runner(jpeg_config, one, folder / "one_ray.jsonl", c, "--engine", "ray")},
            args.repeats, warmup=0)
        startup = start_times["ray"] - start_times["local"]
        phases = _phases(jpeg_config, one, args.repeats)
        print(f"start-up {startup:.2f} s; phases " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()),
              file=sys.stderr)
        for name in only:
            config, rewards, what = configs[name]
            outs = {k: folder / f"{name}_{k}.jsonl" for k in ("local", "ray2", "ray1", "one_local", "one_ray")}
            one_actor = ("--engine", "ray", "--actors", "1", "--cpus-per-actor", str(os.cpu_count()))
            times, ratios = interleaved({
                "local": _runner(config, manifest, outs["local"], c),
                "ray2": _runner(config, manifest, outs["ray2"], c, "--engine", "ray", "--actors", "2"),
                "ray1": _runner(config, manifest, outs["ray1"], c, *one_actor),
                "one_local": _runner(config, one, outs["one_local"], c),
                "one_ray": _runner(config, one, outs["one_ray"], c, *one_actor)}, args.repeats, warmup=0)
            ref = outs["local"].read_bytes()
            assert outs["ray2"].read_bytes() == ref and outs["ray1"].read_bytes() == ref, "outputs differ"
            local, ray2, ray1 = times["local"], times["ray2"], times["ray1"]
            own = times["one_ray"] - times["one_local"]  # this workload's start-up: Ray's, plus its actor's imports
            print(f"{name}: local {local:.2f} s | ray x2 {ray2:.2f} s | ray x1 {ray1:.2f} s | start-up {own:.2f} s "
                  f"(median ratios x2 {1 / ratios['ray2']:.2f}x faster, x1 {ratios['ray1']:.2f})", file=sys.stderr)
            work = f"{args.n} PNG images 512x512, {what}, chunk {c}"
            without2 = f"{local / (ray2 - own):.2f}x" if ray2 > own else "not measurable (shorter than it)"
            without1 = f"{(ray1 - own) / local:.2f}" if ray1 > own else "not measurable (shorter than it)"
            figures += [
                figure(f"ray.{name}.speedup.actors2",
                       f"`--engine ray --actors 2` vs `rewardzoo score` in one process, {work}",
                       measure("ray, 2 actors", ray2, "s"), baseline=measure("local", local, "s"),
                       ratio=1 / ratios["ray2"], ratio_label="x faster", goal=">= 1.6x", rewards=rewards,
                       notes=f"end to end, the {own:.1f} s start-up (one-row run, ray minus local) included; without "
                             f"it {without2}; the ideal is 2x less the driver's share; 2 CPU cores"),
                figure(f"ray.{name}.overhead.actors1",
                       f"`--engine ray --actors 1 --cpus-per-actor {os.cpu_count()}` vs `rewardzoo score` in one "
                       f"process, {work}", measure("ray, 1 actor", ray1, "s"), baseline=measure("local", local, "s"),
                       ratio=ratios["ray1"], ratio_label="ray / local", goal="<= 1.25", rewards=rewards,
                       notes=f"end to end, the {own:.1f} s start-up included; without it {without1}"),
            ]
    figures.append(figure(
        "ray.startup.local_instance",
        "fixed cost of `--engine ray` over local on a one-row manifest (start the local Ray instance, the actor "
        "pool, stop it), JPEG rewards", measure("start-up", startup, "s"),
        baseline=measure("local, one row", start_times["local"], "s"),
        rewards=[], notes="phases in one process: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())))
    write_results(__file__, figures, parts=None if set(only) == {"jpeg", "clip"} else
                  ["ray.startup"] + [f"ray.{w}" for w in only], path=args.results)


if __name__ == "__main__":
    main()
