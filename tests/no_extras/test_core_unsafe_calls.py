"""No code execution from data: the package's source is walked (AST) for the calls that run code a file or a
peer chose: unpickling (``torch.load`` without ``weights_only=True``, ``pickle``/``dill``/``cloudpickle``/
``marshal``/``joblib`` loads, ``numpy.load(allow_pickle=True)``), ``weights_only=False``, YAML's unsafe loaders,
``trust_remote_code=True`` as a default or a literal argument, and the builtins ``eval``/``exec``.

A new one fails here; a legitimate one goes in :data:`ALLOWED` with its reason. The walker is itself tested on
a planted file holding each offender (and the safe forms it must leave alone).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rewardzoo

PACKAGE = Path(rewardzoo.__file__).resolve().parent

UNPICKLERS = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "marshal", "joblib", "shelve"}
UNPICKLING_CALLS = {"load", "loads", "Unpickler", "open"}
UNSAFE_YAML = {"unsafe_load", "unsafe_load_all", "full_load", "full_load_all"}
SAFE_YAML_LOADERS = {"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"}

#: (file relative to the package, function, rule) -> why it is allowed.
ALLOWED = {
    (
        "rewards/image/image_reward.py",
        "convert_to_safetensors",
        "torch.load without weights_only=True",
    ): "the documented one-time conversion of a trusted ImageReward.pt, called by a user by hand, never by a "
    "reward, a config or a server",
    ("rewards/image/image_reward.py", "convert_to_safetensors", "weights_only=False"): "the same conversion",
    (
        "ray/engine.py",
        "ChunkScorer._score",
        "pickle.loads",
    ): "bytes pickled by this job's own driver for its actors, carried inside Ray's object transport (which "
    "pickles everything it carries between them anyway); nothing read from a file or the network",
    (
        "ray/engine.py",
        "ChunkScorer.__call__",
        "pickle.loads",
    ): "the scores of this job's earlier stage (pickled by our own actor one map_batches stage before), carried "
    "inside Ray's object transport like the media above; nothing read from a file or the network",
    (
        "serve/ray_rewards.py",
        "_portable",
        "pickle.loads",
    ): "a round trip of an exception this process just pickled itself, to learn whether it survives pickling "
    "before it travels back to the front; no foreign bytes",
    (
        "shared/torchscript.py",
        "_Restricted",
        "pickle.Unpickler subclass",
    ): "reads a TorchScript archive's data.pkl (ARNIQA's published regressors) with find_class resolving only "
    "torch's tensor rebuild (done by our own as_strided copy), torch's storage classes (as dtypes), OrderedDict and "
    "__torch__.* classes (inert attribute holders); every other global is refused before it is looked up, so no "
    "callable the file names is imported or run (tests/image/test_image_quality_arniqa.py plants a __reduce__ payload)",
    (
        "shared/pickle_table.py",
        "_Unpickler",
        "pickle.Unpickler subclass",
    ): "reads a torch.save checkpoint's data.pkl for `rewardzoo plan` (tensor names, dtypes, sizes) with find_class "
    "resolving only torch's tensor rebuild (returns an inert record, reads no data), torch's typed storage classes "
    "(as dtypes) and OrderedDict; every other global is refused before it is looked up, so no callable the file names "
    "is imported or run (tests/execution/test_execution_pickle_table.py plants an os.system __reduce__ payload)",
    (
        "catalog/resources.py",
        "load_yaml_text",
        "yaml.load without a safe Loader",
    ): "the Loader is CSafeLoader or SafeLoader (a variable the walker cannot follow)",
}


def _const(node: ast.AST | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


class _Walker(ast.NodeVisitor):
    """Collects (function, rule, line) of every offender in one module."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str, int]] = []
        self.scope: list[str] = []
        self.imported: dict[str, str] = {}  # a name bound by `from pickle import loads` -> 'pickle.loads'

    def _add(self, rule: str, node: ast.AST) -> None:
        self.found.append((".".join(self.scope) or "<module>", rule, node.lineno))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:  # a subclass of pickle.Unpickler unpickles on .load()
        self.scope.append(node.name)
        for base in node.bases:
            name = self.imported.get(base.id, base.id) if isinstance(base, ast.Name) else _dotted(base)
            root, _, attr = name.rpartition(".")
            if root.split(".")[0] in UNPICKLERS and attr == "Unpickler":
                self._add(f"{root.split('.')[0]}.Unpickler subclass", node)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node) -> None:
        args = node.args
        positional = args.posonlyargs + args.args
        defaults = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
        defaults += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        self.scope.append(node.name)
        for arg, default in defaults:
            if arg.arg == "trust_remote_code" and not _const(default, False):
                self._add("trust_remote_code default other than False", node)
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:  # a dataclass field `trust_remote_code: bool = True`
        if (
            isinstance(node.target, ast.Name)
            and node.target.id == "trust_remote_code"
            and node.value is not None
            and not _const(node.value, False)
        ):
            self._add("trust_remote_code default other than False", node)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        root = (node.module or "").split(".")[0]
        for alias in node.names:
            self.imported[alias.asname or alias.name] = f"{root}.{alias.name}"
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = _dotted(func)
        if isinstance(func, ast.Name):
            name = self.imported.get(func.id, func.id)
        root, _, attr = name.rpartition(".")
        root = root.split(".")[0]
        if name in ("eval", "exec"):
            self._add(f"builtin {name}", node)
        if root == "torch" and attr == "load" and not _const(_keyword(node, "weights_only"), True):
            self._add("torch.load without weights_only=True", node)
        if root in UNPICKLERS and attr in UNPICKLING_CALLS:
            self._add(f"{root}.{attr}", node)
        if (
            root in ("numpy", "np")
            and attr == "load"
            and not _const(_keyword(node, "allow_pickle"), False)
            and _keyword(node, "allow_pickle") is not None
        ):
            self._add("numpy.load with allow_pickle", node)
        if root == "yaml" and attr in UNSAFE_YAML:
            self._add(f"yaml.{attr}", node)
        if root == "yaml" and attr in ("load", "load_all"):
            loader = _keyword(node, "Loader") or (node.args[1] if len(node.args) > 1 else None)
            if loader is None or _dotted(loader).rpartition(".")[2] not in SAFE_YAML_LOADERS:
                self._add("yaml.load without a safe Loader", node)
        if _const(_keyword(node, "weights_only"), False):
            self._add("weights_only=False", node)
        if _const(_keyword(node, "trust_remote_code"), True):
            self._add("trust_remote_code=True", node)
        self.generic_visit(node)


