"""Serving benchmarks: what a round trip through ``rewardzoo serve`` costs, what server-side batching gains,
and what the safe wire format costs against pickle.

- roundtrip: one request of 32 images 512x512 scored by a server on this machine (``RewardClient``) against the
  same batch scored in the process from the PIL images, for a model reward (``laion_aesthetic`` on the tiny random
  open_clip of ``rewardzoo.testing``; the tiny model makes the overhead look large: a real ViT-L/14 costs ~100x more
  per image while the transfer costs the same) and for ``jpeg_compressibility``. Sides: raw images beside the
  MessagePack map (the framed body, the default), raw inside one MessagePack document (the protocol before framing),
  raw in same-host shared memory (sealed memfd), PNG (parallel threads); and flow_grpo's reward server (its
  snapshot's ``app_deqa`` under gunicorn with the same reward, its own JPEG + pickle client; ``anchor_servers.py``),
  recorded as skipped when its snapshot (``--flow-grpo-src``, ``--flow-grpo-client-src``) or Flask is absent.
  Both sides use one torch thread.
- codec: the PNG encode + decode of those 32 images alone against the in-process call (the PNG side's floor).
- batching: 8 client threads each sending requests of 4 samples (64x64 images) to a server with
  ``--max-batch 64 --max-wait-ms 10`` against one with ``--max-batch 4`` (each request scored on its own);
  throughput in samples/s, for a reward whose call costs 20 ms whatever its size (the regime of a GPU model
  below saturation, where batching pays) and for the tiny ``laion_aesthetic`` on one CPU thread (compute
  grows with the batch: little to gain).
- wire: encoding + decoding one 512x512 image with the wire format (MessagePack, PNG or raw) against
  ``pickle.dumps`` + ``pickle.loads`` of the same array (what flow_grpo's reward server sends).

Run: ``python benchmarks/bench_serve.py [--quick]`` (figures are ratios from interleaved runs).
"""

from __future__ import annotations

import argparse
import http.client
import mmap
import os
import pickle
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from results_io import figure, measure, print_figures, write_results
from timing import interleaved, interleaved_runs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def textured(n: int, size: int, seed: int = 0) -> list:
    """Smooth random textures plus a little noise (compress like photos, unlike pure noise)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = rng.integers(0, 256, (size // 16 + 1, size // 16 + 1, 3)).repeat(16, 0).repeat(16, 1)[:size, :size]
        img = np.clip(base + rng.integers(-8, 9, (size, size, 3)), 0, 255).astype(np.uint8)
        out.append(Image.fromarray(img))
    return out


class Server:
    """``rewardzoo serve`` in a subprocess on a free port (bounded wait for readiness)."""

    def __init__(self, config: Path, *args: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")]),
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
        }
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rewardzoo.cli", "serve", str(config), "--port", str(self.port), *args],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"server exited: {self.log.read().decode(errors='replace')[-2000:]}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/ready")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("server not ready within 180 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def write_config(root: Path) -> dict[str, Path]:
    import yaml

    from rewardzoo import testing as rzt

    oc = rzt.tiny_open_clip_dir(root / "tiny-open-clip", seed=0)
    head = rzt.aesthetic_head_file(root / "head.safetensors", seed=7)
    fixed = {
        "rewards": [
            {
                "name": "fixed",
                "reward_model": "serve_rewards:FixedCostPerCall",
                "batch_size": 64,
                "kwargs": {"call_ms": 20.0},
            }
        ]
    }
    model = {
        "rewards": [
            {
                "name": "aesthetic",
                "reward_model": "laion_aesthetic",
                "model_path": str(head),
                "device": "cpu",
                "batch_size": 64,
                "kwargs": {"clip_model": str(oc)},
            }
        ]
    }
    jpeg = {"rewards": [{"name": "jpeg", "reward_model": "jpeg_compressibility", "batch_size": 64}]}
    paths = {"model": root / "model.yaml", "jpeg": root / "jpeg.yaml", "fixed": root / "fixed.yaml"}
    paths["fixed"].write_text(yaml.safe_dump(fixed))
    paths["model"].write_text(yaml.safe_dump(model))
    paths["jpeg"].write_text(yaml.safe_dump(jpeg))
    return paths


def _forced(client: Any, transport: str) -> Any:
    """``client`` made to send as ``transport`` (``body``: one MessagePack document, the protocol before framing)."""
    if transport == "body":
        client.server.listing["wire"] = {**client.server.listing.get("wire", {}), "frames": False}
    elif transport == "frames":
        client.server._shm = False
    if client.transport != transport:
        raise RuntimeError(f"the client sends as {client.transport}, not {transport}")
    return client


#: Round-trip sides: (figure suffix, image format, transport, goal for the model reward, what it is).
SIDES = (
    ("raw", "raw", "frames", "<= 1.15x", "raw uint8 images beside the MessagePack map (framed body, the default)"),
    ("raw_body", "raw", "body", None, "raw uint8 images inside one MessagePack document (the protocol before framing)"),
    ("shm", "raw", "shm", "<= 1.05x", "raw uint8 images in sealed shared memory (same host)"),
    ("png", "png", "frames", "<= 3x", "PNG images (encoded and decoded in parallel threads)"),
)


_SINK = r"""
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
n = int(sys.argv[1])
buf = memoryview(bytearray(n))
while True:
    got = 0
    while got < n:
        k = c.recv_into(buf[got:])
        if not k:
            sys.exit(0)
        got += k
    c.sendall(b"k")
