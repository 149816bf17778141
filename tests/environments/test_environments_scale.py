"""Real-sized media through a worker environment (issue 47, item 2): the peak memory of the parent and its worker.

A fresh child process builds a reward with ``environment: {python: <this interpreter>}``, warms it up on tiny
media, resets its own and its worker's ``VmHWM`` (``/proc/PID/clear_refs``) and scores one 1280x720 clip of 60
frames (166 MB of 8-bit RGB, ``video_temporal_flickering``) or eight 3840x2160 PNG files (199 MB,
``jpeg_compressibility``). The parent decodes the media straight into shared memory segments whose descriptors it
passes to the worker (:mod:`rewardzoo.shared.sharedmem`): it holds them once, within 1.5x the decoded size (the
issue's rule; 2.05x / 2.0x before, when it copied the decoded arrays into the channel's buffer, 3.4x before that,
with PIL frames). The worker reads them there (the mapping counts in its RSS too) and makes its own uint8 tensor or
PIL images: within 2.25x (the video) and 2.5x (the images, 4 bytes a pixel in PIL). The scores are computed here
from the same files. Memory bounds, not timing thresholds; at most ~0.8 GB in all.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.video.media import write_ramp_clip

from .conftest import REPO, needs_linux

av = pytest.importorskip("av")

T, H, W = 60, 720, 1280
DECODED = T * H * W * 3
PARENT_BOUND = 1.5
WORKER_BOUND = 2.25
N_4K, H_4K, W_4K = 8, 2160, 3840
DECODED_4K = N_4K * H_4K * W_4K * 3
WORKER_BOUND_4K = 2.5

CHILD = r"""
import json, os, sys
from pathlib import Path
import numpy as np

def status(key, pid="self"):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

def reset_peak(pid="self"):
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")

def workers():
    parents = {}
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"rewardzoo.serve.worker" in cmd.read_bytes():
                stat = (cmd.parent / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(cmd.parent.name)] = int(stat[1])
        except OSError:
            pass
    mine = {p for p, parent in parents.items() if parent == os.getpid()}
    return mine | {p for p, parent in parents.items() if parent in mine}

from rewardzoo.core.processor import RewardProcessor
from rewardzoo.spec.sample import Sample

name, field, files = sys.argv[1], sys.argv[2], sys.argv[3:]
env = {"python": sys.executable, "start_timeout_s": 60}
proc = RewardProcessor([{"name": name, "device": "cpu", "environment": env}])
tiny = np.zeros((3, 64, 64, 3) if field == "video" else (64, 64, 3), np.uint8)
proc([Sample(**{field: tiny})])  # warm: the worker started, its imports done
pids = workers()
for pid in pids:
    reset_peak(pid)
worker_base = {pid: status("VmRSS", pid) for pid in pids}
reset_peak()
base = status("VmRSS")
scores = proc([Sample(**{field: f}) for f in files]).rewards[name].tolist()
parent = status("VmHWM") - base
worker = max(status("VmHWM", pid) - worker_base[pid] for pid in pids)
print(json.dumps({"parent": parent, "worker": worker, "scores": scores}))
"""


@pytest.fixture(scope="module")
def clip720(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("clip720") / "clip720.mp4"
    write_ramp_clip(path, T, H, W)
    return path


def streamed_flicker(path: Path) -> float:
    """VBench's temporal flickering: per-pair mean of ``|a - b|`` on 0-255 values, ``(255 - mean) / 255``."""
    maes, prev = [], None
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            cur = frame.to_ndarray(format="rgb24").astype(np.float64)
            if prev is not None:
                maes.append(np.abs(cur - prev).mean())
            prev = cur
    return (255.0 - float(np.mean(maes))) / 255.0


def peaks(folder: Path, name: str, field: str, files: list[Path]) -> dict:
    """The child's figures: the parent's and the worker's peak growth (bytes) and the scores."""
    done = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, name, field, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_linux
def test_a_720p_clip_through_a_worker_peaks_within_1_5x_in_the_parent_and_2_25x_in_the_worker(clip720):
    out = peaks(clip720.parent, "video_temporal_flickering", "video", [clip720])
    assert out["parent"] <= PARENT_BOUND * DECODED, f"the parent's peak grew {out['parent'] / DECODED:.2f}x the video"
    assert out["worker"] <= WORKER_BOUND * DECODED, f"the worker's peak grew {out['worker'] / DECODED:.2f}x the video"
    assert out["scores"][0] == pytest.approx(streamed_flicker(clip720), rel=1e-6)


def write_4k_pngs(folder: Path) -> list[Path]:
    """Eight 3840x2160 PNG files: ramps that differ per file (compressible, so quick to write)."""
    from PIL import Image

    y = np.arange(H_4K, dtype=np.int32)[:, None]
    x = np.arange(W_4K, dtype=np.int32)[None, :]
    paths = []
    for i in range(N_4K):
        rgb = np.stack(
            [
                np.broadcast_to((x + 7 * i) % 256, (H_4K, W_4K)),
                np.broadcast_to((y * (i + 1)) % 256, (H_4K, W_4K)),
                ((x // 3 + y // 5 + 11 * i) % 256),
            ],
            -1,
        ).astype(np.uint8)
        paths.append(folder / f"{i}.png")
        Image.fromarray(rgb).save(paths[-1], compress_level=1)
    return paths


@needs_linux
def test_a_batch_of_4k_png_files_through_a_worker_peaks_within_1_5x_in_the_parent(tmp_path):
    files = write_4k_pngs(tmp_path)
    out = peaks(tmp_path, "jpeg_compressibility", "image", files)
    assert out["parent"] <= PARENT_BOUND * DECODED_4K, (
        f"the parent's peak grew {out['parent'] / DECODED_4K:.2f}x the images"
    )
    assert out["worker"] <= WORKER_BOUND_4K * DECODED_4K, (
        f"the worker's peak grew {out['worker'] / DECODED_4K:.2f}x the images"
    )
    np.testing.assert_allclose(
        out["scores"], [-jpeg_bytes(f) / 1000 / 500 for f in files], rtol=1e-6
    )  # (float32 on the wire)


def jpeg_bytes(path: Path) -> int:
    """flow_grpo's compressibility measure: the size of the image saved as JPEG at quality 95."""
    from PIL import Image

    buf = io.BytesIO()
    with Image.open(path) as img:
        img.convert("RGB").save(buf, format="JPEG", quality=95)
    return buf.tell()
