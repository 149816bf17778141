"""What a worker's reward starts dies with the worker: on close, on reset (restart) and when the parent is
SIGKILLed; stale private folders of dead processes are cleaned; the channel is a Unix socket even under a long
TMPDIR, and loopback TCP is said, never silent."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from rewardzoo.core.loader import RewardLoader
from rewardzoo.core.resolve import load_config
from rewardzoo.environments import workers

from .conftest import HERE, REPO, alive, gone_within, here_env, needs_linux

pytestmark = [needs_linux, pytest.mark.usefixtures("no_leftover_workers")]


def _entry(pidfile, new_session=False):
    return {
        "name": "child",
        "reward_model": f"{HERE}:StartsChild",
        "device": "cpu",
        "kwargs": {"pidfile": str(pidfile), "new_session": new_session},
        "environment": here_env(),
    }


def _child(pidfile) -> int:
    pid = int(pidfile.read_text())
    assert alive(pid)
    return pid


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_child_the_reward_started_dies_when_the_worker_is_closed_or_reset(tmp_path, how):
    loader = RewardLoader()
    reward = loader.load(load_config({"rewards": [_entry(tmp_path / "pid")]}).rewards[0])
    assert list(reward(prompt=["abc"]).rewards) == [3.0]
    child = _child(tmp_path / "pid")
    if how == "close":
        loader.close()
    else:
        (worker,) = [w for w in workers._LIVE if w.pid is not None]
        worker.reset()
    try:
        assert gone_within(child, 10), "the reward's child outlived its worker"
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
        loader.close()


@pytest.mark.parametrize("how", ["close", "worker_sigkilled"])
def test_a_child_in_its_own_session_dies_with_the_worker_however_it_ends(tmp_path, how):
    """A child that left the worker's session is out of reach of its process group: it was reparented to PID 1
    and lived on. The worker's guardian (a child subreaper) ends it, also when the worker is SIGKILLed."""
    loader = RewardLoader()
    reward = loader.load(load_config({"rewards": [_entry(tmp_path / "pid", new_session=True)]}).rewards[0])
    assert list(reward(prompt=["abcd"]).rewards) == [4.0]
    child = _child(tmp_path / "pid")
    assert os.getsid(child) == child  # its own session
    try:
        if how == "close":
            loader.close()
        else:
            (worker,) = [w for w in workers._LIVE if w.pid is not None]
            os.kill(worker.pid, signal.SIGKILL)  # what the OOM killer does
        assert gone_within(child, 10), "the reward's child in its own session outlived its worker"
        if how == "worker_sigkilled":  # the next call finds it dead and starts a new one
            assert list(reward(prompt=["ab"]).rewards) == [2.0] and _child(tmp_path / "pid") != child
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
        loader.close()
    assert not alive(int((tmp_path / "pid").read_text()))


def test_a_child_the_reward_started_dies_when_the_parent_is_sigkilled(tmp_path):
    pidfile = tmp_path / "pid"
    script = textwrap.dedent(f"""
        import sys, time
        from rewardzoo.core.loader import RewardLoader
        from rewardzoo.core.resolve import load_config
        entry = {_entry(pidfile)!r}
        RewardLoader().load(load_config({{"rewards": [entry]}}).rewards[0])
        print("ready", flush=True)
        time.sleep(120)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env, cwd=REPO)
    try:
        assert parent.stdout.readline().strip() == b"ready"
        child = _child(pidfile)
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        assert gone_within(child, 15), "the reward's child outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if pidfile.exists() and alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_stale_private_folders_of_dead_processes_are_cleaned_only_those(tmp_path, monkeypatch):
    monkeypatch.setattr(workers.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(workers, "_SHORT_BASES", ())
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"rewardzoo-worker-{dead.pid}-abc"
    live = tmp_path / f"rewardzoo-worker-{os.getpid()}-abc"
    unnamed = tmp_path / "rewardzoo-worker-xyz"
    other = tmp_path / f"someone-else-{dead.pid}-abc"
    for folder in (stale, live, unnamed, other):
        folder.mkdir()
        (folder / "stderr.log").write_text("x")
    assert workers.clean_stale_folders() == [stale]
    assert not stale.exists() and live.exists() and unnamed.exists() and other.exists()


def test_a_long_tmpdir_still_gives_a_private_unix_socket(tmp_path, monkeypatch):
    long = tmp_path / ("d" * 120)
    long.mkdir()
    monkeypatch.setattr(workers.tempfile, "tempdir", str(long))
    folder = workers._private_folder()
    try:
        assert len(str(folder / "worker.sock")) < 100 and (folder.stat().st_mode & 0o777) == 0o700
        listener, address = workers._listen(folder)
        listener.close()
        assert not address.startswith("tcp:") and address.startswith(str(folder))
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def test_loopback_tcp_is_said_not_silent(tmp_path, caplog):
    long = tmp_path / ("d" * 120)
    long.mkdir()
    with caplog.at_level(logging.WARNING, logger="rewardzoo.environments"):
        listener, address = workers._listen(long)
    listener.close()
    assert address.startswith("tcp:127.0.0.1:")
    assert any("loopback TCP" in r.getMessage() and "too long" in r.getMessage() for r in caplog.records)


def test_a_worker_under_a_long_tmpdir_scores_over_a_unix_socket(tmp_path, monkeypatch):
    long = tmp_path / ("d" * 120)
    long.mkdir()
    monkeypatch.setattr(workers.tempfile, "tempdir", str(long))
    loader = RewardLoader()
    try:
        reward = loader.load(
            load_config(
                {
                    "rewards": [
                        {"name": "len", "reward_model": f"{HERE}:Length", "device": "cpu", "environment": here_env()}
                    ]
                }
            ).rewards[0]
        )
        assert list(reward(completion=["ab"]).rewards) == [2.0]
        (worker,) = [w for w in workers._LIVE if w.pid is not None]
        import socket

        assert worker._channel.sock.family == socket.AF_UNIX
    finally:
        loader.close()
