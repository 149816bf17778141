"""The smoke scripts run as users run them (``--device auto``) and report passing checks with sane numbers, on the
built-in transformer and on a palm-rlhf-pytorch PaLM (``--backbone palm``, skipped when palm is not installed)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
BACKBONES = [
    "tiny",
    pytest.param(
        "palm",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("palm_rlhf_pytorch") is None, reason="palm-rlhf-pytorch is not installed"
        ),
    ),
]


def run(script: str, backbone: str) -> dict:
    # one thread: the tiny models gain nothing from more, and a busy machine makes OpenMP spin
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / script), "--device", "auto", "--backbone", backbone],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["backbone"] == backbone
    return summary


@pytest.mark.parametrize("backbone", BACKBONES)
def test_tiny_reward_smoke(backbone):
    summary = run("tiny_reward_smoke.py", backbone)
    assert summary["ok"] and all(summary["checks"].values())
    assert summary["scalar_loss"][1] < summary["scalar_loss"][0]
    assert summary["binned_loss"][1] < summary["binned_loss"][0]
    assert summary["logits_shape"] == [6, 5]
    assert len(summary["sampled_ids"]) == 6 and all(0 <= i < 5 for i in summary["sampled_ids"])


@pytest.mark.parametrize("backbone", BACKBONES)
def test_tiny_implicit_prm_smoke(backbone):
    summary = run("tiny_implicit_prm_smoke.py", backbone)
    assert summary["ok"] and all(summary["checks"].values())
    assert summary["dense_shape"] == [4, 9]
    start, end = summary["outcome_label_1"]
    assert all(b > a for a, b in zip(start, end))
    start, end = summary["outcome_label_0"]
    assert all(b < a for a, b in zip(start, end))
