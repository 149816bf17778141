"""The package's import graph: a layer order, no cycles, and nothing below the front doors imports them.

The graph is read from the source, never by importing it. An edge is:

- an ``import`` statement, at module level, inside a function or under ``if TYPE_CHECKING:``;
- ``importlib.import_module("rewardzoo...")`` or ``import_path("rewardzoo...")`` with a string literal;
- an entry of a lazy table handed to ``lazy_getattr`` (the package imports it on first attribute access);
- a shipped card's ``implementation:`` (an edge from the registry, which imports it by that string).

A name that an ancestor package defines itself (``from .. import __version__``) is no edge: Python runs every
ancestor's ``__init__`` before the module anyway. pyproject's entry points are checked against the table too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]

#: The layers, lowest first. A module belongs to the longest entry that is it or a package above it; it may
#: import its own layer and the layers below. The package docstrings state the same order.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("rewardzoo.errors",)),
    ("shared", ("rewardzoo.shared",)),
    ("spec", ("rewardzoo.spec",)),
    ("transport", ("rewardzoo.transport",)),
    ("contract", ("rewardzoo.rewards.base", "rewardzoo.rewards.info", "rewardzoo.rewards.options")),
    ("models", ("rewardzoo.rewards.models",)),  # the floor beneath the families
    ("rewards", ("rewardzoo.rewards",)),  # the families: never each other (test_no_family_imports_another)
    ("environments", ("rewardzoo.environments",)),
    ("catalog", ("rewardzoo.catalog", "rewardzoo.registry")),  # the registry sits at the package root
    ("core", ("rewardzoo.core",)),
    ("monitor", ("rewardzoo.monitor",)),
    ("jobs", ("rewardzoo.jobs",)),
    (
        "front doors",
        ("rewardzoo.cli", "rewardzoo.serve", "rewardzoo.ray", "rewardzoo.integrations", "rewardzoo.report"),
    ),
    ("testing", ("rewardzoo.testing",)),
    ("package", ("rewardzoo",)),  # the root: __version__ and the lazy public names
)
FRONT_DOORS = "front doors"

_LOADERS = ("import_module", "import_path")
_DOTTED = re.compile(r"^rewardzoo(\.\w+)*(:[\w.]+)?$")


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    mods = {}
    for path in (root / "rewardzoo").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return mods


def _target_module(path: str, known: set[str] | dict) -> str | None:
    """The module a ``pkg.mod:obj``, ``pkg.mod.obj`` or ``pkg.mod`` string names, if it is one of ours."""
    if ":" in path:
        module = path.partition(":")[0]
        return module if module in known else None
    while path and path not in known:
        path = path.rpartition(".")[0]
    return path or None


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level ``NAME = value`` assignments (the lazy tables)."""
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            out.update((t.id, node.value) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
    return out


def _lazy_table(tree: ast.Module) -> dict[str, str]:
    """``{public name or submodule: module}`` of the module's ``lazy_getattr(package, exports, submodules)``."""
    constants = _constants(tree)

    literals = {}
    for name, node in constants.items():
        try:
            literals[name] = ast.literal_eval(node)
        except ValueError:
            pass

    def value(node: ast.expr | None) -> object:
        node = constants.get(node.id, node) if isinstance(node, ast.Name) else node
        if node is None:
            return ()
        try:
            return ast.literal_eval(node)
        except ValueError:  # a table built from literal tables (a comprehension): evaluated over them alone
            return eval(compile(ast.Expression(node), "<lazy table>", "eval"), {"__builtins__": {}}, dict(literals))

    table: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_getattr":
            package, exports, *rest = node.args
            package = value(package)
            table.update(value(exports))
            table.update((name, f"{package}.{name}") for name in value(rest[0] if rest else None))
    return table


class _Edges:
    """The edges of one module, by kind: ``import`` (statements), ``string`` (import_module / import_path
    literals), ``lazy`` (its lazy table)."""

    def __init__(self, name: str, path: Path, is_pkg: bool, known: set[str], lazy: dict[str, dict[str, str]]):
        self.name, self.known, self.lazy = name, known, lazy
        self.package = name if is_pkg else name.rpartition(".")[0]
        self.kinds: dict[str, set[str]] = {"import": set(), "string": set(), "lazy": set()}
        tree = ast.parse(path.read_text(encoding="utf-8"))
        self._visit(tree)
        for target in lazy.get(name, {}).values():
            self._add("lazy", _target_module(target, known))

    def _add(self, kind: str, module: str | None) -> None:
        if module is not None and module in self.known and module != self.name:
            self.kinds[kind].add(module)

    def _from(self, module: str, names: list[str]) -> None:
        for alias in names:
            if f"{module}.{alias}" in self.known:  # `from pkg import submodule`
                self._add("import", f"{module}.{alias}")
            elif alias in self.lazy.get(module, {}):  # a lazy name: the module that defines it
                self._add("import", _target_module(self.lazy[module][alias], self.known))
            elif not self.name.startswith(module + "."):  # an ancestor's own names add nothing
                self._add("import", module)

    def _visit(self, tree: ast.AST) -> None:
        edges = self

        class Visitor(ast.NodeVisitor):
            def visit_Import(self, node: ast.Import) -> None:
                for alias in node.names:
                    edges._add("import", alias.name)

            def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
                if node.level:
                    parts = edges.package.split(".")
                    module = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                edges._from(module, [alias.name for alias in node.names])

            def visit_Call(self, node: ast.Call) -> None:
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if (
                    called in _LOADERS
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and _DOTTED.match(node.args[0].value)
                ):
                    edges._add("string", _target_module(node.args[0].value, edges.known))
                self.generic_visit(node)

        Visitor().visit(tree)


def card_targets(root: Path) -> dict[str, str]:
    """``{card file name: implementation}`` of the shipped cards."""
    out = {}
    for card in sorted((root / "rewardzoo" / "model_cards").glob("*.md")):
        front = card.read_text(encoding="utf-8").split("---")[1]
        found = re.search(r"^implementation:\s*(\S+)\s*$", front, re.M)
        if found:
            out[card.name] = found.group(1)
    return out


def entry_points(root: Path) -> dict[str, str]:
    """pyproject's ``[project.scripts]`` and ``[project.entry-points.*]`` that point into the package."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = {"scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    return {
        f"{group}:{name}": target
        for group, table in groups.items()
        for name, target in table.items()
        if target.startswith("rewardzoo")
    }


def edges_by_kind(root: Path = REPO) -> dict[str, dict[str, set[str]]]:
    """``{kind: {module: imported modules}}`` for the kinds ``import``, ``string``, ``lazy`` and ``card``."""
    mods = _modules(root)
    known = set(mods)
    lazy = {name: _lazy_table(ast.parse(path.read_text(encoding="utf-8"))) for name, (path, _) in mods.items()}
    graphs: dict[str, dict[str, set[str]]] = {
        kind: {name: set() for name in mods} for kind in ("import", "string", "lazy", "card")
    }
    for name, (path, is_pkg) in mods.items():
        for kind, targets in _Edges(name, path, is_pkg, known, lazy).kinds.items():
            graphs[kind][name] = targets
    if "rewardzoo.registry" in known:
        graphs["card"]["rewardzoo.registry"] = {
            m for t in card_targets(root).values() if (m := _target_module(t, known)) is not None
        }
    return graphs


def merged(graphs: dict[str, dict[str, set[str]]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for graph in graphs.values():
        for name, targets in graph.items():
            out.setdefault(name, set()).update(targets)
    return out


def layer_of(module: str) -> int | None:
    best, found = -1, None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), rank
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
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
        for w in sorted(graph.get(v, ())):
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


@pytest.fixture(scope="module")
def graphs() -> dict[str, dict[str, set[str]]]:
    return edges_by_kind()


@pytest.fixture(scope="module")
def graph(graphs) -> dict[str, set[str]]:
    """Every edge, of every kind."""
    return merged(graphs)


def _upward(graphs: dict[str, dict[str, set[str]]]) -> dict[str, list[str]]:
    """Edges to a higher layer, of every kind."""
    offending: dict[str, list[str]] = {}
    for kind, graph in graphs.items():
        for name, targets in graph.items():
            for target in targets:
                if layer_of(target) > layer_of(name):
                    offending.setdefault(name, []).append(
                        f"{target} ({kind}: {LAYERS[layer_of(name)][0]} -> {LAYERS[layer_of(target)][0]})"
                    )
    return {name: sorted(v) for name, v in offending.items()}


def test_the_walker_sees_the_known_edges(graphs):
    imports, lazy, cards = (graphs[k] for k in ("import", "lazy", "card"))
    assert "rewardzoo.core.engine" in imports["rewardzoo.core.processor"]
    assert "rewardzoo.rewards.base" in imports["rewardzoo.core.engine"]
    assert "rewardzoo.core.async_runner" in imports["rewardzoo.core.processor"]  # a function-level import counts
    assert "rewardzoo.spec.config" in imports["rewardzoo.core.engine"]
    assert "rewardzoo.core.processor" in lazy["rewardzoo"] and "rewardzoo.integrations" in lazy["rewardzoo"]
    assert "rewardzoo.serve.client" in lazy["rewardzoo.serve"]
    assert "rewardzoo.rewards.image.pickscore" in cards["rewardzoo.registry"]
    assert "rewardzoo.report.media" in imports["rewardzoo.report"]  # `from . import media`
    assert "rewardzoo" not in imports["rewardzoo.report"]  # `from .. import __version__`: the root's own name


def test_the_walker_reads_strings_and_lazy_names(tmp_path):
    pkg = tmp_path / "rewardzoo"
    (pkg / "ray").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "from .shared.imports import lazy_getattr\n"
        "_LAZY = {'Sample': 'rewardzoo.sample'}\n"
        "__getattr__ = lazy_getattr('rewardzoo', _LAZY, ('ray',))\n"
    )
    (pkg / "sample.py").write_text("def f():\n    from rewardzoo import Sample\n")
    (pkg / "cli.py").write_text("import importlib\ndef f():\n    importlib.import_module('rewardzoo.ray.engine')\n")
    (pkg / "ray" / "__init__.py").write_text("")
    (pkg / "ray" / "engine.py").write_text(
        "from ..shared.imports import import_path\nX = import_path('rewardzoo.cli:main')\n"
    )
    (pkg / "shared").mkdir()
    (pkg / "shared" / "__init__.py").write_text("")
    (pkg / "shared" / "imports.py").write_text("")
    found = edges_by_kind(tmp_path)
    assert found["lazy"]["rewardzoo"] == {"rewardzoo.sample", "rewardzoo.ray"}
    assert found["string"]["rewardzoo.cli"] == {"rewardzoo.ray.engine"}
    assert found["string"]["rewardzoo.ray.engine"] == {"rewardzoo.cli"}
    assert found["import"]["rewardzoo.sample"] == set()  # the lazy name's module is itself
    assert cycles(merged(found)) == [["rewardzoo.cli", "rewardzoo.ray.engine"]]


def test_cycle_detection_finds_a_planted_cycle(graph):
    planted = {k: set(v) for k, v in graph.items()}
    planted["rewardzoo.core.engine"].add("rewardzoo.core.processor")
    assert any({"rewardzoo.core.engine", "rewardzoo.core.processor"} <= set(group) for group in cycles(planted))


def test_no_import_cycles(graph):
    assert cycles(graph) == []


def test_every_module_has_a_layer(graph):
    assert [name for name in graph if layer_of(name) is None] == []


def test_no_module_imports_a_higher_layer(graphs):
    assert _upward(graphs) == {}


def test_the_layer_check_catches_a_planted_upward_edge(graphs):
    planted = {kind: {k: set(v) for k, v in g.items()} for kind, g in graphs.items()}
    planted["string"]["rewardzoo.rewards.remote"].add("rewardzoo.core.engine")
    planted["import"]["rewardzoo.shared.media"].add("rewardzoo.transport.wire")
    assert set(_upward(planted)) == {"rewardzoo.rewards.remote", "rewardzoo.shared.media"}


#: The families: each subpackage of ``rewardzoo.rewards`` but the floor (``models``). A module in one family may
#: not import another family (a composite reaches another reward through its inner rewards, by registry name).
REWARDS, FLOOR = "rewardzoo.rewards", "rewardzoo.rewards.models"


def family_of(module: str, packages: set[str]) -> str | None:
    """The family package (``rewardzoo.rewards.image``) a module lies in; None outside the families (the
    contract, the floor, a module directly under ``rewards/`` such as ``remote``, any other layer)."""
    parts = module.split(".")
    family = ".".join(parts[:3])
    if len(parts) < 3 or not module.startswith(REWARDS + ".") or family == FLOOR or family not in packages:
        return None
    return family


def family_crossings(graph: dict[str, set[str]], packages: set[str]) -> set[tuple[str, str]]:
    """``(importer, imported)`` of every edge from one family to another; ``packages``: the package modules."""
    return {
        (name, target)
        for name, targets in graph.items()
        for target in targets
        if (mine := family_of(name, packages)) is not None
        and (theirs := family_of(target, packages)) is not None
        and mine != theirs
    }


def _packages(root: Path = REPO) -> set[str]:
    return {name for name, (_, is_pkg) in _modules(root).items() if is_pkg}


def test_no_family_imports_another(graph):
    # a family needing another's model code: move it to the floor (rewards/models/); another reward: an inner reward
    assert family_crossings(graph, _packages()) == set()


def test_the_family_rule_catches_a_planted_crossing_and_spares_the_floor(tmp_path):
    """A synthetic package: the rule flags a family importing another (at module level or inside a function),
    never a family importing the floor, the contract or shared, nor the floor's own subpackages."""
    files = {
        "__init__.py": "",
        "shared/__init__.py": "",
        "shared/media.py": "",
        "rewards/__init__.py": "",
        "rewards/base.py": "",
        "rewards/remote.py": "from .image import a\n",  # a module beside the families is no family
        "rewards/models/__init__.py": "",
        "rewards/models/clip.py": "from ..base import *\n",
        "rewards/models/vlm/__init__.py": "",
        "rewards/models/vlm/judging.py": "from ..clip import *\n",
        "rewards/image/__init__.py": "",
        "rewards/image/a.py": "from ..models.vlm import judging\nfrom ...shared import media\nfrom ..base import *\n",
        "rewards/video/__init__.py": "",
        "rewards/video/b.py": "def f():\n    from ..image.a import X\n",
        "rewards/vlm/__init__.py": "",
        "rewards/vlm/c.py": "import rewardzoo.rewards.group.d\nfrom ..models.clip import *\n",
        "rewards/group/__init__.py": "",
        "rewards/group/d.py": "from . import e\n",
        "rewards/group/e.py": "",
    }
    for rel, text in files.items():
        path = tmp_path / "rewardzoo" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    found = family_crossings(merged(edges_by_kind(tmp_path)), _packages(tmp_path))
    assert found == {
        ("rewardzoo.rewards.video.b", "rewardzoo.rewards.image.a"),
        ("rewardzoo.rewards.vlm.c", "rewardzoo.rewards.group.d"),
    }


def test_only_front_doors_import_front_doors_and_nothing_imports_the_cli(graphs, graph):
    front = LAYERS.index(next(layer for layer in LAYERS if layer[0] == FRONT_DOORS))
    lazy_reexports = {
        (name, t) for name, targets in graphs["lazy"].items() for t in targets if t.startswith(name + ".")
    }
    importers = {
        name: sorted(t for t in targets if layer_of(t) == front and (name, t) not in lazy_reexports)
        for name, targets in graph.items()
        if layer_of(name) != front
    }
    assert {k: v for k, v in importers.items() if v} == {}
    # nothing outside the command line imports any of it (the report's demo once reached into cli.demo)
    cli = {name for name in graph if name == "rewardzoo.cli" or name.startswith("rewardzoo.cli.")}
    assert sorted(name for name, targets in graph.items() if name not in cli and targets & cli) == []


def test_the_walker_reads_import_module_and_import_path_strings(tmp_path):
    """No module loads another by a string today (the CLI's import_module of the Ray engine is gone); the walker
    still reads them, in a planted module."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import importlib\nfrom rewardzoo.shared.imports import import_path\n\n\ndef f():\n"
        "    importlib.import_module('rewardzoo.core.engine')\n"
        "    return import_path('rewardzoo.cli:main')\n",
        encoding="utf-8",
    )
    known = set(_modules(REPO))
    found = _Edges("rewardzoo.planted", planted, False, known, {}).kinds
    assert found["string"] == {"rewardzoo.core.engine", "rewardzoo.cli"}


def test_cards_point_into_the_rewards_at_a_class_defined_there():
    mods = _modules(REPO)
    wrong = {}
    for card, target in card_targets(REPO).items():
        module, _, cls = target.partition(":")
        path = mods.get(module, (None,))[0]
        defined = path is not None and any(
            isinstance(node, ast.ClassDef) and node.name == cls
            for node in ast.parse(path.read_text(encoding="utf-8")).body
        )
        if not module.startswith("rewardzoo.rewards.") or not defined:
            wrong[card] = target
    assert len(card_targets(REPO)) > 40 and wrong == {}


def test_entry_points_are_front_doors_defined_there():
    mods = _modules(REPO)
    points = entry_points(REPO)
    wrong = {}
    for name, target in points.items():
        module, _, func = target.partition(":")
        path = mods.get(module, (None,))[0]
        defined = path is not None and any(
            isinstance(node, ast.FunctionDef) and node.name == func
            for node in ast.parse(path.read_text(encoding="utf-8")).body
        )
        if LAYERS[layer_of(module) or 0][0] != FRONT_DOORS or not defined:
            wrong[name] = target
    assert "scripts:rewardzoo" in points and wrong == {}


#: The test layer (tiny models on disk) builds only on the rewards, shared/ and errors; nothing imports it.
TESTING = "rewardzoo.testing"


def _in_testing(name: str) -> bool:
    return name == TESTING or name.startswith(TESTING + ".")


def test_nothing_in_the_package_imports_the_test_layer(graph):
    assert (
        sorted(
            name
            for name, deps in graph.items()
            if name != "rewardzoo" and not _in_testing(name) and any(_in_testing(d) for d in deps)
        )
        == []
    )


def test_testing_modules_import_only_the_reward_layer_and_each_other(graph):
    allowed = ("rewardzoo.rewards", "rewardzoo.shared", "rewardzoo.errors")
    assert any(_in_testing(name) for name in graph)
    offending = {
        name: sorted(d for d in deps if not _in_testing(d) and not d.startswith(allowed))
        for name, deps in graph.items()
        if _in_testing(name)
    }
    assert {k: v for k, v in offending.items() if v} == {}
