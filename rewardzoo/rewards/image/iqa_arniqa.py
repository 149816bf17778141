"""ARNIQA for ``image_quality``: pyiqa's encoder and forward, with the quality regressor read from its TorchScript
file without running it.

``score = s(w . [n(E(z(x))), n(E(z(d(x))))] + b)``: ``E`` ResNet-50 without its classifier (ARNIQA's encoder),
``d`` a bilinear 2x downscale, ``z`` ImageNet normalisation, ``n`` L2 normalisation over channels, ``w``, ``b`` the
regressor's weights and bias, ``s`` pyiqa's ``_scale_score``: ``(y - lo) / (hi - lo)`` with ``(lo, hi)`` the
regressor dataset's ``mos_range``, then ``1 - .`` when that dataset is lower-is-better (pyiqa's dataset table).

ARNIQA's authors fitted a scikit-learn ``Ridge`` per dataset and published it as
``torch.jit.script(sk2torch.wrap(ridge).float()).save(path)``. ``torch.jit.load`` would compile and run the file's
code, so the file is read by :func:`rewardzoo.shared.torchscript.read_torchscript` (tensors through a restricted
unpickler, code as text) and accepted only when it is sk2torch's ``TorchLinearRegression`` with exactly the code
sk2torch compiles to (compared as syntax trees): ``y = x @ weights.T + biases``, flattened for one output. The same
formula then runs here in :class:`LinearRegressor`.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from ...errors import ConfigError, InputError, did_you_mean
from ...shared.torchscript import ScriptObject, read_torchscript
from ...shared.weights import load_state_dict

SK2TORCH_REGRESSION = "__torch__.sk2torch.linear_model.TorchLinearRegression"
#: the methods of sk2torch 1.2's TorchLinearRegression as ``torch.jit.script`` prints them into the archive's code.
_SK2TORCH_METHODS = """
def forward(self: __torch__.sk2torch.linear_model.TorchLinearRegression,
    x: Tensor) -> Tensor:
    return (self).predict(x, )
def predict(self: __torch__.sk2torch.linear_model.TorchLinearRegression,
    x: Tensor) -> Tensor:
    return (self)._decision_function(x, )
def _decision_function(self: __torch__.sk2torch.linear_model.TorchLinearRegression,
    x: Tensor) -> Tensor:
    weights = self.weights
    _0 = torch.matmul(x, torch.t(weights))
    biases = self.biases
    outputs = torch.add(_0, biases)
    _1 = torch.eq((torch.size(outputs))[1], 1)
    if _1:
      _2 = torch.view(outputs, [-1])
    else:
      _2 = outputs
    return _2
"""
_CODE_FILE = "__torch__/sk2torch/linear_model.py"
_CLASS_LISTS: tuple[tuple[str, Any], ...] = (("__parameters__", ["weights", "biases"]), ("__buffers__", []))
_STATE = {"weights", "biases", "training", "_is_full_backward_hook"}
FEATURES = 2 * 2048  # ResNet-50's pooled features of the image and of its half-size copy


def _methods(tree: ast.AST) -> dict[str, str]:
    return {n.name: ast.dump(n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _is_sk2torch_regression(code: Mapping[str, str]) -> str | None:
    """Why ``code`` is not sk2torch's linear regression as compiled by TorchScript, or None when it is."""
    if set(code) != {_CODE_FILE}:
        return f"its code files are {sorted(code)}, not sk2torch's '{_CODE_FILE}' alone"
    try:
        tree = ast.parse(code[_CODE_FILE])  # parsed, never compiled or run
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return f"its code does not parse ({type(exc).__name__})"
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if len(tree.body) != 1 or len(classes) != 1 or classes[0].name != "TorchLinearRegression":
        return "its code is not one class TorchLinearRegression"
    for stmt in classes[0].body:
        if isinstance(stmt, ast.FunctionDef) or (isinstance(stmt, ast.AnnAssign) and stmt.value is None):
            continue
        if _assigned(stmt) in _CLASS_LISTS:
            continue
        return f"its class holds a statement sk2torch's does not (line {stmt.lineno})"
    if _methods(classes[0]) != _methods(ast.parse(_SK2TORCH_METHODS)):
        return "its methods differ from sk2torch's linear regression (x @ weights.T + biases)"
    return None


def _assigned(stmt: ast.stmt) -> tuple[str, Any] | None:
    """(name, literal value) of a class-level ``name = literal``, None for any other statement."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, _literal(stmt.value)
    return None


def _literal(node: ast.AST) -> Any:
    """The value of a literal node (``ast.literal_eval``: nothing is run), None for anything else."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None


class LinearRegressor(torch.nn.Module):
    """sk2torch's linear regression, computed here: ``y = x @ weights.T + biases``, flattened to one score per row."""

    def __init__(self, weights: torch.Tensor, biases: torch.Tensor) -> None:
        super().__init__()
        self.weights = torch.nn.Parameter(weights, requires_grad=False)
        self.biases = torch.nn.Parameter(biases, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weights.t() + self.biases).view(-1)


