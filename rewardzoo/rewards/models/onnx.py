"""ONNX Runtime sessions for rewards: one per model file and reward instance, on the spec's device.

onnxruntime is imported inside :func:`onnx_session`, so importing this module costs nothing.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from ...errors import ConfigError
from ...shared.options import positive_int


def providers_for(device: str) -> list[Any]:
    """Execution providers for a rewardzoo device string: CUDA (``cuda:N``) first when onnxruntime has
    it, then the CPU. A CUDA device without ``onnxruntime-gpu`` runs on the CPU, with a warning."""
    import onnxruntime as ort

    if str(device).startswith("cuda"):
        if "CUDAExecutionProvider" in ort.get_available_providers():
            index = int(str(device).partition(":")[2] or 0)
            return [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]
        warnings.warn(
            f"device '{device}' was asked for, but this onnxruntime has no CUDAExecutionProvider "
            "(install onnxruntime-gpu); the ONNX model runs on the CPU",
            RuntimeWarning,
            stacklevel=3,
        )
    return ["CPUExecutionProvider"]


class ReleasableSession:
    """An ``onnxruntime.InferenceSession`` that can be released (its weights freed) and recreated from the same
    file, with the same options (a reward's ``offload:``, rewardzoo.core.residency). Attribute access (``run``,
    ``get_inputs``) reaches the session, recreating it first when it was released."""

    def __init__(self, path: str | os.PathLike, threads: int | None, device: str) -> None:
        self.path, self.threads, self.device = os.fspath(path), threads, device
        self._session: Any = _new_session(self.path, threads, device)

    @property
    def released(self) -> bool:
        return self._session is None

    def release(self) -> None:
        self._session = None

    def restore(self) -> None:
        """Recreate the session; ConfigError naming the file when it is gone."""
        if self._session is None:
            self._session = _new_session(self.path, self.threads, self.device)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        self.restore()
        return getattr(self._session, name)


def onnx_session(path: str | os.PathLike, *, threads: int | None = None, device: str = "cpu") -> Any:
    """An ``onnxruntime.InferenceSession`` for the model file ``path`` (as a :class:`ReleasableSession`).

    ``threads``: intra-op threads (None = onnxruntime's default, one per physical core); inter-op
    parallelism stays at 1, as these models are single chains of operators.
    """
    threads = positive_int(threads, "kwargs.threads", allow_none=True)
    return ReleasableSession(path, threads, device)


def _new_session(path: str, threads: int | None, device: str) -> Any:
    import onnxruntime as ort

    if not os.path.isfile(path):
        raise ConfigError(f"ONNX model file not found: '{path}'", field="model_path")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: no optimiser chatter on every load
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(os.fspath(path), sess_options=options, providers=providers_for(device))
