"""A 720p video through a worker environment (issue 47, item 2): the peak memory of the parent and of its worker.

A fresh child process builds ``video_temporal_flickering`` with ``environment: {python: <this interpreter>}``,
warms it up on a tiny clip, resets its own and its worker's ``VmHWM`` (``/proc/PID/clear_refs``) and scores one
1280x720 clip of 60 frames (166 MB of 8-bit RGB). The parent decodes the file and copies the frames into the
shared memory it passes to the worker; the worker reads them there (the mapping counts in its RSS too) and makes
its own uint8 tensor. Each side stays within 2.25x the decoded size (before: the parent held PIL frames at 4 bytes
a pixel and a stacked copy beside the shared memory, 3.4x; the worker a per-frame list beside its stack, 3.0x).
The score is VBench's formula computed here, streaming the same file. A memory bound, not a timing threshold;
at most ~0.6 GB in all.
"""

from __future__ import annotations

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
BOUND = 2.25

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

env = {"python": sys.executable, "start_timeout_s": 60}
proc = RewardProcessor([{"name": "video_temporal_flickering", "device": "cpu", "environment": env}])
proc([Sample(video=np.zeros((3, 64, 64, 3), np.uint8))])  # warm: the worker started, its imports done
pids = workers()
for pid in pids:
    reset_peak(pid)
worker_base = {pid: status("VmRSS", pid) for pid in pids}
reset_peak()
base = status("VmRSS")
score = float(proc([Sample(video=sys.argv[1])]).rewards["video_temporal_flickering"][0])
parent = status("VmHWM") - base
worker = max(status("VmHWM", pid) - worker_base[pid] for pid in pids)
print(json.dumps({"parent": parent, "worker": worker, "score": score}))
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


@needs_linux
def test_a_720p_clip_through_a_worker_peaks_within_2_25x_in_the_parent_and_in_the_worker(clip720):
    done = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, str(clip720)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=clip720.parent,
        env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["parent"] <= BOUND * DECODED, f"the parent's peak grew {out['parent'] / DECODED:.2f}x the video"
    assert out["worker"] <= BOUND * DECODED, f"the worker's peak grew {out['worker'] / DECODED:.2f}x the video"
    assert out["score"] == pytest.approx(streamed_flicker(clip720), rel=1e-6)