def read_regressor(path: str, reward: str, metric: str, field: str = "kwargs.regressor_path") -> LinearRegressor:
    """The regressor of an ARNIQA TorchScript file (sk2torch's wrapper of a one-output linear model on
    :data:`FEATURES` features); anything else is a ConfigError naming ``field``."""

    def refuse(why: str) -> ConfigError:
        return ConfigError(
            f"{reward}: '{path}' is not an ARNIQA regressor pyiqa's {metric!r} can use: {why}", field=field
        )

    try:
        archive = read_torchscript(path)
    except ValueError as exc:
        raise refuse(str(exc)) from None
    root = archive.root
    if (
        not isinstance(root, ScriptObject)
        or root.qualified_name != SK2TORCH_REGRESSION
        or archive.classes != [SK2TORCH_REGRESSION]
    ):
        raise refuse(f"it holds {archive.classes or [type(root).__name__]}, not sk2torch's {SK2TORCH_REGRESSION}")
    why = _is_sk2torch_regression(archive.code)
    if why:
        raise refuse(why)
    state = root.attributes
    weights, biases = state.get("weights"), state.get("biases")
    if set(state) - _STATE or not isinstance(weights, torch.Tensor) or not isinstance(biases, torch.Tensor):
        raise refuse(f"its attributes are {sorted(state)}, not sk2torch's weights and biases")
    if tuple(weights.shape) != (1, FEATURES) or biases.numel() != 1 or not weights.is_floating_point():
        raise refuse(
            f"weights {tuple(weights.shape)} and biases {tuple(biases.shape)}, not one output on {FEATURES} features"
        )
    return LinearRegressor(weights, biases.to(weights.dtype))


def encoder_state(path: str) -> dict[str, Any]:
    """The ResNet-50 encoder's state from an ARNIQA checkpoint: its ``model.*`` entries with that prefix dropped,
    as pyiqa keeps them (the file's other entries, the SimCLR projector, are left); a file without ``model.``
    entries is taken as the encoder's own state."""
    try:
        state = load_state_dict(path)
    except InputError as exc:
        raise ConfigError(exc.message, field="model_path") from None
    if any(k.startswith("model.") for k in state):
        return {k[len("model.") :]: v for k, v in state.items() if k.startswith("model.")}
    return state


class Arniqa(torch.nn.Module):
    """pyiqa's ARNIQA forward on a float image batch in [0, 1] (see the module docstring for the formula)."""

    def __init__(
        self,
        regressor: LinearRegressor,
        mos_range: tuple[float, float],
        lower_better: bool,
        mean: tuple[float, ...],
        std: tuple[float, ...],
    ) -> None:
        super().__init__()
        import torchvision

        resnet = torchvision.models.resnet50(weights=None)
        self.encoder = torch.nn.Sequential(*list(resnet.children())[:-1])
        self.regressor = regressor
        self.mos_range, self.lower_better = mos_range, lower_better
        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=False)
        feats = [F.normalize(self.encoder((v - self.mean) / self.std), dim=1) for v in (x, half)]
        y = self.regressor(torch.hstack(feats).view(-1, FEATURES))
        lo, hi = self.mos_range
        scaled = 0.0 + (y - lo) * (1.0 / (hi - lo))
        return 1.0 - scaled if self.lower_better else scaled


def regressor_dataset(options: Mapping[str, Any], urls: Mapping[str, str], metric: str, reward: str) -> str:
    """The ``regressor_dataset`` of the options, one of pyiqa's published regressors (a ConfigError suggesting close
    names otherwise)."""
    known = sorted(k for k in urls if k != "ARNIQA")
    name = options.get("regressor_dataset", "koniq")
    if name not in known:
        raise ConfigError(
            f"{reward}: pyiqa's {metric!r} has no regressor dataset {name!r}{did_you_mean(str(name), known)}; "
            f"known: {', '.join(known)}",
            field="kwargs.arch",
        )
    return str(name)


def build_arniqa(metric: str, module: Any, dataset: str, encoder_path: str, regressor_path: str, reward: str) -> Arniqa:
    """ARNIQA with the encoder of ``encoder_path`` (strict), the regressor of ``regressor_path`` and the score scale of
    ``dataset``; ``module`` is pyiqa's ``arniqa_arch`` (its dataset table, with its aliases, and its normalisation
    constants)."""
    info = module.DATASET_INFO[dataset]
    lo, hi = (float(v) for v in info["mos_range"])
    net = Arniqa(
        read_regressor(regressor_path, reward, metric),
        (lo, hi),
        bool(info["lower_better"]),
        tuple(module.IMAGENET_DEFAULT_MEAN),
        tuple(module.IMAGENET_DEFAULT_STD),
    )
    try:
        net.encoder.load_state_dict(encoder_state(encoder_path), strict=True)
    except RuntimeError as exc:
        raise ConfigError(
            f"'{encoder_path}' does not fit ARNIQA's ResNet-50 encoder: {str(exc)[:400]}", field="model_path"
        ) from None
    return net.eval().requires_grad_(False)
