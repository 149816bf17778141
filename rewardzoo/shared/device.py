"""Device and dtype names: validation without torch, resolution with it; one CUDA side stream per device."""

from __future__ import annotations

import importlib.util
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

DTYPE_ALIASES = {
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float64": "float64",
    "fp64": "float64",
}
_DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def canonical_dtype(name: str) -> str:
    """Canonical dtype name for an accepted alias; ValueError otherwise."""
    try:
        return DTYPE_ALIASES[str(name).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype '{name}'; use one of {sorted(set(DTYPE_ALIASES.values()))}") from None


def valid_device(name: str) -> bool:
    return bool(_DEVICE_RE.match(str(name)))


def resolve_device(name: str) -> str:
    """'auto' -> 'cuda:N' when CUDA is available, else 'cpu'; 'cuda' -> 'cuda:<current>'.

    'cpu' (and 'auto' where torch is not installed) resolves without importing torch.
    """
    name = str(name)
    if importlib.util.find_spec("torch") is None:  # no torch: nothing but the CPU (check_device says so)
        return "cpu" if name in ("cpu", "auto") else name
    if name == "cpu":
        return "cpu"
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cuda:0"
    return name


def available_devices() -> list[str]:
    """The devices this machine has: cpu, then cuda:N and mps where torch sees them."""
    if importlib.util.find_spec("torch") is None:
        return ["cpu"]
    import torch

    found = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else ["cpu"]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def check_device(resolved: str) -> str:
    """``resolved`` when this machine has it; ValueError listing the devices it has otherwise."""
    if resolved == "cpu":
        return resolved
    found = available_devices()
    if resolved not in found:
        raise ValueError(f"device '{resolved}' does not exist on this machine; it has: {', '.join(found)}")
    return resolved


def torch_dtype(name: str):
    """The torch dtype for a dtype name or alias."""
    import torch

    return getattr(torch, canonical_dtype(name))


AUTOCAST_OFF = (None, False, "none", "off")


def autocast_dtype(option: object, device: str, reference: dict[str, str] | None = None) -> str | None:
    """The autocast dtype a reward runs under, or None (no autocast).

    ``option``: ``"auto"`` (the reference's autocast on this device type: ``reference`` maps a device type
    such as ``"cuda"`` to a dtype name; other device types run without autocast), a dtype name or alias,
    or one of None / false / ``"none"`` / ``"off"``. ValueError for anything else.
    """
    if option in AUTOCAST_OFF or (isinstance(option, str) and option.lower() in ("none", "off")):
        return None
    if option == "auto":
        return (reference or {}).get(str(device).split(":")[0])
    if not isinstance(option, str):
        raise ValueError(f"autocast must be 'auto', null or a dtype name, got {option!r}")
    name = canonical_dtype(option)
    if name not in ("float16", "bfloat16"):
        raise ValueError(f"autocast runs in float16 or bfloat16, got {option!r}")
    return name


def autocast_context(device: str, dtype: str | None):
    """``torch.autocast`` on ``device``'s type in ``dtype``; a no-op context when ``dtype`` is None."""
    import contextlib

    import torch

    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=str(device).split(":")[0], dtype=torch_dtype(dtype))


class DeviceStreams:
    """One CUDA side stream per device, created on first use; nothing at all for CPU rewards.

    A reward call on ``cuda:N`` runs on that device's side stream, after the work the caller had queued on
    its current stream there (an event recorded by :meth:`ready_events`), and returns once the side stream
    is done. Used by the incremental runner's workers and by the engine's overlapped streams; thread-safe.
    """

    def __init__(self) -> None:
        self._streams: dict[str, Any] = {}
        self._lock = threading.Lock()

    @staticmethod
    def is_cuda(reward: Any) -> bool:
        return str(getattr(reward, "device", "cpu")).startswith("cuda")

    def stream(self, device: str):
        import torch

        dev = torch.device(device)
        key = str(dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device()))
        with self._lock:
            if key not in self._streams:
                self._streams[key] = torch.cuda.Stream(device=key)
            return self._streams[key]

    @staticmethod
    def ready_events(devices: Iterable[str]) -> dict[str, Any]:
        """An event recorded on each device's current stream: work queued there so far (the samples)."""
        import torch

        events = {}
        for device in set(devices):
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(torch.device(device)))
            events[device] = event
        return events

    def call(self, fn: Callable[[], T], device: str, event: Any) -> T:
        import torch

        stream = self.stream(device)
        with torch.cuda.stream(stream):
            if event is not None:
                stream.wait_event(event)
            out = fn()
        stream.synchronize()
        return out
