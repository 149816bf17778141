"""Serving benchmarks: what a round trip through ``rewardzoo serve`` costs, what server-side batching gains,
and what the safe wire format costs against pickle.

- roundtrip: one request of 32 images 512x512 scored by a server on this machine (``RewardClient``, PNG and
  raw uint8) against the same batch scored in the process, for a model reward (``laion_aesthetic`` on the
  tiny random open_clip of ``rewardzoo.testing``; the tiny model makes the overhead look large: a real
  ViT-L/14 costs ~100x more per image while the transfer costs the same) and for ``jpeg_compressibility``.
  Both sides use one torch thread.
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
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from results_io import figure, measure, print_figures, write_results
from timing import interleaved

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


def bench_roundtrip(configs: dict[str, Path], repeats: int) -> list[dict]:
    import rewardzoo
    from rewardzoo.serve.client import RewardClient

    samples = [rewardzoo.Sample(image=img) for img in textured(32, 512)]
    figs = []
    for kind, reward in (("model", "laion_aesthetic"), ("jpeg", "jpeg_compressibility")):
        local = rewardzoo.build_processors(configs[kind])[0]
        server = Server(configs[kind])
        try:
            png, raw = RewardClient(server.url, image_format="png"), RewardClient(server.url, image_format="raw")
            want = local(samples).total
            np.testing.assert_array_equal(png.score(samples).total, want)
            np.testing.assert_array_equal(raw.score(samples).total, want)
            times, ratios = interleaved(
                {"local": lambda: local(samples), "png": lambda: png.score(samples), "raw": lambda: raw.score(samples)},
                repeats=repeats,
            )
            png.close()
            raw.close()
        finally:
            server.stop()
        for fmt in ("png", "raw"):
            goal = "<= 1.15x" if kind == "model" else None
            figs.append(
                figure(
                    f"serve.roundtrip.{kind}.{fmt}",
                    f"`{reward}`{' (tiny open_clip)' if kind == 'model' else ''}: 32 images 512x512 in one request "
                    f"({fmt.upper()} images) through a server on this machine vs scored in the process "
                    f"(median of {repeats} paired ratios)",
                    measure(f"server ({fmt})", times[fmt] * 1e3, "ms"),
                    baseline=measure("in process", times["local"] * 1e3, "ms"),
                    ratio=ratios[fmt],
                    ratio_label="server / in process",
                    goal=goal,
                    rewards=["remote"],
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a check, not a measurement)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    repeats = 3 if args.quick else 11
    with tempfile.TemporaryDirectory() as tmp:
        configs = write_config(Path(tmp))
        figs = bench_wire(repeats * 2)
        figs += bench_roundtrip(configs, repeats)
        for kind in ("fixed", "model"):
            figs.append(bench_batching(configs[kind], kind, repeats, 4 if args.quick else 10))
    print_figures(figs)
    print(write_results(__file__, figs))


if __name__ == "__main__":
    main()