"""


class TcpSink:
    """A process that reads ``nbytes`` messages from one loopback TCP connection into a buffer it reuses and answers
    each with one byte: moving the request's bytes over the loopback and nothing else (the raw side's floor)."""

    def __init__(self, nbytes: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _SINK, str(nbytes)], stdout=subprocess.PIPE)
        port = int(self.proc.stdout.readline())  # type: ignore[union-attr]
        self.sock = socket.create_connection(("127.0.0.1", port))

    def send(self, data: Any) -> None:
        self.sock.sendall(data)
        if self.sock.recv(1) != b"k":
            raise RuntimeError("the TCP sink did not answer")

    def stop(self) -> None:
        self.sock.close()
        self.proc.wait(timeout=30)


def floors(samples: list, stacked: np.ndarray, local: Any, client: Any) -> dict[str, Any]:
    """What bounds the served sides from below, each timed beside the in-process call (same repetitions): the
    client's PIL -> array conversion, the in-process call from those arrays (what the server computes), moving the
    request's bytes over loopback TCP alone, an HTTP round trip with no body to the same server, creating and filling
    a fresh memfd (the old shared memory path) against copying into an already-populated segment (the pool), and the
    server's mapping of a segment (MAP_POPULATE)."""
    import rewardzoo
    from rewardzoo.transport import frames, segments, wire

    arrays = [rewardzoo.Sample(image=a) for a in stacked]
    flat = stacked.reshape(-1)
    sink = TcpSink(flat.nbytes)
    pooled = segments.Segment(flat.nbytes)
    pooled.array[:] = 0
    payload = wire.request_map([{"image": a} for a in stacked], image_format="raw")

    def fresh() -> None:
        frames.SharedBody(payload).close()

    def mapped() -> None:
        fd = os.open(f"/proc/self/fd/{pooled.fd}", os.O_RDONLY)
        try:
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            mmap.mmap(fd, pooled.size, flags=flags, prot=mmap.PROT_READ).close()
        finally:
            os.close(fd)

    fns = {
        "pil_to_arrays": lambda: [np.asarray(s.image) for s in samples],
        "local_arrays": lambda: local(arrays),
        "tcp": lambda: sink.send(flat.data),
        "http_empty": lambda: client.server.http.request("GET", "/health"),
        "memfd_fresh": fresh,
        "memfd_pooled": lambda: np.copyto(pooled.array[: flat.nbytes], flat),
        "shm_map": mapped,
    }
    return {"fns": fns, "stop": sink.stop}


