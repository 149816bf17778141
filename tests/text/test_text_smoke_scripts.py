"""The smoke scripts run as users run them (``--device auto``) and report passing checks with sane numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def run(script: str) -> dict:
    # one thread: the tiny models gain nothing from more, and a busy machine makes OpenMP spin
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPTS / script), "--device", "auto"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_tiny_reward_smoke():
    summary = run("tiny_reward_smoke.py")
    assert summary["ok"] and all(summary["checks"].values())
    assert summary["scalar_loss"][1] < summary["scalar_loss"][0]
    assert summary["binned_loss"][1] < summary["binned_loss"][0]
    assert summary["logits_shape"] == [6, 5]
    assert len(summary["sampled_ids"]) == 6 and all(0 <= i < 5 for i in summary["sampled_ids"])


def test_tiny_implicit_prm_smoke():
    summary = run("tiny_implicit_prm_smoke.py")
    assert summary["ok"] and all(summary["checks"].values())
    assert summary["dense_shape"] == [4, 9]
    start, end = summary["outcome_label_1"]
    assert all(b > a for a, b in zip(start, end))
    start, end = summary["outcome_label_0"]
    assert all(b < a for a, b in zip(start, end))
