"""Safe weight loading: safetensors, or ``torch.load(weights_only=True)``; never arbitrary unpickling. A model,
tokenizer or config that a library cannot load becomes a ConfigError naming what, where and why (:func:`loading`)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError


def load_state_dict(
    path: str | os.PathLike, *, map_location: str = "cpu", key: str | None = None, mmap: bool = False
) -> dict[str, Any]:
    """Load a checkpoint as a flat ``{name: tensor}`` dict.

    ``.safetensors`` files go through safetensors (memory-mapped on the CPU); anything else through
    ``torch.load`` with ``weights_only=True`` (a checkpoint that needs arbitrary classes is refused, not
    unpickled), memory-mapped too with ``mmap`` (torch's zip format only). ``key`` picks a nested entry (e.g.
    ``"state_dict"``); common wrappers are unwrapped automatically.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"weights file not found: '{path}'")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(str(path), device=map_location)
    else:
        import pickle

        import torch

        try:
            state = torch.load(str(path), map_location=map_location, weights_only=True, mmap=mmap)
        except pickle.UnpicklingError as exc:
            raise InputError(
                f"refusing to unpickle '{path}': it holds more than tensors ({refused_reason(exc)}); "
                "convert it to safetensors"
            ) from None
    if key is not None:
        if not isinstance(state, dict) or key not in state:
            raise InputError(f"'{path}' has no entry '{key}'")
        state = state[key]
    for wrapper in ("state_dict", "model", "module"):
        inner = state.get(wrapper) if isinstance(state, dict) else None
        if isinstance(inner, dict) and not any(hasattr(v, "shape") for v in state.values()):
            state = inner
    if not isinstance(state, dict):
        raise InputError(f"'{path}' does not hold a state dict (got {type(state).__name__})")
    return state


#: The attribute :mod:`rewardzoo.core.residency` sets on a tensor whose wake from ``offload: drop`` failed.
WAKE_FAILED = "_rewardzoo_wake_failed"


def cannot_wake(holder: Any) -> bool:
    """Whether ``holder`` (a torch module, or an object holding modules as attributes: a cached backbone) holds a
    tensor whose wake from ``offload: drop`` failed (its checkpoint file gone or rewritten since load): a
    process-wide model cache loads a fresh copy for new rewards instead of handing that one out."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return False
    values = [holder] if isinstance(holder, torch.nn.Module) else list(getattr(holder, "__dict__", {}).values())
    for module in values:
        if isinstance(module, torch.nn.Module):
            for tensor in (*module.parameters(), *module.buffers()):
                if getattr(tensor, WAKE_FAILED, False):
                    return True
    return False


def refused_reason(exc: Exception) -> str:
    """The part of ``torch.load(weights_only=True)``'s refusal that says what the file needs ('Unsupported
    global: GLOBAL pkg.Class ...'), without torch's advice to reload it with ``weights_only=False``."""
    import re

    text = str(exc)
    found = re.search(
        r"(Unsupported global: GLOBAL [\w.]+|Trying to load unsupported GLOBAL [\w.]+|Unsupported operand[^.]*|"
        r"Trying to [^.]*)",
        text,
    )
    return found.group(1) if found else (text.strip().splitlines() or [type(exc).__name__])[-1][:200]


def strip_prefix(state: Mapping[str, Any], prefixes: Sequence[str] = ("module.",)) -> dict[str, Any]:
    """Drop a wrapper prefix that every key shares (``module.`` from DataParallel/DDP, ``model.``, ...).

    Each prefix of ``prefixes`` in turn is removed when every key starts with it (so ``module.model.``
    goes with ``("module.", "model.")``); keys that do not all share it stay as they are.
    """
    out = dict(state)
    for prefix in prefixes:
        if out and all(k.startswith(prefix) for k in out):
            out = {k[len(prefix) :]: v for k, v in out.items()}
    return out


def model_folder(source: str, patterns: Sequence[str]) -> Path:
    """``source`` as a local folder: itself when it is a directory, else the hub snapshot of the repository it
    names, holding only the files matching ``patterns`` (a failed fetch is a ConfigError on ``model_path``)."""
    if os.path.isdir(source):
        return Path(source)
    with loading(f"'{source}' from the hub", verb="fetch"):
        from huggingface_hub import snapshot_download

        try:
            snapshot_download(source, allow_patterns=list(patterns), local_files_only=True)
        except Exception:  # not in the cache: one request first, not the client's retries, when it cannot come
            from .hub import require_reachable

            require_reachable(source, f"the files {', '.join(patterns)}")
        return Path(snapshot_download(source, allow_patterns=list(patterns)))


@contextmanager
def loading(what: str, *, field: str = "model_path", verb: str = "load") -> Iterator[None]:
    """Around a library's loading call (``from_pretrained``, ``create_model``, a state dict into a module): any
    failure becomes ``ConfigError("cannot {verb} {what}: {Type}: {message}", field=field)``, chained to the cause.

    ``what`` names the thing and its path (``"the BERT tokenizer '/ckpt'"``); the loader adds the reward's entry.
    A ConfigError raised inside (already naming its field) passes through unchanged.
    """
    try:
        yield
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot {verb} {what}: {type(exc).__name__}: {exc}", field=field) from exc