#: Floors (figure suffix, what it is).
FLOORS = (
    ("pil_to_arrays", "the client's conversion of the 32 PIL images to uint8 arrays (the in-process call pays it too)"),
    ("local_arrays", "the in-process call from those arrays (what the server computes once the arrays are decoded)"),
    (
        "tcp",
        "25 MB (the request's pixels) sent over one loopback TCP connection to another process, which reads "
        "them into a buffer (recv_into) and answers one byte",
    ),
    ("http_empty", "an HTTP round trip with no body (GET /health) to the same server, on the client's connection"),
    (
        "memfd_fresh",
        "a fresh memfd created, filled with the 25 MB (writev) and sealed (the shared memory path before the pool)",
    ),
    ("memfd_pooled", "the 25 MB copied into an already-populated shared memory segment (the pool's cost)"),
    (
        "shm_map",
        "the server's read-only mapping of a 25 MB segment with MAP_POPULATE (paid once per segment: the server keeps "
        "the mappings of reusable segments, so it is not in the sums)",
    ),
)


def bench_roundtrip(configs: dict[str, Path], repeats: int, anchors: argparse.Namespace) -> list[dict]:
    from anchor_servers import FlowGrpoServer, flow_grpo_client, flow_grpo_missing

    import rewardzoo
    from rewardzoo.serve.client import RewardClient
    from rewardzoo.transport.segments import shared_array

    samples = [rewardzoo.Sample(image=img) for img in textured(32, 512)]
    stacked = np.stack([np.asarray(s.image) for s in samples])
    shared = shared_array(stacked.shape)
    shared[:] = stacked
    in_shared = [rewardzoo.Sample(image=a) for a in shared]  # the caller's images already in shared memory
    figs = []
    for kind, reward in (("model", "laion_aesthetic"), ("jpeg", "jpeg_compressibility")):
        local = rewardzoo.build_processors(configs[kind])[0]
        server = Server(configs[kind])  # the default options (a lone request waits for nothing: see batching.py)
        skip = flow_grpo_missing(anchors.flow_grpo_src, anchors.flow_grpo_client_src, anchors.flask_path)
        anchor, stop_floors = None, None
        try:
            clients = {
                side: _forced(RewardClient(server.url, image_format=fmt), transport)
                for side, fmt, transport, _, _ in SIDES
            }
            want = local(samples).total
            fns = {"local": lambda: local(samples)}
            for side, client in clients.items():
                np.testing.assert_array_equal(client.score(samples).total, want)
                fns[side] = lambda client=client: client.score(samples)
            np.testing.assert_array_equal(clients["shm"].score(in_shared).total, want)
            fns["shm_shared"] = lambda: clients["shm"].score(in_shared)
            if kind == "model":
                floor = floors(samples, stacked, local, clients["raw"])
                fns.update(floor["fns"])
                stop_floors = floor["stop"]
            if skip is None:
                anchor = FlowGrpoServer(anchors.flow_grpo_src, configs[kind], anchors.flask_path)
                flow_fn = flow_grpo_client(anchors.flow_grpo_client_src)
                got = np.asarray(flow_fn(stacked, [""] * len(samples), [{}] * len(samples))[0], np.float32)
                if got.shape != want.shape or not np.isfinite(got).all():
                    raise RuntimeError(f"flow_grpo's server answered {got!r:.200}")
                fns["flow_grpo"] = lambda: flow_fn(stacked, [""] * len(samples), [{}] * len(samples))
            load = os.getloadavg()
            runs = interleaved_runs(fns, repeats=repeats)
            load_after = os.getloadavg()
            times = {k: statistics.median(v) for k, v in runs.items()}
            ratios = {k: statistics.median(a / b for a, b in zip(v, runs["local"])) for k, v in runs.items()}
            if "flow_grpo" in runs:  # ours against theirs, paired per repetition
                ratios["vs_flow_grpo"] = statistics.median(a / b for a, b in zip(runs["raw"], runs["flow_grpo"]))
            if "local_arrays" in runs:
                ratios["shm_shared_vs_arrays"] = statistics.median(
                    a / b for a, b in zip(runs["shm_shared"], runs["local_arrays"])
                )
            for client in clients.values():
                client.close()
        finally:
            server.stop()
            if stop_floors is not None:
                stop_floors()
            if anchor is not None:
                anchor.stop()
        name = f"`{reward}`{' (tiny open_clip)' if kind == 'model' else ''}"
        machine = f"load average {load[0]:.2f} before, {load_after[0]:.2f} after"
        for side, _, _, goal, what in SIDES:
            figs.append(
                figure(
                    f"serve.roundtrip.{kind}.{side}",
                    f"{name}: 32 images 512x512 in one request, {what}, through a server on this machine "
                    f"(default options) vs scored in the process from the "
                    f"PIL images (median of {repeats} paired ratios)",
                    measure(f"server ({side})", times[side] * 1e3, "ms"),
                    baseline=measure("in process", times["local"] * 1e3, "ms"),
                    ratio=ratios[side],
                    ratio_label="server / in process",
                    goal=goal if kind == "model" else None,
                    rewards=["remote"],
                    notes=machine,
                )
            )
        figs.append(
            figure(
                f"serve.roundtrip.{kind}.shm_shared",
                f"{name}: the same 32 images already in the caller's shared memory (`RewardClient.shared_array`: "
                "nothing copied on the client, the server reads them in place) through a server on this machine vs "
                f"scored in the process from the PIL images (median of {repeats} paired ratios)",
                measure("server (shm, shared array)", times["shm_shared"] * 1e3, "ms"),
                baseline=measure("in process", times["local"] * 1e3, "ms"),
                ratio=ratios["shm_shared"],
                ratio_label="server / in process",
                goal="<= 1.05x" if kind == "model" else None,
                rewards=["remote"],
                notes=machine
                + (
                    f"; against the in-process call from the same arrays "
                    f"({times['local_arrays'] * 1e3:.1f} ms): {ratios['shm_shared_vs_arrays']:.3g}x"
                    if "shm_shared_vs_arrays" in ratios
                    else ""
                ),
            )
        )
        if kind == "model":
            figs += floor_figures(times, ratios, repeats, machine)
        title = (
            f"{name}: the same 32 images 512x512, rewardzoo serve (raw, framed) vs flow_grpo's reward server "
            "(reward-server's app_deqa under gunicorn, 1 sync worker, its reward replaced by the same rewardzoo "
            "reward; flow_grpo's own deqa_score_remote client: JPEG + pickle over requests)"
        )
        if "flow_grpo" in times:
            figs.append(
                figure(
                    f"serve.roundtrip.{kind}.vs_flow_grpo",
                    title + f" (median of {repeats} paired runs)",
                    measure("rewardzoo serve (raw)", times["raw"] * 1e3, "ms"),
                    baseline=measure("flow_grpo reward server", times["flow_grpo"] * 1e3, "ms"),
                    ratio=ratios["vs_flow_grpo"],
                    ratio_label="rewardzoo / flow_grpo",
                    goal="< 1x" if kind == "model" else None,
                    rewards=["remote"],
                    notes=f"flow_grpo's side also vs in process: {ratios['flow_grpo']:.3g}x",
                )
            )
        else:
            figs.append(
                figure(
                    f"serve.roundtrip.{kind}.vs_flow_grpo",
                    title,
                    measure("rewardzoo serve (raw)", times["raw"] * 1e3, "ms"),
                    rewards=["remote"],
                    notes=f"skipped: {skip}",
                )
            )
    return figs


