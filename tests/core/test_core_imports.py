"""The package's import graph: no cycles, and reward modules import only the contract, shared/ and errors.

The graph is read from the source (every ``import`` statement, at module level or inside a function;
``if TYPE_CHECKING:`` blocks excluded), so a lazy import that closes a cycle is caught too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "rewardzoo"
#: What a module under rewardzoo/rewards/ may import from the package.
REWARD_LAYER = ("rewardzoo.rewards", "rewardzoo.shared", "rewardzoo.errors")
#: The test layer (tiny models on disk): it may import the reward layer; nothing in the package imports it.
TESTING = "rewardzoo.testing"


def _modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, is_pkg: bool, known: set[str]) -> set[str]:
    package = name if is_pkg else name.rpartition(".")[0]
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            for child in (node.orelse if _is_type_checking(node.test) else [*node.body, *node.orelse]):
                self.visit(child)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from pkg import submodule`

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in known and m != name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, is_pkg, set(mods)) for name, (path, is_pkg) in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_the_walker_sees_the_known_edges(graph):
    assert "rewardzoo.engine" in graph["rewardzoo.processor"]
    assert "rewardzoo.rewards.base" in graph["rewardzoo.engine"]
    assert "rewardzoo.async_runner" in graph["rewardzoo.processor"]  # a function-level import counts
    assert "rewardzoo.processor" not in graph["rewardzoo.async_runner"]  # a TYPE_CHECKING import does not


def test_cycle_detection_finds_a_planted_cycle(graph):
    planted = {k: set(v) for k, v in graph.items()}
    planted["rewardzoo.engine"].add("rewardzoo.processor")
    assert any({"rewardzoo.engine", "rewardzoo.processor"} <= set(group) for group in _cycles(planted))


def test_no_import_cycles(graph):
    assert _cycles(graph) == []


def test_reward_modules_import_nothing_from_the_engine(graph):
    offending = {name: sorted(d for d in deps if not d.startswith(REWARD_LAYER) and d != "rewardzoo")
                 for name, deps in graph.items() if name.startswith("rewardzoo.rewards")}
    assert {k: v for k, v in offending.items() if v} == {}


def test_shared_modules_import_nothing_above_them(graph):
    offending = {name: sorted(d for d in deps if not d.startswith(("rewardzoo.shared", "rewardzoo.errors")))
                 for name, deps in graph.items() if name.startswith("rewardzoo.shared")}
    assert {k: v for k, v in offending.items() if v} == {}


def _in_testing(name: str) -> bool:
    return name == TESTING or name.startswith(TESTING + ".")


def test_nothing_in_the_package_imports_the_test_layer(graph):
    assert sorted(name for name, deps in graph.items()
                  if not _in_testing(name) and any(_in_testing(d) for d in deps)) == []


def test_testing_modules_import_only_the_reward_layer_and_each_other(graph):
    assert any(_in_testing(name) for name in graph)
    offending = {name: sorted(d for d in deps if not _in_testing(d) and not d.startswith(REWARD_LAYER))
                 for name, deps in graph.items() if _in_testing(name)}
    assert {k: v for k, v in offending.items() if v} == {}
