"""Where ``--engine ray`` runs: a fresh local instance without an address, even beside a ``ray start`` cluster on
the same machine; the cluster named by ``RAY_ADDRESS`` (set by Ray jobs) or ``--address``.

This module starts its own ``ray start --head --block`` cluster (no module-wide ``ray.init``), stops it by
signalling that process (``ray stop`` would stop every Ray process on the machine) and puts back Ray's address
file, and runs the CLI in fresh processes, as a user would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'rewardzoo[ray]')")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "rewards:\n  - name: len\n    reward_model: tests.no_extras.rewards:PromptLength\n"
WHERE = re.compile(
    r"rewardzoo: scored 3 rows \(0 resumed\) in [\d.]+ s, [\d.]+ rows/s, on (.+?)"
    r"(?: \([\d.]+ s of it in ray.init and ray.shutdown\))?$"
)


@pytest.fixture(scope="module")
def ray_start_cluster(tmp_path_factory):
    """A `ray start` head node on this machine; yields its address."""
    ray_cli = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    log = tmp_path_factory.mktemp("ray_start") / "ray_start.log"
    # token authentication (on by default for `ray start` in Ray 2.60) is off: a first `ray start` on a machine
    # without ~/.ray/auth_token made the joining job's actors fail to start; where a job runs is the point here
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    with log.open("w") as fh:
        head = subprocess.Popen(
            [ray_cli, "start", "--head", "--block", "--num-cpus", "1", "--port", "0", "--include-dashboard", "false"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
    address_file = Path("/tmp/ray/ray_current_cluster")  # where `ray start` tells ray.init() whom to join
    before = address_file.read_text() if address_file.exists() else None
    deadline = time.monotonic() + 60
    address = None
    while time.monotonic() < deadline and head.poll() is None:
        if address_file.exists() and "ray start --address=" in log.read_text():
            address = re.search(r"ray start --address='([^']+)'", log.read_text())[1]
            break
        time.sleep(0.2)
    try:
        assert address, f"`ray start` did not come up: {log.read_text()[-2000:]}"
        yield address
    finally:
        head.send_signal(signal.SIGINT)  # --block: the CLI stops the processes it started
        try:
            head.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        # the stopped cluster leaves its address behind: a later plain ray.init(num_cpus=...) would try to join it
        if before is None:
            address_file.unlink(missing_ok=True)
        else:
            address_file.write_text(before)


def _score_in_a_fresh_process(tmp_path: Path, *extra: str, ray_address: str | None = None) -> tuple[str, Path]:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"prompt": "p" * i}) + "\n" for i in range(3)))
    config = tmp_path / "cfg.yaml"
    config.write_text(CONFIG)
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rewardzoo.cli",
            "score",
            str(config),
            "-i",
            str(manifest),
            "-o",
            str(out),
            "-q",
            "--engine",
            "ray",
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    where = next((m[1] for m in map(WHERE.match, done.stderr.splitlines()) if m), None)
    assert where, done.stderr[-3000:]
    return where, out


def _local(tmp_path: Path) -> bytes:
    from rewardzoo.cli import main

    assert (
        main(
            [
                "score",
                str(tmp_path / "cfg.yaml"),
                "-i",
                str(tmp_path / "m.jsonl"),
                "-o",
                str(tmp_path / "local.jsonl"),
                "-q",
            ]
        )
        == 0
    )
    return (tmp_path / "local.jsonl").read_bytes()


def test_without_an_address_a_fresh_instance_starts_beside_a_ray_start_cluster(ray_start_cluster, tmp_path):
    # ray.init() alone would join the `ray start` cluster and refuse num_cpus
    where, out = _score_in_a_fresh_process(tmp_path)
    assert where == f"a local Ray instance of {os.cpu_count()} CPUs"
    assert out.read_bytes() == _local(tmp_path)


@pytest.mark.parametrize("how", ["RAY_ADDRESS", "--address"])
def test_the_named_cluster_is_joined(ray_start_cluster, tmp_path, how):
    extra = ("--address", ray_start_cluster) if how == "--address" else ()
    where, out = _score_in_a_fresh_process(
        tmp_path, *extra, ray_address=ray_start_cluster if how == "RAY_ADDRESS" else None
    )
    assert where == f"the Ray cluster at {ray_start_cluster}"
    assert out.read_bytes() == _local(tmp_path)
