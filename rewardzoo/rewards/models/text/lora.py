"""Named LoRA scopes on linear projections: ``y = base(x) + (alpha / r) * B(A(dropout(x)))``.

``B`` starts at zero, so adding a scope leaves the model's outputs unchanged until it trains. Several
scopes may live on one module (each under its own name, e.g. ``reward``); all added scopes apply.
Works on ``nn.Linear`` and on transformers' ``Conv1D`` (GPT-2 style, weight stored as (in, out)).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from torch import Tensor, nn

from ....errors import ConfigError
from ....shared.options import positive_int

#: Attention projection names tried when no ``targets`` are given (TinyTransformer, Llama/Mistral/Qwen,
#: GPT-2, BERT-style and DeBERTa models).
DEFAULT_TARGETS = ("to_q", "to_v", "q_proj", "v_proj", "c_attn", "query", "value", "query_proj", "value_proj")


def _features(module: nn.Module) -> tuple[int, int] | None:
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    if type(module).__name__ == "Conv1D" and hasattr(module, "nf"):  # transformers.pytorch_utils.Conv1D
        return int(module.weight.shape[0]), int(module.nf)
    return None


class LoRAAdapter(nn.Module):
    """One scope's low-rank update ``(alpha / r) * B A x`` (A Kaiming-uniform, B zero)."""

    def __init__(self, in_features: int, out_features: int, r: int, alpha: float, dropout: float) -> None:
        super().__init__()
        self.A = nn.Linear(in_features, r, bias=False)
        self.B = nn.Linear(r, out_features, bias=False)
        nn.init.kaiming_uniform_(self.A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.B.weight)
        self.scale = alpha / r
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.B(self.A(self.dropout(x))) * self.scale


class LoRALinear(nn.Module):
    """A projection plus named LoRA scopes (``adapters[scope]``)."""

    def __init__(self, base: nn.Module) -> None:
        super().__init__()
        self.base = base
        self.adapters = nn.ModuleDict()

    def forward(self, x: Tensor) -> Tensor:
        out = self.base(x)
        for adapter in self.adapters.values():
            out = out + adapter(x.to(adapter.A.weight.dtype)).to(out.dtype)
        return out


def add_lora(
    model: nn.Module,
    scope: str,
    *,
    r: int = 8,
    alpha: float | None = None,
    dropout: float = 0.0,
    targets: Iterable[str] | None = None,
) -> list[str]:
    """Add the LoRA scope ``scope`` to every projection of ``model`` whose attribute name is in ``targets``.

    Returns the qualified names of the wrapped projections; ConfigError when none matches or the scope exists.
    """
    if not scope.isidentifier():
        raise ConfigError(f"LoRA scope must be an identifier, got {scope!r}")
    positive_int(r, "LoRA rank r")
    wanted = set(DEFAULT_TARGETS if targets is None else targets)
    alpha = float(r if alpha is None else alpha)
    wrapped = []
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if child_name not in wanted:
                continue
            if isinstance(child, LoRALinear):
                holder = child
            else:
                if _features(child) is None:
                    continue
                holder = LoRALinear(child)
                setattr(parent, child_name, holder)
            if scope in holder.adapters:
                raise ConfigError(f"LoRA scope '{scope}' already exists on {parent_name}.{child_name}")
            features = _features(holder.base)
            if features is None:  # (a LoRALinear wraps a projection _features reads)
                raise ConfigError(f"{parent_name}.{child_name} wraps a {type(holder.base).__name__}, not a projection")
            in_f, out_f = features
            weight = next(holder.base.parameters())
            holder.adapters[scope] = LoRAAdapter(in_f, out_f, r, alpha, dropout).to(weight.device, weight.dtype)
            wrapped.append(f"{parent_name}.{child_name}".lstrip("."))
    if not wrapped:
        raise ConfigError(f"no projection named {sorted(wanted)} found for LoRA scope '{scope}'; pass lora_targets")
    return wrapped


def lora_parameters(model: nn.Module, scope: str) -> Iterator[nn.Parameter]:
    """The parameters of one LoRA scope."""
    for module in model.modules():
        if isinstance(module, LoRALinear) and scope in module.adapters:
            yield from module.adapters[scope].parameters()