def floor_figures(times: dict[str, float], ratios: dict[str, float], repeats: int, machine: str) -> list[dict]:
    """The floors, each as a ratio to the in-process call, and the sums that bound the raw and shm sides."""
    figs = [
        figure(
            f"serve.roundtrip.floor.{key}",
            f"floor: {what}, vs `laion_aesthetic` (tiny open_clip) scoring the 32 images 512x512 in process from the "
            f"PIL images (median of {repeats} paired ratios, timed in the roundtrip's repetitions)",
            measure(key, times[key] * 1e3, "ms"),
            baseline=measure("in process", times["local"] * 1e3, "ms"),
            ratio=ratios[key],
            ratio_label="floor / in process",
            rewards=["remote"],
            notes=machine,
        )
        for key, what in FLOORS
    ]
    base = times["pil_to_arrays"] + times["local_arrays"] + times["http_empty"]
    bounds = {
        "raw": ("the raw side", base + times["tcp"], "PIL -> arrays + in process from arrays + empty HTTP + TCP"),
        "shm": (
            "the shm side",
            base + times["memfd_pooled"],
            "PIL -> arrays + in process from arrays + empty HTTP + pooled copy",
        ),
        "shm_shared": (
            "the shared-array side",
            times["local_arrays"] + times["http_empty"],
            "in process from arrays + empty HTTP",
        ),
    }
    for side, (what, total, parts) in bounds.items():
        figs.append(
            figure(
                f"serve.roundtrip.floor.sum_{side}",
                f"floor under {what}: the sum of its parts' medians ({parts}) vs in process from the PIL images",
                measure("sum of floors", total * 1e3, "ms"),
                baseline=measure("in process", times["local"] * 1e3, "ms"),
                ratio=total / times["local"],
                ratio_label="floor / in process",
                rewards=["remote"],
                notes=f"measured side: {ratios[side]:.3g}x; {machine}",
            )
        )
    return figs


