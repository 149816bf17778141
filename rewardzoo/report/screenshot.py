"""Render a report to PNG with headless Chromium, recording its console messages and network requests.

Used by the report's browser test and by ``scripts/make_report_screenshot.py``. Chromium logs every
console message (errors included) as ``INFO:CONSOLE`` at ``--v=0``; a NetLog lists every request it makes.
A report has no script and references nothing, so any console message or page request is a fault.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
#: Hosts Chromium itself contacts (updates, time, accounts) whatever the page; not the page's requests.
BROWSER_HOSTS = re.compile(r"^https?://([a-z0-9-]+\.)*(google\.com|googleapis\.com|gvt1\.com|gstatic\.com)(:\d+)?/")
_CONSOLE = re.compile(r":CONSOLE(?:\(\d+\))?\]\s*(.*)|(Uncaught .*)")


@dataclass
class Rendered:
    """What a render produced: the PNG, the page's console messages and its own network requests."""

    png: Path
    console: list[str]
    requests: list[str]
    stderr: str


def render_png(
    html: str | os.PathLike,
    png: str | os.PathLike,
    *,
    width: int = 1280,
    height: int = 2000,
    timeout: float = 120,
    chromium: str | os.PathLike = CHROMIUM,
) -> Rendered:
    """Screenshot ``html`` into ``png`` (``width`` x ``height`` CSS pixels); raises ``RuntimeError`` when
    Chromium fails or outlives ``timeout`` seconds (its whole process group is killed)."""
    html, png = Path(html).resolve(), Path(png).resolve()
    with tempfile.TemporaryDirectory(prefix="rewardzoo-chromium-") as profile:
        netlog = Path(profile) / "netlog.json"
        cmd = [
            os.fspath(chromium),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            f"--log-net-log={netlog}",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
            html.as_uri(),
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RuntimeError(f"chromium did not finish rendering '{html}' within {timeout:g} s") from None
        if proc.returncode != 0 or not png.is_file():
            raise RuntimeError(f"chromium failed on '{html}' (exit {proc.returncode}): {err[-2000:]}")
        requests = _requests(netlog.read_text(encoding="utf-8", errors="replace") if netlog.is_file() else "")
    console = [m.group(1) or m.group(2) for m in map(_CONSOLE.search, err.splitlines()) if m]
    return Rendered(png, console, requests, out + err)


def _requests(netlog: str) -> list[str]:
    """The http(s)/ws URLs of a NetLog, less the browser's own service hosts."""
    urls = set(re.findall(r'"url"\s*:\s*"((?:https?|wss?|ftp)://[^"]*)"', netlog))
    try:  # the text search above already finds them; parsing is a cross-check when the log is complete
        for event in json.loads(netlog).get("events", []):
            url = (event.get("params") or {}).get("url")
            if isinstance(url, str) and re.match(r"(https?|wss?|ftp)://", url):
                urls.add(url)
    except (json.JSONDecodeError, AttributeError):
        pass
    return sorted(u for u in urls if not BROWSER_HOSTS.match(u))
