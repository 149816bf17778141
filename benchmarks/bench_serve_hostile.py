"""``rewardzoo serve`` under hostile clients (issue 37, items 1 and 2), before and after, on 127.0.0.1.

- ``/health`` latency and status while 260 idle connections stay open (uvicorn's limit_concurrency used to count
  them and answer 503 to everything);
- peak RSS of the server process (VmHWM) while CONCURRENT requests of 16 black 4096x4096 PNGs each (~0.8 MB on
  the wire, ~805 MB decoded) arrive at once, with /health latency during the attack.

"before" is the code of ``--before REV`` (default: this branch's base), extracted with ``git archive`` into a
temporary folder; "after" is this tree. Both serve the same one-line reward (the image's width, so the memory is
the server's decoding, not a model's). Writes ``benchmarks/results/bench_serve_hostile.json``.
"""

from __future__ import annotations

import argparse
import http.client
import io
import os
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import msgpack
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_io import figure, measure, print_figures, write_results

ROOT = Path(__file__).resolve().parents[1]
REWARD = """from rewardzoo.rewards.base import Inputs, PointwiseReward


class ImageWidth(PointwiseReward):
    inputs = Inputs(("image",), images="pil")
    modality = "image"

    def __call__(self, image, **_):
        return [float(im.width) for im in image]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str, timeout: float = 30.0) -> tuple[int, float]:
    started = time.perf_counter()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("GET", path)
        status = conn.getresponse().status
        conn.close()
    except OSError:
        status = 0
    return status, (time.perf_counter() - started) * 1000


def post(port: int, body: bytes, out: list) -> None:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        conn.request("POST", "/v1/score", body, {"Content-Type": "application/msgpack"})
        out.append(conn.getresponse().status)
        conn.close()
    except OSError as exc:
        out.append(type(exc).__name__)


def vm(pid: int, key: str) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Served:
    def __init__(self, tree: Path, folder: Path):
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{folder}", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        (folder / "w.yaml").write_text("rewards:\n  - name: w\n    reward_model: bench_hostile_reward:ImageWidth\n")
        self.log = open(folder / f"serve.{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rewardzoo.cli", "serve", str(folder / "w.yaml"), "--port", str(self.port)],
            env=env,
            cwd=str(folder),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while get(self.port, "/ready", 5)[0] != 200:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"the server did not start: {(folder / self.log.name).read_text()[-2000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def idle_connections(tree: Path, folder: Path, n: int) -> dict:
    server = Served(tree, folder)
    try:
        sockets = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(n)]
        time.sleep(0.5)
        probes = [get(server.port, "/health", 10) for _ in range(10)]
        for s in sockets:
            s.close()
    finally:
        server.stop()
    return {"statuses": sorted({s for s, _ in probes}), "median_ms": statistics.median(ms for _, ms in probes)}


def png_attack(tree: Path, folder: Path, concurrent: int) -> dict:
    from rewardzoo.transport.wire import png_bytes

    black = png_bytes(np.zeros((4096, 4096, 3), np.uint8), level=9)
    body = msgpack.packb(
        {"protocol": 1, "samples": [{"image": {"format": "png", "data": black}}] * 16}, use_bin_type=True
    )
    server = Served(tree, folder)
    try:
        base = vm(server.proc.pid, "VmRSS")
        statuses: list = []
        threads = [threading.Thread(target=post, args=(server.port, body, statuses)) for _ in range(concurrent)]
        health: list[tuple[int, float]] = []
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            health.append(get(server.port, "/health", 30))
            time.sleep(0.1)
        peak, after = vm(server.proc.pid, "VmHWM"), vm(server.proc.pid, "VmRSS")
    finally:
        server.stop()
    return {
        "wire_kb": len(body) / 1024,
        "rss_before_mb": base,
        "peak_mb": peak,
        "rss_after_mb": after,
        "statuses": sorted(map(str, statuses)),
        "health_median_ms": statistics.median(ms for _, ms in health) if health else None,
        "health_max_ms": max((ms for _, ms in health), default=None),
        "health_statuses": sorted({s for s, _ in health}),
    }


def extract(rev: str, into: Path) -> Path:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "rewardzoo"], check=True, capture_output=True).stdout
    tarfile.open(fileobj=io.BytesIO(data)).extractall(into)
    return into


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default="e212294", help="the revision measured as 'before'")
    p.add_argument("--concurrent", type=int, default=3, help="attack requests at once")
    p.add_argument("--idle", type=int, default=260)
    args = p.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "bench_hostile_reward.py").write_text(REWARD)
        trees = {"before": extract(args.before, tmp / "before"), "after": ROOT}
        for name, tree in trees.items():
            results[name] = {
                "idle": idle_connections(tree, tmp, args.idle),
                "png": png_attack(tree, tmp, args.concurrent),
            }
            print(name, results[name], flush=True)
    b, a = results["before"], results["after"]
    figs = [
        figure(
            "serve.hostile.health_idle",
            f"/health median latency with {args.idle} idle connections open "
            f"(statuses before {b['idle']['statuses']}, after {a['idle']['statuses']})",
            measure("after", a["idle"]["median_ms"], "ms"),
            baseline=measure("before", b["idle"]["median_ms"], "ms"),
            notes="before: uvicorn's limit_concurrency counted the idle sockets and answered 503",
        ),
        figure(
            "serve.hostile.png_peak_rss",
            f"server peak RSS, {args.concurrent} concurrent requests of 16 black "
            f"4096x4096 PNGs ({a['png']['wire_kb']:.0f} kB each; statuses before {b['png']['statuses']}, "
            f"after {a['png']['statuses']})",
            measure("after", a["png"]["peak_mb"], "MB"),
            baseline=measure("before", b["png"]["peak_mb"], "MB"),
            ratio=b["png"]["peak_mb"] / a["png"]["peak_mb"],
            ratio_label="x less memory",
            notes=f"RSS after the attack: before {b['png']['rss_after_mb']:.0f} MB, after "
            f"{a['png']['rss_after_mb']:.0f} MB; /health during it: before median "
            f"{b['png']['health_median_ms']:.1f} ms (max {b['png']['health_max_ms']:.0f}), after "
            f"{a['png']['health_median_ms']:.1f} ms (max {a['png']['health_max_ms']:.0f})",
        ),
    ]
    print_figures(figs)
    print(write_results(__file__, figs))


if __name__ == "__main__":
    main()
