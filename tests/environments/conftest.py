"""Worker tests: rewards in worker processes started from this interpreter (``environment: {python: ...}``)
and, for the clash test, from a venv built once per run (``REWARDZOO_TEST_ENVS`` keeps it across runs)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = "tests.environments.worker_rewards"
WORKER_MODULE = "rewardzoo.serve.worker"


def worker_pids() -> set[int]:
    """The worker processes of this process (read from /proc): its children running the worker module, or on Linux
    the worker each of those guardians forked (see rewardzoo.serve.worker)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if WORKER_MODULE.encode() in cmdline and fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    started = {pid for pid, parent in parents.items() if parent == os.getpid()}
    below = {pid for pid, parent in parents.items() if parent in started}
    return {pid for pid in started if not any(parents[w] == pid for w in below)} | below


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(autouse=True)
def _test_modules_on_the_worker_path(monkeypatch):
    """The workers import the test rewards from the checkout (``tests.environments.worker_rewards``)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


@pytest.fixture
def no_leftover_workers():
    """Fails the test when a worker it started is still running after it."""
    from rewardzoo.environments import workers

    before = worker_pids()
    yield
    workers.close_all()
    left = worker_pids() - before
    assert left == set(), f"worker processes left running: {left}"


def here_env(**extra) -> dict:
    return {"python": sys.executable, "start_timeout_s": 60, **extra}


needs_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
