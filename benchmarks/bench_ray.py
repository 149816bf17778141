"""Offline scoring on Ray Data (``rewardzoo score --engine ray``) against the local command.

N PNG images 512x512 (generated once into a temp dir), two CPU-bound workloads: both JPEG-size rewards, and
``clip_score`` on a tiny random-init open_clip model (``rewardzoo.testing.tiny_open_clip_dir``, saved to the temp
dir; image decoding and preprocessing dominate, as for a real model's CPU share). Sides, each a fresh
``rewardzoo score`` process timed end to end (wall clock), run round-robin (``timing.interleaved_runs``):

- ``local``: ``rewardzoo score`` in one process;
- ``ray2``: ``--engine ray --actors 2`` (goal >= 1.6x faster);
- ``ray1``: ``--engine ray --actors 1`` (one CPU, so one torch thread), the engine's own overhead (goal <= 1.25x
  the local time). With ``--cpus-per-actor 2`` the actor's two torch threads were slower, not faster, for the tiny
  model: they share the two cores with the driver and Ray's own processes (0.19 s a chunk against 0.12 s);
- ``split2``: two local processes at once, each on half the rows and with one torch thread (as a 1-CPU actor
  has): what two workers get from this machine with no engine at all, the practical ideal for ``ray2``.

Each side runs on N rows and on 2N rows (the same N images listed twice). Two kinds of ratio, both per repetition
and then the median:

- **throughput**: the time the second N rows add (2N-row run minus N-row run), local over the side's; the fixed
  costs (Python start, imports, model load, and for Ray its start-up, actor pool and shutdown) cancel out;
- **end to end** on N rows, as a user times one command: fixed costs included.

The fixed cost of each side is its N-row time less N rows at its throughput. Ray's own start-up is measured apart
on a one-row manifest, JPEG rewards (no torch): ``--engine ray`` minus local, with its phases (``import ray``,
``ray.init``, the first Ray Data run with the actor pool, ``ray.shutdown``) timed inside one process; and joining
a running ``ray start`` cluster (``--address``) instead of starting one. The outputs of all runs are checked to be
byte-identical to the local run's.

Run: python benchmarks/bench_ray.py [--n 2000] [--chunk-size 50] [--repeats 3] [--only jpeg,clip] [--results PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image
from results_io import figure, measure, write_results
from timing import interleaved_runs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
JPEG = ["jpeg_compressibility", "jpeg_incompressibility"]
PHASES = """
import json, sys, time
t0 = time.perf_counter()
import ray
t1 = time.perf_counter()
from rewardzoo.ray.engine import configure_data, score_dataset
from rewardzoo.ray.startup import ensure_ray
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


