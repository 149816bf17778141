"""The lint habits are configured once and pinned once: ``pyproject.toml`` holds the ruff and mypy settings, the
``dev`` extra pins the tools, ``scripts/lint`` runs them, the test command runs ``scripts/lint`` first, and the
pre-commit hooks install exactly the ``dev`` extra's versions (so the hooks and CI cannot drift apart)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("ruff", "mypy", "types-PyYAML")


def _pins(requirements: list[str]) -> dict[str, str]:
    """name -> version for each ``name==version`` requirement."""
    out = {}
    for req in requirements:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;]+)\s*", req)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _hook_pins() -> dict[str, str]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    deps = [
        dep for repo in config["repos"] for hook in repo["hooks"] for dep in hook.get("additional_dependencies", [])
    ]
    return _pins(deps)


def test_the_dev_extra_pins_the_tools_and_the_hooks_install_the_same_versions(pyproject):
    dev = _pins(pyproject["project"]["optional-dependencies"]["dev"])
    hooks = _hook_pins()
    for tool in TOOLS:
        assert tool.lower() in dev, f"the dev extra does not pin {tool} (name==version)"
        assert hooks.get(tool.lower()) == dev[tool.lower()], (
            f"{tool}: .pre-commit-config.yaml installs {hooks.get(tool.lower())}, the dev extra pins {dev[tool.lower()]}"
        )


def test_the_pin_comparison_sees_a_drift():
    assert _pins(["ruff==0.17.6", "mypy>=2", "numpy"]) == {"ruff": "0.17.6"}
    assert _pins(["ruff==0.17.6"]) != _pins(["ruff==0.17.7"])


def test_ruff_and_mypy_are_configured(pyproject):
    ruff = pyproject["tool"]["ruff"]
    assert ruff["line-length"] == 120 and ruff["target-version"] == "py310"
    assert {"E", "F", "W", "I", "B", "UP"} <= set(ruff["lint"]["select"])
    assert "quote-style" in ruff["format"]
    mypy = pyproject["tool"]["mypy"]
    assert mypy["packages"] == ["rewardzoo"]
    strict = [o for o in mypy["overrides"] if o.get("disallow_untyped_defs")]
    assert len(strict) == 1
    assert {"rewardzoo", "rewardzoo.errors", "rewardzoo.spec.*", "rewardzoo.core.*", "rewardzoo.rewards.base"} <= set(
        strict[0]["module"]
    )
    assert strict[0].get("disallow_any_generics") and strict[0].get("warn_return_any")


def test_the_test_command_runs_the_lint_script_before_building():
    lint = ROOT / "scripts" / "lint"
    assert lint.is_file() and os.access(lint, os.X_OK)
    body = lint.read_text(encoding="utf-8")
    for command in ("ruff check", "ruff format --check", "mypy"):
        assert command in body, f"scripts/lint does not run {command}"
    test = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert '"$root/scripts/lint"' in test
    assert test.index('"$root/scripts/lint"') < test.index("-m build --outdir")
