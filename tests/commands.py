"""The system commands some tests need. ``scripts/test`` installs them (as root: Chromium for the report's and
the site's browser tests, espeak-ng for speech), so a test that needs one fails when it is missing, naming the
package to install; it never skips (a skip would hide that the check did not run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rewardzoo.report.screenshot import CHROMIUM


def require_chromium() -> Path:
    """Debian's Chromium, which the screenshot and the site's tests drive; a failure when it is missing."""
    if not CHROMIUM.is_file():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; scripts/test does)"
        )
    return CHROMIUM


def require_command(name: str, package: str) -> str:
    """The path of the command ``name``; a failure naming the Debian ``package`` when it is not on PATH."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: install it (apt-get install -y {package}; scripts/test does)")
    return path
