"""``rewardzoo serve`` memory admission and slow bodies (issue 49, items 1, 4 and 7), before and after, on 127.0.0.1.

- ``png``: CONCURRENT requests of 16 black 4096x4096 PNGs (~0.8 MB on the wire each) at once, then a sequence
  of them, against ``--max-decoded-mb``: the server's peak RSS over its RSS before (VmHWM, reset between phases
  through ``/proc/PID/clear_refs``), and its RSS after 3 s idle;
- ``png30``: one request of 30 such PNGs (over ``max_request_pixels``): its status, time and peak growth;
- ``parse``: bodies of tiny objects — 8 MiB and 63 MiB MessagePack arrays of empty maps, 4 concurrent 8 MiB ones,
  60 MB JSON ``/get_reward`` bodies (a list of floats, a list of empty strings): peak growth against the body size;
- ``slow``: SLOW authenticated clients each sending a 4 kB body a byte every 0.5 s while an honest client asks
  ``/v1/score`` every 0.25 s for DURATION s: the honest answers' statuses and worst latency.

"before" is the code of ``--before REV`` (``git archive``), "after" this tree; both serve the image's width (the
memory is the server's, not a model's). Writes ``benchmarks/results/bench_serve_admission.json``.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import socket
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
TOKEN = "bench-token"
REWARD = """from rewardzoo.rewards.base import Inputs, PointwiseReward


class ImageWidth(PointwiseReward):
    inputs = Inputs(("image",), images="pil")
    modality = "image"

    def __call__(self, image, **_):
        return [float(im.width) for im in image]


class Length(PointwiseReward):
    inputs = Inputs(("prompt",))
    modality = "text"

    def __call__(self, prompt, **_):
        return [float(len(p)) for p in prompt]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, path: str, body: bytes, ctype: str = "application/msgpack", timeout: float = 300) -> int | str:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("POST", path, body, {"Content-Type": ctype, "Authorization": f"Bearer {TOKEN}"})
        status = conn.getresponse().status
        conn.close()
        return status
    except OSError as exc:
        return type(exc).__name__


def vm_mb(pid: int, key: str) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Served:
    def __init__(self, tree: Path, folder: Path, *args: str):
        self.port = free_port()
        env = {
            **os.environ,
            "PYTHONPATH": f"{tree}{os.pathsep}{folder}",
            "OMP_NUM_THREADS": "1",
            "HF_HUB_OFFLINE": "1",
            "BENCH_TOKEN": TOKEN,
        }
        (folder / "s.yaml").write_text(
            "rewards:\n  - name: w\n    reward_model: bench_admission_reward:ImageWidth\n"
            "  - name: n\n    reward_model: bench_admission_reward:Length\n"
        )
        self.log = open(folder / f"serve.{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rewardzoo.cli", "serve", str(folder / "s.yaml"), "--port", str(self.port)]
            + ["--token-env", "BENCH_TOKEN", *args],
            env=env,
            cwd=str(folder),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/ready")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"the server did not start: {(folder / self.log.name).read_text()[-2000:]}")
            time.sleep(0.2)
        assert post(self.port, "/v1/score", small_png_request()) == 200  # warm: the first request's imports

    def reset_peak(self) -> float:
        with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
            f.write("5")
        return vm_mb(self.proc.pid, "VmRSS")

    def peak(self) -> float:
        return vm_mb(self.proc.pid, "VmHWM")

    def rss(self) -> float:
        return vm_mb(self.proc.pid, "VmRSS")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def small_png_request() -> bytes:
    from rewardzoo.transport.wire import png_bytes

    return msgpack.packb(
        {
            "protocol": 1,
            "rewards": ["w"],
            "samples": [{"image": {"format": "png", "data": png_bytes(np.zeros((8, 8, 3), np.uint8))}}],
        },
        use_bin_type=True,
    )


def png_body(n: int) -> bytes:
    from rewardzoo.transport.wire import png_bytes

    black = png_bytes(np.zeros((4096, 4096, 3), np.uint8), level=9)
    return msgpack.packb(
        {"protocol": 1, "rewards": ["w"], "samples": [{"image": {"format": "png", "data": black}}] * n},
        use_bin_type=True,
    )


