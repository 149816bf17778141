"""The anchors' reward servers, run from their own fetched snapshots for the serving benchmarks.

Nothing of their code is copied here: a snapshot is a folder passed by path, imported as it is.

- flow_grpo's reward server (``yifan123/reward-server``, what flow_grpo's ``deqa_score_remote`` / ``geneval_score``
  call): ``app_deqa.py``, a Flask app under gunicorn (sync workers) whose one route ``pickle.loads`` a body of JPEG
  bytes, opens them with PIL and calls ``INFERENCE_FN(images)``. Its model loader (``reward_server.deqa``, a CUDA
  DeQA model) is the one piece replaced: a stub package of the same name, written at run time, whose
  ``load_deqascore()`` returns the rewardzoo reward of the benchmark's config (so both servers score with the same
  reward). Its client is flow_grpo's own ``deqa_score_remote`` (``flow_grpo/rewards.py`` of a flow_grpo snapshot:
  JPEG per image, ``pickle.dumps``, ``requests`` session), which posts to 127.0.0.1:18086.
- Flask and gunicorn are not rewardzoo dependencies: pass ``--flask-path`` (a folder holding them, e.g.
  ``pip install --target DIR flask gunicorn``). Without a snapshot or without Flask the row is recorded as skipped.
"""

from __future__ import annotations

import http.client
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FLOW_GRPO_PORT = 18086  # flow_grpo's deqa_score_remote posts here

STUB = '''"""Stub of reward-server's reward_server.deqa: the benchmark's rewardzoo reward as INFERENCE_FN."""
import os

import rewardzoo


def load_deqascore():
    processor = rewardzoo.build_processors(os.environ["RZ_ANCHOR_CONFIG"])[0]

    def compute(images):
        return processor([rewardzoo.Sample(image=img) for img in images]).total.tolist()

    return compute
'''


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds: past connections' TIME_WAIT
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def flow_grpo_missing(server_src: Path | None, client_src: Path | None, flask_path: Path | None) -> str | None:
    """None when flow_grpo's server and client can run here, else why not (the row's skip reason)."""
    if server_src is None or not (server_src / "app_deqa.py").is_file():
        return "no reward-server snapshot (--flow-grpo-src, a folder holding app_deqa.py)"
    if client_src is None or not (client_src / "flow_grpo" / "rewards.py").is_file():
        return "no flow_grpo snapshot (--flow-grpo-client-src, a folder holding flow_grpo/rewards.py)"
    paths = [str(flask_path)] if flask_path else []
    for name in ("flask", "gunicorn"):
        if importlib.util.find_spec(name) is None and not any((Path(p) / name).is_dir() for p in paths):
            return f"{name} is not installed (pass --flask-path DIR)"
    if not port_free(FLOW_GRPO_PORT):
        return f"port {FLOW_GRPO_PORT} (flow_grpo's client's fixed address) is taken"
    return None


class FlowGrpoServer:
    """reward-server's ``app_deqa`` under gunicorn (``workers`` sync workers) on 127.0.0.1:18086, scoring with the
    reward of ``config``."""

    def __init__(self, server_src: Path, config: Path, flask_path: Path | None, workers: int = 1) -> None:
        self.stub = tempfile.TemporaryDirectory()
        package = Path(self.stub.name) / "reward_server"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "deqa.py").write_text(STUB)
        path = [self.stub.name, str(server_src), str(ROOT), str(ROOT / "benchmarks")]
        path += [str(flask_path)] if flask_path else []
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(path),
            "RZ_ANCHOR_CONFIG": str(config),
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
        }
        self.log = tempfile.TemporaryFile()
        cmd = [sys.executable, "-m", "gunicorn", "-w", str(workers), "-b", f"127.0.0.1:{FLOW_GRPO_PORT}"]
        cmd += ["--timeout", "300", "app_deqa:create_app()"]
        self.proc = subprocess.Popen(cmd, cwd=server_src, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{FLOW_GRPO_PORT}"
        self._wait()

    def _wait(self) -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"flow_grpo's server exited: {self.log.read().decode(errors='replace')[-2000:]}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", FLOW_GRPO_PORT, timeout=2)
                conn.request("GET", "/")  # the route takes POST only: 405 once the app is up
                if conn.getresponse().status in (405, 200):
                    return
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError("flow_grpo's server not up within 180 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        self.stub.cleanup()


def flow_grpo_client(client_src: Path) -> Any:
    """flow_grpo's own ``deqa_score_remote(device)`` reward function (``fn(images, prompts, metadata)`` with a
    (B, H, W, 3) uint8 array or a (B, 3, H, W) float tensor), loaded from its snapshot's ``flow_grpo/rewards.py``."""
    spec = importlib.util.spec_from_file_location("flow_grpo_rewards", client_src / "flow_grpo" / "rewards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.deqa_score_remote("cpu")
