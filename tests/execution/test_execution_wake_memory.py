"""A wake reads a checkpoint back one tensor at a time and lets each tensor's file pages go (issue 47): a bfloat16
file waking as float32 weights peaks at the float32 weights, not at 1.5x them (the whole file's pages mapped
beside the copies, as ``sequence_reward`` on Llama-3.2-1B did).

In a child process (its own ``VmHWM``, reset through ``/proc/self/clear_refs``): 8 bfloat16 tensors of 4M elements
(64 MB of file), bound as float32 weights (128 MB) and read back with :func:`read_entries`; the peak growth stays
within 1.15x the float32 bytes (1.5x before), and the tensors equal the file's values cast to float32.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

REPO = Path(__file__).resolve().parents[2]
BOUND = 1.15

CHILD = r"""
import json, sys
import torch
from safetensors.torch import save_file
from rewardzoo.core import weight_files

path = sys.argv[1]
g = torch.Generator().manual_seed(0)
save_file({f"w{i}": torch.randn(2048, 2048, generator=g).bfloat16() for i in range(8)}, path)
live = {key: value.float() for key, value in weight_files.read(path).items()}  # the model's float32 weights
bound = weight_files.bind(live.values(), [path])
entries = {key: bound[id(t)] for key, t in live.items()}
want = {key: t.clone() for key, t in live.items()}
del live, bound

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
base = status("VmRSS")
out, renewed = weight_files.read_entries(entries, {key: torch.float32 for key in entries})
grew = status("VmHWM") - base
same = all(weight_files.same_bits(out[k], want[k]) for k in want)
print(json.dumps({"grew": grew, "weights": sum(t.numel() * 4 for t in want.values()), "same": same,
                  "renewed": len(renewed)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_bfloat16_checkpoint_wakes_as_float32_within_1_15x_the_float32_weights(tmp_path):
    done = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, str(tmp_path / "w.safetensors")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "2"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["same"] and out["renewed"] == 0
    assert out["grew"] <= BOUND * out["weights"], f"the wake grew {out['grew'] / out['weights']:.2f}x the weights"