def bench_batching(config: Path, kind: str, repeats: int, requests_per_client: int) -> dict:
    import rewardzoo
    from rewardzoo.serve.client import RewardClient

    clients, per_request = 8, 4
    images = textured(clients * per_request, 64, seed=1)
    batches = [
        [rewardzoo.Sample(image=img) for img in images[c * per_request : (c + 1) * per_request]] for c in range(clients)
    ]
    batched = Server(config, "--max-batch", "64", "--max-wait-ms", "10")
    single = Server(config, "--max-batch", str(per_request), "--max-wait-ms", "0")
    pools = {
        name: [RewardClient(s.url, image_format="raw") for _ in range(clients)]
        for name, s in (("single", single), ("batched", batched))
    }

    def burst(name: str) -> None:
        errors: list = []

        def run(c: int) -> None:
            try:
                for _ in range(requests_per_client):
                    pools[name][c].score(batches[c])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        if errors:
            raise errors[0]

    try:
        times, ratios = interleaved(
            {"single": lambda: burst("single"), "batched": lambda: burst("batched")}, repeats=repeats
        )
    finally:
        for pool in pools.values():
            for client in pool:
                client.close()
        batched.stop()
        single.stop()
    n = clients * per_request * requests_per_client
    what = (
        "`laion_aesthetic` on the tiny open_clip (CPU, one thread: compute grows with the batch)"
        if kind == "model"
        else "a reward whose call costs 20 ms whatever its size (`benchmarks/serve_rewards.py`, as a GPU model "
        "below saturation)"
    )
    return figure(
        f"serve.batching.{kind}",
        f"8 clients x {requests_per_client} requests of 4 images 64x64, {what}: throughput with server-side "
        f"batching (--max-batch 64 --max-wait-ms 10) vs each request alone (median of {repeats} paired ratios)",
        measure("batched", n / times["batched"], "samples/s"),
        baseline=measure("each request alone", n / times["single"], "samples/s"),
        ratio=1 / ratios["batched"],
        ratio_label="x the throughput",
        goal=">= 2x" if kind == "fixed" else None,
        rewards=["remote"],
    )