def offenders(root: Path) -> dict[tuple[str, str, str], list[int]]:
    """(file relative to ``root``, function, rule) -> the lines, for every .py file under ``root``."""
    out: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted(root.rglob("*.py")):
        walker = _Walker()
        walker.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for function, rule, line in walker.found:
            out.setdefault((path.relative_to(root).as_posix(), function, rule), []).append(line)
    return out


def test_the_package_runs_no_code_from_data():
    found = offenders(PACKAGE)
    new = {key: lines for key, lines in found.items() if key not in ALLOWED}
    assert not new, (
        "code that can run what a file or a peer chose (add a reasoned ALLOWED entry only if it is "
        "legitimate):\n" + "\n".join(f"  {f}:{lines} in {fn}: {rule}" for (f, fn, rule), lines in new.items())
    )


def test_every_allowed_entry_is_still_there():
    """An allow-list entry whose code went away goes too (else it would allow the next one unseen)."""
    found = offenders(PACKAGE)
    assert not [key for key in ALLOWED if key not in found]


PLANTED = """
import pickle, torch, yaml, dill
import numpy as np
from pickle import loads as undo
from dataclasses import dataclass

def load(path, trust_remote_code=True):
    torch.load(path)
    torch.load(path, weights_only=False)
    pickle.load(open(path, "rb"))
    undo(b"")
    dill.loads(b"")
    np.load(path, allow_pickle=True)
    yaml.load(path)
    yaml.unsafe_load(path)
    eval("1 + 1")
    exec("x = 1")
    from_pretrained(path, trust_remote_code=True)

@dataclass
class Options:
    trust_remote_code: bool = True

class Restricted(pickle.Unpickler):
    pass

def safe(path, model, trust_remote_code=False):
    torch.load(path, weights_only=True)
    yaml.load(path, Loader=yaml.SafeLoader)
    yaml.safe_load(path)
    np.load(path)
    model.eval()
    from_pretrained(path, trust_remote_code=trust_remote_code)
"""


def test_the_walker_catches_each_planted_offender_and_leaves_the_safe_forms(tmp_path):
    (tmp_path / "planted.py").write_text(PLANTED)
    found = offenders(tmp_path)
    assert all(fn != "safe" for _, fn, _ in found), found
    rules = {(fn, rule): lines for (_, fn, rule), lines in found.items()}
    expected = {
        ("load", "trust_remote_code default other than False"): 1,
        ("load", "torch.load without weights_only=True"): 2,
        ("load", "weights_only=False"): 1,
        ("load", "pickle.load"): 1,
        ("load", "pickle.loads"): 1,
        ("load", "dill.loads"): 1,
        ("load", "numpy.load with allow_pickle"): 1,
        ("load", "yaml.load without a safe Loader"): 1,
        ("load", "yaml.unsafe_load"): 1,
        ("load", "builtin eval"): 1,
        ("load", "builtin exec"): 1,
        ("load", "trust_remote_code=True"): 1,
        ("Options", "trust_remote_code default other than False"): 1,
        ("Restricted", "pickle.Unpickler subclass"): 1,
    }
    assert {key: len(lines) for key, lines in rules.items()} == expected


@pytest.mark.parametrize("source", ["import pickle\npickle.loads(b'')\n", "exec('1')\n"])
def test_a_new_offender_in_the_package_would_fail_the_check(tmp_path, source):
    """The package check's own verdict on a copy of one package file with an offender appended."""
    module = tmp_path / "rewards" / "image" / "image_reward.py"
    module.parent.mkdir(parents=True)
    module.write_text((PACKAGE / "rewards/image/image_reward.py").read_text(encoding="utf-8") + source)
    new = [key for key in offenders(tmp_path) if key not in ALLOWED]
    assert len(new) == 1 and new[0][1] == "<module>"
