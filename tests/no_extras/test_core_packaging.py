"""The wheel users install holds every file git tracks under rewardzoo/, and packages are found, not listed.

A wheel is built (non-editable, as ``pip install .`` builds it) from a copy of the tracked files, and
``scripts/check_dist.py`` compares it with ``git ls-files rewardzoo/``; the check is shown to fail on a wheel that
lacks a module. ``scripts/test`` runs the same check on the release build, with the sdist and the metadata.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK_DIST = ROOT / "scripts" / "check_dist.py"


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout (the wheel is compared with `git ls-files`)")
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True, text=True)
    return [p for p in out.stdout.split("\0") if p and (ROOT / p).is_file()]


def _build_wheel(src: Path, out: Path) -> Path:
    major = int(importlib.metadata.version("setuptools").split(".")[0])
    if major < 77:
        pytest.skip(f"setuptools {major} cannot build this pyproject (an SPDX licence needs setuptools>=77)")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
    )
    return next(out.glob("rewardzoo-*.whl"))


def _copy(files: list[str], dest: Path) -> Path:
    """The tracked files alone: no build/ folder or egg-info of the checkout mixes in."""
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def _check_dist(dist: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK_DIST), str(dist)], capture_output=True, text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[list[str], Path]:
    tracked = _tracked()
    src = _copy(tracked, tmp_path_factory.mktemp("src"))
    return tracked, _build_wheel(src, tmp_path_factory.mktemp("dist"))


def test_the_wheel_holds_every_tracked_file_under_the_package(built):
    tracked, wheel = built
    done = _check_dist(wheel.parent)
    assert done.returncode == 0, done.stderr
    names = set(zipfile.ZipFile(wheel).namelist())
    in_package = [p for p in tracked if p.startswith("rewardzoo/")]
    # the modules the first wheel lacked, and the package data
    for path in (
        "rewardzoo/report/__init__.py",
        "rewardzoo/serve/app.py",
        "rewardzoo/ray/engine.py",
        "rewardzoo/rewards/vlm/vqascore.py",
        "rewardzoo/model_cards/clip_score.md",
        "rewardzoo/configs/demo.yaml",
    ):
        assert path in names
    assert set(in_package) <= names
    assert not any(n.startswith(("tests/", "benchmarks/", "scripts/")) for n in names)


def test_the_check_names_a_file_the_wheel_lacks(built, tmp_path):
    _, wheel = built
    dropped = "rewardzoo/report/page.py"
    broken = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(broken, "w") as dst:
        for item in src.infolist():
            if item.filename != dropped:
                dst.writestr(item, src.read(item.filename))
    done = _check_dist(tmp_path)
    assert done.returncode == 1
    assert f"lacks {dropped}" in done.stderr


def test_a_new_subpackage_ships_without_being_listed(tmp_path):
    tracked = _tracked()
    src = _copy([p for p in tracked if p.startswith("rewardzoo/") or "/" not in p], tmp_path / "src")
    new = src / "rewardzoo" / "brand_new" / "deeper"
    new.mkdir(parents=True)
    (new.parent / "__init__.py").write_text('"""A package nobody listed."""\n')
    (new / "__init__.py").write_text("")
    (new / "module.py").write_text("VALUE = 1\n")
    names = set(zipfile.ZipFile(_build_wheel(src, tmp_path / "dist")).namelist())
    assert {"rewardzoo/brand_new/__init__.py", "rewardzoo/brand_new/deeper/module.py"} <= names