def bench_wire(repeats: int) -> list[dict]:
    import msgpack

    from rewardzoo.transport import wire

    img = textured(1, 512, seed=2)[0]
    arr = np.asarray(img)

    def roundtrip(image_format: str) -> None:
        body = msgpack.packb(
            {"protocol": 1, "samples": [{"image": wire.encode_image(arr, image_format)}]}, use_bin_type=True
        )
        wire.decode_request(body, "msgpack")

    def pickled() -> None:
        pickle.loads(pickle.dumps({"images": [arr]}))

    inner = 20
    times, ratios = interleaved(
        {
            "pickle": lambda: [pickled() for _ in range(inner)],
            "raw": lambda: [roundtrip("raw") for _ in range(inner)],
            "png": lambda: [roundtrip("png") for _ in range(inner)],
        },
        repeats=repeats,
    )
    figs = []
    for fmt in ("raw", "png"):
        figs.append(
            figure(
                f"serve.wire.{fmt}",
                f"encode + decode of one 512x512 RGB image: wire format ({fmt}, "
                "MessagePack, limits checked) vs pickle dumps + loads of the array",
                measure(f"wire {fmt}", times[fmt] / inner * 1e6, "us"),
                baseline=measure("pickle", times["pickle"] / inner * 1e6, "us"),
                ratio=ratios[fmt],
                ratio_label="wire / pickle",
                rewards=["remote"],
            )
        )
    return figs


def bench_codec(configs: dict[str, Path], repeats: int) -> list[dict]:
    """What PNG costs by itself: the 32 images encoded (the client's threads) and decoded (the server's threads),
    in this process, against scoring them in process: the floor under ``serve.roundtrip.*.png``."""
    import rewardzoo
    from rewardzoo.transport import wire

    samples = [rewardzoo.Sample(image=img) for img in textured(32, 512)]
    maps = [{"image": s.image} for s in samples]
    local = rewardzoo.build_processors(configs["model"])[0]

    def codec() -> None:
        data = wire.request_map(maps, image_format="png")
        wire.decode_request_map(data, threads=4)

    times, ratios = interleaved({"local": lambda: local(samples), "codec": codec}, repeats=repeats)
    return [
        figure(
            "serve.codec.png",
            "the PNG codec alone on the 32 images 512x512 of serve.roundtrip (encoded on the client's threads, "
            f"decoded on the server's, {os.cpu_count()} cores) vs `laion_aesthetic` (tiny open_clip) scoring them in "
            f"process (median of {repeats} paired ratios): the floor under serve.roundtrip.model.png",
            measure("PNG encode + decode", times["codec"] * 1e3, "ms"),
            baseline=measure("in process", times["local"] * 1e3, "ms"),
            ratio=ratios["codec"],
            ratio_label="codec / in process",
            rewards=["remote"],
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a check, not a measurement)")
    parser.add_argument(
        "--parts",
        default="wire,roundtrip,codec,batching",
        help="comma-separated parts to run (others keep their figures)",
    )
    parser.add_argument("--flow-grpo-src", type=Path, help="a yifan123/reward-server snapshot (flow_grpo's server)")
    parser.add_argument("--flow-grpo-client-src", type=Path, help="a yifan123/flow_grpo snapshot (its client)")
    parser.add_argument("--flask-path", type=Path, help="a folder holding flask and gunicorn (pip install --target)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    repeats = 3 if args.quick else 11
    parts = args.parts.split(",")
    if args.flask_path:
        sys.path.append(str(args.flask_path))
    figs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        configs = write_config(Path(tmp))
        if "wire" in parts:
            figs += bench_wire(repeats * 2)
        if "roundtrip" in parts:
            figs += bench_roundtrip(configs, repeats, args)
        if "codec" in parts:
            figs += bench_codec(configs, repeats)
        if "batching" in parts:
            for kind in ("fixed", "model"):
                figs.append(bench_batching(configs[kind], kind, repeats, 4 if args.quick else 10))
    print_figures([f for f in figs if f["baseline"] is not None])
    every = {"wire", "roundtrip", "codec", "batching"} <= set(parts)
    print(write_results(__file__, figs, parts=None if every else [f"serve.{p}" for p in parts]))


if __name__ == "__main__":
    main()
