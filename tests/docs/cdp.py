"""Drive headless Chromium over the DevTools protocol on a pipe (``--remote-debugging-pipe``), with the
standard library only: open a page, wait for a condition in it, read its DOM, take a screenshot, and record
every request it makes and every console error it logs."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from rewardzoo.report.screenshot import CHROMIUM


class Browser:
    """One headless Chromium with one page; ``requests`` and ``errors`` fill in as the page loads."""

    def __init__(self, width: int = 1280, height: int = 1600, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.requests: list[str] = []
        self.errors: list[str] = []
        self._profile = tempfile.TemporaryDirectory(prefix="rewardzoo-docs-chromium-")
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Chromium reads commands on fd 3 and writes answers on fd 4: move the ends there in the child
        high_r, high_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (to_child_r, from_child_w))

        def fds() -> None:
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        cmd = [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            f"--user-data-dir={self._profile.name}",
            f"--window-size={width},{height}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        self._proc = subprocess.Popen(
            cmd,
            preexec_fn=fds,
            pass_fds=(3, 4),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for fd in (to_child_r, from_child_w, high_r, high_w):
            os.close(fd)
        self._out = os.fdopen(to_child_w, "wb", buffering=0)
        self._in = os.fdopen(from_child_r, "rb", buffering=0)
        self._buf = b""
        self._id = 0
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self._call(f"{domain}.enable", session=True)

    # ------------------------------------------------------------------ protocol
    def _read(self) -> dict:
        while b"\0" not in self._buf:
            chunk = self._in.read(1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params") or {}
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            self.errors.append(json.dumps(params.get("exceptionDetails", {}))[:500])
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(json.dumps(params.get("args", []))[:500])
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(params["entry"].get("text", "") + " " + params["entry"].get("url", ""))

    def _call(self, method: str, params: dict | None = None, *, session: bool = False) -> dict:
        self._id += 1
        msg: dict = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self._session
        self._out.write(json.dumps(msg).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._event(answer)

    # ------------------------------------------------------------------ page
    def evaluate(self, expression: str):
        result = self._call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str = "document.readyState === 'complete'") -> None:
        """Navigate to ``url`` and wait until the JavaScript expression ``ready`` is true."""
        self._call("Page.navigate", {"url": url}, session=True)
        self.wait(ready)

    def wait(self, expression: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not self.evaluate(f"!!({expression})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"not true within {self.timeout:g} s: {expression}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> Path:
        data = self._call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self._out.close()
            self._proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        self._in.close()
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