def _make(folder: Path, n: int, size: int = 512) -> tuple[Path, Path]:
    """N PNGs; manifests of N rows and of 2N rows (each image twice)."""
    rng = np.random.default_rng(0)
    base = rng.random((size, size, 3))
    lines = []
    for i in range(n):
        img = np.clip(base * (0.5 + 0.5 * i / n) + 0.05 * rng.random((size, size, 3)), 0, 1)
        Image.fromarray((img * 255).astype(np.uint8)).save(folder / f"{i}.png", compress_level=1)
        lines.append(json.dumps({"image": f"{i}.png", "prompt": f"a photo of pattern {i % 7}"}))
    (folder / "n.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "2n.jsonl").write_text("\n".join(lines + lines) + "\n")
    return folder / "n.jsonl", folder / "2n.jsonl"


def _halves(manifest: Path) -> tuple[Path, Path]:
    lines = manifest.read_text().splitlines(keepends=True)
    a, b = manifest.with_suffix(".a.jsonl"), manifest.with_suffix(".b.jsonl")
    a.write_text("".join(lines[: len(lines) // 2]))
    b.write_text("".join(lines[len(lines) // 2 :]))
    return a, b


def _configs(folder: Path) -> dict[str, tuple[Path, list[str], str]]:
    from rewardzoo.testing import tiny_open_clip_dir

    jpeg = folder / "jpeg.yaml"
    jpeg.write_text("rewards:\n" + "".join(f"  - name: {r}\n    batch_size: 16\n" for r in JPEG))
    clip = folder / "clip.yaml"
    clip_dir = tiny_open_clip_dir(folder / "tiny_clip")
    clip.write_text(
        f"rewards:\n  - name: clip_score\n    model_path: {str(clip_dir)!r}\n    device: cpu\n    batch_size: 16\n"
    )
    return {
        "jpeg": (jpeg, JPEG, "both JPEG rewards"),
        "clip": (clip, ["clip_score"], "`clip_score` on a tiny open_clip model (ViT, 1 layer, 64 px input)"),
    }


def _command(config: Path, manifest: Path, out: Path, chunk: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rewardzoo.cli",
        "score",
        str(config),
        "-i",
        str(manifest),
        "-o",
        str(out),
        "-q",
        "--chunk-size",
        str(chunk),
        *extra,
    ]


def _runner(*commands: list[str], env: dict | None = None):
    """Runs the commands at once (one for a plain side, two for ``split2``) and waits for all."""

    def run() -> None:
        procs = [subprocess.Popen(c, cwd=ROOT, env=env, stderr=subprocess.DEVNULL) for c in commands]
        if any(p.wait() != 0 for p in procs):
            raise RuntimeError(f"a run failed: {commands}")

    return run


def _phases(config: Path, one: Path, repeats: int) -> dict[str, float]:
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", PHASES, str(one), str(config)],
                check=True,
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        for _ in range(repeats)
    ]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _joining(config: Path, one: Path, folder: Path, chunk: int, repeats: int) -> tuple[float, float]:
    """(one-row local, one-row ``--address`` run) on a ``ray start`` cluster started and stopped here."""
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    log = folder / "ray_start.log"
    address_file = Path("/tmp/ray/ray_current_cluster")
    before = address_file.read_text() if address_file.exists() else None
    with log.open("w") as fh:
        head = subprocess.Popen(
            [
                "ray",
                "start",
                "--head",
                "--block",
                "--num-cpus",
                str(os.cpu_count()),
                "--port",
                "0",
                "--include-dashboard",
                "false",
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"ray start --address='([^']+)'", log.read_text())):
            if time.monotonic() > deadline or head.poll() is not None:
                raise RuntimeError(f"`ray start` did not come up: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        times = interleaved_runs(
            {
                "local": _runner(_command(config, one, folder / "j_local.jsonl", chunk)),
                "join": _runner(
                    _command(config, one, folder / "j_ray.jsonl", chunk, "--engine", "ray", "--address", found[1]),
                    env=env,
                ),
            },
            repeats,
            warmup=1,
        )
    finally:
        head.send_signal(signal.SIGINT)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        if before is None:  # the stopped cluster's address would make a later plain ray.init() try to join it
            address_file.unlink(missing_ok=True)
        else:
            address_file.write_text(before)
    return statistics.median(times["local"]), statistics.median(times["join"])


def _workload(name: str, config: Path, manifests: dict[str, Path], folder: Path, c: int, repeats: int) -> dict:
    """Times of every side on N and 2N rows; outputs checked byte-identical to local."""
    one_actor = ("--engine", "ray", "--actors", "1")
    one_thread = {**os.environ, "OMP_NUM_THREADS": "1"}
    fns, outs = {}, {}
    for size, manifest in manifests.items():
        a, b = _halves(manifest)
        for side, extra in (("local", ()), ("ray2", ("--engine", "ray", "--actors", "2")), ("ray1", one_actor)):
            outs[side, size] = folder / f"{name}_{side}_{size}.jsonl"
            fns[side, size] = _runner(_command(config, manifest, outs[side, size], c, *extra))
        fns["split2", size] = _runner(
            _command(config, a, folder / f"{name}_a.jsonl", c),
            _command(config, b, folder / f"{name}_b.jsonl", c),
            env=one_thread,
        )
    times = interleaved_runs(fns, repeats, warmup=0)
    for size in manifests:
        ref = outs["local", size].read_bytes()
        assert all(outs[s, size].read_bytes() == ref for s in ("ray2", "ray1")), f"{name}: outputs differ ({size})"
    return times


def _per_repetition(times: dict, side: str, kind: str) -> list[float]:
    """local / side per repetition, on the added N rows (``throughput``) or on N rows (``e2e``)."""

    def added(s: str) -> list[float]:
        return [b - a for a, b in zip(times[s, "n"], times[s, "2n"])]

    local, other = (added("local"), added(side)) if kind == "throughput" else (times["local", "n"], times[side, "n"])
    return [x / y for x, y in zip(local, other)]


def _spread(ratios: list[float], invert: bool = False) -> str:
    values = sorted(1 / r if invert else r for r in ratios)
    return f"repetitions {values[0]:.2f}-{values[-1]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--chunk-size", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="jpeg,clip", help="workloads, comma-separated: jpeg, clip")
    parser.add_argument("--results", type=Path, help="write the figures here instead (a sanity run)")
    args = parser.parse_args()
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    c, n, figures = args.chunk_size, args.n, []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        manifests = dict(zip(("n", "2n"), _make(folder, n)))
        print(f"generated {n} PNGs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        one = folder / "one.jsonl"
        one.write_text(manifests["n"].read_text().splitlines()[0] + "\n")
        configs = _configs(folder)
        jpeg_config = configs["jpeg"][0]
        start = interleaved_runs(
            {  # Ray's own fixed cost: the JPEG rewards need no torch
                "local": _runner(_command(jpeg_config, one, folder / "one_local.jsonl", c)),
                "ray": _runner(_command(jpeg_config, one, folder / "one_ray.jsonl", c, "--engine", "ray")),
            },
            args.repeats,
            warmup=0,
        )
        one_local, one_ray = statistics.median(start["local"]), statistics.median(start["ray"])
        phases = _phases(jpeg_config, one, args.repeats)
        join_local, join_ray = _joining(jpeg_config, one, folder, c, args.repeats)
        print(
            f"start-up {one_ray - one_local:.2f} s (joining a cluster {join_ray - join_local:.2f} s); phases "
            + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()),
            file=sys.stderr,
        )
        for name in only:
            config, rewards, what = configs[name]
            times = _workload(name, config, manifests, folder, c, args.repeats)
            med = {key: statistics.median(v) for key, v in times.items()}
            rate = {s: (med[s, "2n"] - med[s, "n"]) / n * 1000 for s in ("local", "ray2", "ray1", "split2")}
            fixed = {s: med[s, "n"] - rate[s] * n / 1000 for s in rate}
            reps = {
                (s, k): _per_repetition(times, s, k) for s in ("ray2", "ray1", "split2") for k in ("throughput", "e2e")
            }
            print(
                f"{name}: per repetition "
                + "; ".join(f"{s} {k} " + " ".join(f"{r:.2f}" for r in v) for (s, k), v in reps.items()),
                file=sys.stderr,
            )
            tp = {s: statistics.median(reps[s, "throughput"]) for s in ("ray2", "split2")}
            e2e = {s: statistics.median(reps[s, "e2e"]) for s in ("ray2", "split2")}
            tp1, e2e1 = 1 / statistics.median(reps["ray1", "throughput"]), 1 / statistics.median(reps["ray1", "e2e"])
            print(
                f"{name}: s per 1000 added rows "
                + ", ".join(f"{s} {v:.2f}" for s, v in rate.items())
                + " | fixed "
                + ", ".join(f"{s} {v:.1f}" for s, v in fixed.items())
                + f" | throughput x2 {tp['ray2']:.2f}x (two processes {tp['split2']:.2f}x), x1 {tp1:.2f}"
                + f" | end to end x2 {e2e['ray2']:.2f}x (two processes {e2e['split2']:.2f}x), x1 {e2e1:.2f}",
                file=sys.stderr,
            )
            work = f"{n} PNG images 512x512, {what}, chunk {c}"
            fixed_note = (
                f"fixed costs (the {n}-row time less {n} rows at the side's throughput): local "
                f"{fixed['local']:.1f} s, 2 actors {fixed['ray2']:.1f} s, 1 actor {fixed['ray1']:.1f} s"
            )
            figures += [
                figure(
                    f"ray.{name}.throughput.actors2",
                    f"`--engine ray --actors 2` vs `rewardzoo score` in one process, throughput: the time {n} "
                    f"more rows add, {work}",
                    measure("ray, 2 actors", rate["ray2"], "s / 1000 rows"),
                    baseline=measure("local", rate["local"], "s / 1000 rows"),
                    ratio=tp["ray2"],
                    ratio_label="x faster",
                    goal=">= 1.6x",
                    rewards=rewards,
                    notes=f"{_spread(reps['ray2', 'throughput'])}; two local processes on halves of the rows "
                    f"(the ideal for two workers on these 2 cores, no engine): {tp['split2']:.2f}x; "
                    f"{fixed_note}",
                ),
                figure(
                    f"ray.{name}.overhead.actors1",
                    f"`--engine ray --actors 1` vs `rewardzoo score` in one process, throughput: the time {n} "
                    f"more rows add, {work}",
                    measure("ray, 1 actor", rate["ray1"], "s / 1000 rows"),
                    baseline=measure("local", rate["local"], "s / 1000 rows"),
                    ratio=tp1,
                    ratio_label="ray / local",
                    goal="<= 1.25",
                    rewards=rewards,
                    notes=f"{_spread(reps['ray1', 'throughput'], invert=True)}; {fixed_note}",
                ),
                figure(
                    f"ray.{name}.end_to_end.actors2",
                    f"`--engine ray --actors 2` vs `rewardzoo score` in one process, end to end on {n} rows, {work}",
                    measure("ray, 2 actors", med["ray2", "n"], "s"),
                    baseline=measure("local", med["local", "n"], "s"),
                    ratio=e2e["ray2"],
                    ratio_label="x faster",
                    rewards=rewards,
                    notes=f"Ray's fixed costs included; {_spread(reps['ray2', 'e2e'])}; two local processes on "
                    f"halves: {e2e['split2']:.2f}x; "
                    f"1 actor: {e2e1:.2f} the local time",
                ),
            ]
    figures.append(
        figure(
            "ray.startup.local_instance",
            "fixed cost of `--engine ray` over local on a one-row manifest (start the local Ray instance, the actor "
            "pool, stop it), JPEG rewards",
            measure("start-up", one_ray - one_local, "s"),
            baseline=measure("local, one row", one_local, "s"),
            rewards=[],
            notes="phases in one process: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()),
        )
    )
    figures.append(
        figure(
            "ray.startup.joining_a_cluster",
            "fixed cost of `--engine ray --address ADDR` over local on a one-row manifest, joining a running `ray start` "
            "cluster on this machine (connect, the actor pool, disconnect), JPEG rewards",
            measure("start-up", join_ray - join_local, "s"),
            baseline=measure("local, one row", join_local, "s"),
            rewards=[],
            notes="what each job pays once the cluster is up",
        )
    )
    write_results(
        __file__,
        figures,
        parts=None if set(only) == {"jpeg", "clip"} else ["ray.startup"] + [f"ray.{w}" for w in only],
        path=args.results,
    )


if __name__ == "__main__":
    main()