def concurrently(port: int, bodies: list[tuple[str, bytes, str]]) -> list:
    out: list = [None] * len(bodies)

    def one(i: int) -> None:
        out[i] = post(port, *bodies[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def png_attack(tree: Path, folder: Path, concurrent: int, budget_mb: float) -> dict:
    body = png_body(16)
    server = Served(tree, folder, "--max-decoded-mb", str(budget_mb))
    try:
        base = server.reset_peak()
        first = concurrently(server.port, [("/v1/score", body, "application/msgpack")] * concurrent)
        round_peak = server.peak()
        sequence = [post(server.port, "/v1/score", body) for _ in range(concurrent)]
        overall = server.peak()
        time.sleep(3)
        idle = server.rss()
    finally:
        server.stop()
    return {
        "budget_mb": budget_mb,
        "wire_kb": len(body) / 1024,
        "rss_before_mb": base,
        "round_peak_mb": round_peak,
        "peak_mb": overall,
        "idle_mb": idle,
        "round_statuses": first,
        "sequence_statuses": sequence,
    }


def png30(tree: Path, folder: Path) -> dict:
    body = png_body(30)
    server = Served(tree, folder)
    try:
        base = server.reset_peak()
        started = time.perf_counter()
        status = post(server.port, "/v1/score", body)
        seconds = time.perf_counter() - started
        peak = server.peak()
    finally:
        server.stop()
    return {"status": status, "seconds": seconds, "growth_mb": peak - base}


def empty_maps(size: int) -> bytes:
    return b"\xdd" + (size - 5).to_bytes(4, "big") + b"\x80" * (size - 5)  # an array32 of empty maps


def parse_attacks(tree: Path, folder: Path) -> dict:
    mib = 2**20
    floats = b'{"query":[' + b",".join([b"0.5"] * (60_000_000 // 4)) + b'],"prompts":[]}'
    strings = b'{"query":[' + b",".join([b'""'] * (60_000_000 // 3)) + b'],"prompts":[]}'
    cases = {
        "msgpack_8mib_empty_maps": [("/v1/score", empty_maps(8 * mib), "application/msgpack")],
        "msgpack_63mib_empty_maps": [("/v1/score", empty_maps(63 * mib), "application/msgpack")],
        "msgpack_4x8mib_empty_maps": [("/v1/score", empty_maps(8 * mib), "application/msgpack")] * 4,
        "json_60mb_get_reward_floats": [("/get_reward", floats, "application/json")],
        "json_60mb_get_reward_strings": [("/get_reward", strings, "application/json")],
    }
    out = {}
    for name, bodies in cases.items():
        server = Served(tree, folder)
        try:
            base = server.reset_peak()
            started = time.perf_counter()
            statuses = concurrently(server.port, bodies)
            seconds = time.perf_counter() - started
            growth = server.peak() - base
            time.sleep(3)
            idle = server.rss() - base
        finally:
            server.stop()
        body_mb = sum(len(b) for _, b, _ in bodies) / mib
        out[name] = {
            "body_mb": body_mb,
            "statuses": statuses,
            "seconds": seconds,
            "growth_mb": growth,
            "per_body": growth / body_mb,
            "idle_growth_mb": idle,
        }
        print(name, out[name], flush=True)
    return out


def slow_bodies(tree: Path, folder: Path, clients: int, duration: float) -> dict:
    server = Served(tree, folder)
    stop = threading.Event()
    opened = [0]

    def slow_client() -> None:
        while not stop.is_set():  # reopen as it is closed, as the attacker did
            try:
                s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            except OSError:
                stop.wait(0.2)
                continue
            opened[0] += 1
            try:
                s.sendall(
                    b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + f"Authorization: Bearer {TOKEN}\r\nContent-Length: 4096\r\n\r\n".encode()
                )
                while not stop.is_set():
                    s.sendall(b" ")
                    stop.wait(0.5)
            except OSError:
                pass
            finally:
                s.close()

    honest = json.dumps({"protocol": 1, "rewards": ["n"], "samples": [{"prompt": "hello"}]}).encode()
    threads = [threading.Thread(target=slow_client, daemon=True) for _ in range(clients)]
    answers: list[tuple[float, int | str]] = []
    try:
        for t in threads:
            t.start()
        time.sleep(2)
        ends = time.monotonic() + duration
        while time.monotonic() < ends:
            started = time.perf_counter()
            status = post(server.port, "/v1/score", honest, "application/json", timeout=30)
            answers.append((time.perf_counter() - started, status))
            time.sleep(0.25)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        server.stop()
    ok = [s for s, status in answers if status == 200]
    return {
        "clients": clients,
        "duration_s": duration,
        "connections_opened": opened[0],
        "honest_requests": len(answers),
        "honest_200": len(ok),
        "statuses": sorted({str(s) for _, s in answers}),
        "worst_s": max(s for s, _ in answers),
        "worst_200_s": max(ok, default=None),
    }


def extract(rev: str, into: Path) -> Path:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "rewardzoo"], check=True, capture_output=True).stdout
    tarfile.open(fileobj=io.BytesIO(data)).extractall(into)
    return into


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default="ec79ef2", help="the revision measured as 'before'")
    p.add_argument("--only", choices=["before", "after"], help="measure one tree")
    p.add_argument("--parts", default="png,png30,parse,slow")
    p.add_argument("--concurrent", type=int, default=5)
    p.add_argument("--budget-mb", type=float, default=1024.0)
    p.add_argument("--slow", type=int, default=260)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--raw", type=Path, help="folder of each tree's raw results: written when measured, read (not "
                   "measured again) when --reuse names the tree")  # fmt: skip
    p.add_argument("--reuse", default="", help="trees whose raw results --raw holds, e.g. 'before'")
    args = p.parse_args()
    parts = args.parts.split(",")
    results: dict = {}
    if args.raw is not None:
        for name in filter(None, args.reuse.split(",")):
            results[name] = json.loads((args.raw / f"{name}.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "bench_admission_reward.py").write_text(REWARD)
        trees = {"before": lambda: extract(args.before, tmp / "before"), "after": lambda: ROOT}
        for name, tree_of in trees.items():
            if (args.only and name != args.only) or name in results:
                continue
            tree, r = tree_of(), {}
            if "png" in parts:
                r["png"] = png_attack(tree, tmp, args.concurrent, args.budget_mb)
                print(name, "png", r["png"], flush=True)
            if "png30" in parts:
                r["png30"] = png30(tree, tmp)
                print(name, "png30", r["png30"], flush=True)
            if "parse" in parts:
                r["parse"] = parse_attacks(tree, tmp)
            if "slow" in parts:
                r["slow"] = slow_bodies(tree, tmp, args.slow, args.duration)
                print(name, "slow", r["slow"], flush=True)
            results[name] = r
            if args.raw is not None:
                args.raw.mkdir(parents=True, exist_ok=True)
                (args.raw / f"{name}.json").write_text(json.dumps(r))
    print(json.dumps(results, indent=1))
    if args.only:
        return
    b, a = results["before"], results["after"]
    figs = []
    if "png" in parts:
        figs.append(
            figure(
                "serve.admission.png_peak_rss",
                f"server peak RSS over its start, {args.concurrent} concurrent then {args.concurrent} sequential "
                f"requests of 16 black 4096x4096 PNGs, --max-decoded-mb {args.budget_mb:g}",
                measure("after", a["png"]["peak_mb"] - a["png"]["rss_before_mb"], "MB"),
                baseline=measure("before", b["png"]["peak_mb"] - b["png"]["rss_before_mb"], "MB"),
                notes=f"idle RSS 3 s after: before {b['png']['idle_mb']:.0f} MB, after {a['png']['idle_mb']:.0f} MB "
                f"(start {b['png']['rss_before_mb']:.0f} / {a['png']['rss_before_mb']:.0f} MB); statuses before "
                f"{b['png']['round_statuses']} then {b['png']['sequence_statuses']}, after "
                f"{a['png']['round_statuses']} then {a['png']['sequence_statuses']}",
            )
        )
    if "parse" in parts:
        for case in a["parse"]:
            figs.append(
                figure(
                    f"serve.admission.{case}",
                    f"server peak RSS growth per body MB, {case} (statuses before {b['parse'][case]['statuses']}, "
                    f"after {a['parse'][case]['statuses']})",
                    measure("after", a["parse"][case]["per_body"], "x"),
                    baseline=measure("before", b["parse"][case]["per_body"], "x"),
                )
            )
    if "slow" in parts:
        figs.append(
            figure(
                "serve.admission.slow_bodies",
                f"honest /v1/score requests answered 200 during {args.duration:g} s of {args.slow} slow body senders",
                measure("after", 100 * a["slow"]["honest_200"] / a["slow"]["honest_requests"], "%"),
                baseline=measure("before", 100 * b["slow"]["honest_200"] / b["slow"]["honest_requests"], "%"),
                notes=f"statuses before {b['slow']['statuses']}, after {a['slow']['statuses']}; worst answer "
                f"after {a['slow']['worst_s']:.3f} s",
            )
        )
    print_figures(figs)
    print(write_results(__file__, figs))


if __name__ == "__main__":
    main()
