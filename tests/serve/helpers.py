"""Servers started by the tests: ``rewardzoo serve`` in a subprocess on a free 127.0.0.1 port, every wait bounded."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The longest a server may take to load its models (tiny models; torch and transformers imports included).
READY_WITHIN_S = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        **extra,
    }
    return env


class Server:
    """``rewardzoo serve CONFIG --port P ...`` as a child process; ``url``; ``stop()`` ends it (by its pid)."""

    def __init__(
        self,
        config: Path,
        *args: str,
        port: int | None = None,
        env: dict[str, str] | None = None,
        log: Path | None = None,
    ) -> None:
        self.config, self.args, self.port = config, args, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env or environment()
        self.log = log or config.with_suffix(f".{self.port}.log")
        self.proc: subprocess.Popen | None = None

    def start(self, wait: bool = True) -> Server:
        self._log = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rewardzoo.cli", "serve", str(self.config), "--port", str(self.port), *self.args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=str(ROOT),
        )
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, within: float = READY_WITHIN_S) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}): {self.output()[-3000:]}")
            try:
                if get(self.url, "/ready")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the server was not ready within {within} s: {self.output()[-3000:]}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        if getattr(self, "_log", None) is not None:
            self._log.close()

    def metrics(self, token: str | None = None) -> dict[str, float]:
        return parse_metrics(get(self.url, "/metrics", token=token)[1].decode())


def request(
    url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 60.0
) -> tuple[int, bytes, dict[str, str]]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read(), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def get(url: str, path: str, token: str | None = None) -> tuple[int, bytes]:
    status, body, _ = request(
        url, "GET", path, headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=10
    )
    return status, body


def parse_metrics(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def error_of(body: bytes) -> dict:
    return json.loads(body)["error"]
