"""Placing models on devices by memory: the one rule ``rewardzoo plan`` and ``device: auto`` share.

:func:`place` is pure (no device is queried): the models largest first, each onto the device with the most free
memory left after the models placed before it (ties: the device listed first). A model is one key, so the entries
that share a model (the loader's dedup) always land together. :func:`parse_budgets` reads ``--devices``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

from ..errors import ConfigError
from ..shared.checkpoints import parse_size
from ..shared.device import valid_device

K = TypeVar("K", bound=Hashable)


def place(sizes: Mapping[K, int], free: Mapping[str, int]) -> dict[K, str]:
    """``{model: device}`` for models of ``sizes`` bytes over devices with ``free`` bytes (see the module
    docstring). A model that fits nowhere still goes to the device with the most left: whether a placement fits is
    the plan's to say. ValueError when ``free`` names no device."""
    if not free:
        raise ValueError("no device to place models on")
    left = dict(free)
    out: dict[K, str] = {}
    for key in sorted(sizes, key=lambda k: -sizes[k]):  # stable: equal sizes keep their order
        device = max(left, key=lambda d: left[d])  # the first of equals
        out[key] = device
        left[device] -= sizes[key]
    return out


def parse_budgets(text: str) -> dict[str, int]:
    """``cuda:0=80GiB,cuda:1=80GiB`` -> ``{"cuda:0": 85899345920, ...}``; ConfigError (field ``--devices``) naming
    the part that does not parse, a unit it does not know, an unknown or repeated device."""
    out: dict[str, int] = {}
    parts = [p.strip() for p in str(text).split(",")]
    for part in parts:
        device, eq, size = (s.strip() for s in part.partition("="))
        if not eq or not device or not size:
            raise ConfigError(f"'{part}' in --devices is not DEVICE=SIZE (e.g. cuda:0=80GiB)", field="--devices")
        if device == "cuda":
            device = "cuda:0"
        if device == "auto" or not valid_device(device):
            raise ConfigError(
                f"'{part}' in --devices: unknown device '{device}'; use cpu, cuda:N or mps", field="--devices"
            )
        if device in out:
            raise ConfigError(f"'{part}' in --devices: {device} is given twice", field="--devices")
        try:
            out[device] = parse_size(size)
        except ValueError as exc:
            raise ConfigError(f"'{part}' in --devices: {exc}", field="--devices") from None
    return out


def cuda_free_memory() -> dict[str, int]:
    """Free bytes per CUDA device of this machine (``torch.cuda.mem_get_info``); empty without CUDA."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return {}
    import torch

    if not torch.cuda.is_available():
        return {}
    return {f"cuda:{i}": int(torch.cuda.mem_get_info(i)[0]) for i in range(torch.cuda.device_count())}
