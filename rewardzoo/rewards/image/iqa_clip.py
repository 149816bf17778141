"""pyiqa's CLIP for the CLIP-based quality metrics (CLIP-IQA(+), LIQE, LAION-Aes), built from a state dict, never
downloaded.

pyiqa's CLIP-IQA and LIQE constructors call ``clip_model.load(name)`` (LAION-Aes openai-clip's ``clip.load``),
which downloads OpenAI's CLIP and runs it through ``torch.jit.load`` / ``torch.load(weights_only=False)``. Here
the CLIP is pyiqa's own ``CLIP`` class, its sizes read from the shapes of the ``clip_model.*`` entries of the checkpoint (OpenAI's conventions: one
attention head per 64 channels, a ResNet tower's last stage 32x its stem width and stride), its weights loaded
strictly from those entries; the arch's constructor gets it in place of ``load``.
"""

from __future__ import annotations

import importlib
import math
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace
from typing import Any
from unittest import mock

import torch

from ...errors import ConfigError

#: the checkpoint's prefix of the CLIP entries (LIQE's own attribute name; CLIP-IQA keeps its CLIP out of its
#: state dict, so its checkpoint carries them under the same prefix beside ``prompt_learner.*``).
PREFIX = "clip_model."
_JIT_SCALARS = ("input_resolution", "context_length", "vocab_size")


def _count(state: Mapping[str, Any], pattern: str) -> int:
    found = re.compile(pattern)
    return len({m.group(1) for key in state if (m := found.match(key))})


def _shape(state: Mapping[str, torch.Tensor], key: str, path: str) -> torch.Size:
    if key not in state:
        raise ConfigError(f"'{path}' has no '{PREFIX}{key}': not an OpenAI CLIP state", field="model_path")
    return state[key].shape


def clip_sizes(state: Mapping[str, torch.Tensor], path: str) -> dict[str, Any]:
    """pyiqa ``CLIP(...)`` arguments from the shapes of an OpenAI CLIP state dict (keys without the prefix)."""
    width = _shape(state, "ln_final.weight", path)[0]
    sizes: dict[str, Any] = {
        "embed_dim": _shape(state, "text_projection", path)[1],
        "context_length": _shape(state, "positional_embedding", path)[0],
        "vocab_size": _shape(state, "token_embedding.weight", path)[0],
        "transformer_width": width,
        "transformer_heads": width // 64,
        "transformer_layers": _count(state, r"transformer\.resblocks\.(\d+)\."),
    }
    if "visual.proj" in state:  # a ViT tower
        conv = _shape(state, "visual.conv1.weight", path)
        grid = math.isqrt(_shape(state, "visual.positional_embedding", path)[0] - 1)
        sizes |= {
            "vision_width": conv[0],
            "vision_patch_size": conv[-1],
            "image_resolution": conv[-1] * grid,
            "vision_layers": _count(state, r"visual\.transformer\.resblocks\.(\d+)\."),
        }
    else:  # a modified ResNet tower with attention pooling
        grid = math.isqrt(_shape(state, "visual.attnpool.positional_embedding", path)[0] - 1)
        sizes |= {
            "vision_width": _shape(state, "visual.layer1.0.conv1.weight", path)[0],
            "vision_patch_size": None,
            "image_resolution": 32 * grid,
            "vision_layers": tuple(_count(state, rf"visual\.layer{b}\.(\d+)\.") for b in (1, 2, 3, 4)),
        }
    return sizes


def build_clip(state: Mapping[str, torch.Tensor], path: str, name: str, openai: bool = False) -> torch.nn.Module:
    """pyiqa's ``CLIP`` (``openai``: openai-clip's own class, which LAION-Aes gets from ``clip.load``; float32, as
    ``clip.load`` leaves it on the CPU) sized from ``state`` (OpenAI key names), loaded strictly, in eval mode."""
    CLIP = importlib.import_module("clip.model" if openai else "pyiqa.archs.clip_model").CLIP

    try:
        clip = CLIP(**clip_sizes(state, path))
        clip.load_state_dict(dict(state), strict=True)
    except (RuntimeError, ValueError, ZeroDivisionError, AssertionError) as exc:
        raise ConfigError(
            f"'{path}' does not hold a CLIP that fits pyiqa's {name!r}: {str(exc)[:400]}", field="model_path"
        ) from None
    return clip.eval().requires_grad_(False)


def split(state: Mapping[str, torch.Tensor], path: str, name: str) -> tuple[dict[str, torch.Tensor], dict]:
    """The checkpoint's CLIP entries (prefix removed) and the rest; no CLIP entry is a ConfigError."""
    clip = {k[len(PREFIX) :]: v for k, v in state.items() if k.startswith(PREFIX)}
    for scalar in _JIT_SCALARS:  # a TorchScript CLIP's state dict also carries these sizes: not weights
        clip.pop(scalar, None)
    if not clip:
        raise ConfigError(
            f"'{path}' has no '{PREFIX}*' entries: pyiqa's {name!r} needs its CLIP's weights in the checkpoint",
            field="model_path",
        )
    return clip, {k: v for k, v in state.items() if not k.startswith(PREFIX)}


def prefixed(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with the ``clip_model.`` prefix added when it is a bare OpenAI CLIP state dict (no prefixed key,
    OpenAI's ``token_embedding.weight`` present): LIQE's authors publish ``LIQE.pt`` so, a CLIP state their code
    loads with ``clip.load("ViT-B/32", jit=False)[0].load_state_dict(torch.load(ckpt))``."""
    if not any(k.startswith(PREFIX) for k in state) and "token_embedding.weight" in state:
        return {PREFIX + k: v for k, v in state.items()}
    return dict(state)


@contextmanager
def given_clip(module_name: str, clip: torch.nn.Module) -> Iterator[None]:
    """Construct a pyiqa CLIP arch with ``clip`` in place of its module's ``load``, and LIQE's text-feature cache
    (read back with ``weights_only=False`` when present) in a fresh temporary folder, so it is always recomputed
    from ``clip`` and never read."""
    module = importlib.import_module(module_name)
    with ExitStack() as stack:
        if hasattr(module, "load"):  # pyiqa's own clip_model.load
            stack.enter_context(mock.patch.object(module, "load", lambda *a, **k: clip))
        else:  # LAION-Aes: openai-clip's clip.load (model, preprocess), replaced in that module only
            stack.enter_context(mock.patch.object(module, "clip", SimpleNamespace(load=lambda *a, **k: (clip, None))))
        if hasattr(module, "DEFAULT_CACHE_DIR"):
            cache = stack.enter_context(tempfile.TemporaryDirectory(prefix="rewardzoo-iqa-"))
            stack.enter_context(mock.patch.object(module, "DEFAULT_CACHE_DIR", cache))
        yield
