"""Every ``>>>`` example in the package and in the documentation's Getting started page runs, with real outputs.

An example is skipped (``# doctest: +SKIP``) only where a download is its point, and its docstring says so; a
module whose examples need an extra that is not installed is skipped with that reason (the dev environment runs
them all).
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rewardzoo"
#: modules whose examples need a running server: their own test runs them against one
AGAINST_A_SERVER = {"rewardzoo.serve.client": "tests/serve/test_serve_client_example.py"}
MODULES = sorted(
    name
    for p in PACKAGE.rglob("*.py")
    if ">>> " in p.read_text(encoding="utf-8")
    and (name := ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")) not in AGAINST_A_SERVER
)
#: the third-party modules a module's examples need beyond the core install
NEEDS = {"rewardzoo.core.differentiable": ("torch", "open_clip")}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_the_examples_are_found_and_skipped_only_for_a_download():
    assert "rewardzoo.core.processor" in MODULES and "rewardzoo.core.differentiable" in MODULES
    for module in MODULES:
        path = ROOT / (module.replace(".", "/") + ".py")
        if not path.is_file():
            path = ROOT / module.replace(".", "/") / "__init__.py"
        text = path.read_text(encoding="utf-8")
        if "+SKIP" in text:
            assert "downloads" in text, f"{module} skips an example without saying which download it needs"


@pytest.mark.parametrize("module", MODULES)
def test_the_module_examples_run(module):
    missing = [m for m in NEEDS.get(module, ()) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{module}'s examples need {missing}")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("rewardzoo"):
            raise
        pytest.skip(f"{module} needs {exc.name}")
    found = sum(len(test.examples) for test in doctest.DocTestFinder().find(mod))
    assert found > 0, f"{module} has no example that doctest finds"
    failures, tried = doctest.testmod(mod, optionflags=FLAGS, report=True)
    assert failures == 0, f"{failures} of {tried} examples of {module} failed (the report is above)"


def test_the_getting_started_example_runs():
    page = ROOT / "docs" / "getting-started.md"
    failures, tried = doctest.testfile(str(page), module_relative=False, optionflags=FLAGS, report=True)
    assert tried >= 10 and failures == 0, f"{failures} of {tried} examples of {page.name} failed"
