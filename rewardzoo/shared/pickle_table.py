"""The tensor table of a ``torch.save`` checkpoint (``.pt`` / ``.pth`` / ``.bin``), read without loading it.

A ``torch.save`` file (zip format, torch >= 1.6) is a zip: ``<root>/data.pkl`` (the saved object, pickled; each
tensor is ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`` and each storage a persistent id
``('storage', <torch.XStorage>, key, location, numel)``) and ``<root>/data/<key>`` (the storages' raw bytes).
:func:`pickled_table` unpickles ``data.pkl`` alone with a restricted unpickler that resolves only that rebuild
function, torch's typed storage classes (as dtypes) and ``collections.OrderedDict``, and returns, per tensor, its
name, dtype, element count and storage: nothing else the file names is imported or called, and no tensor data is
read (torch is not imported). What ``rewardzoo plan`` counts for a part that names the tensors it holds
(``include`` / ``exclude`` / ``merged`` of :class:`~rewardzoo.shared.checkpoints.Checkpoint`), where a file size
cannot tell them apart. Anything else (the legacy non-zip format, other globals, a ``data.pkl`` over
:data:`MAX_PICKLE_BYTES`) gives ``None``: the caller counts the file by its size.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .torchscript import _STORAGE_DTYPES

#: bytes of ``data.pkl`` read at most (a 72B model's state dict pickles to a few MB)
MAX_PICKLE_BYTES = 64 << 20
ELEMENT_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
                 "int8": 1, "uint8": 1, "bool": 1}  # fmt: skip
FLOATING = frozenset({"float64", "float32", "float16", "bfloat16"})


@dataclass(frozen=True)
class PickledTensor:
    """One tensor of the table: its dtype, element count, and where its data lie (storage key, offset in elements):
    entries with the same ``(storage, offset, numel)`` are one tensor saved under two names (tied weights)."""

    dtype: str
    numel: int
    storage: str
    offset: int


@dataclass(frozen=True)
class _Storage:
    dtype: str
    key: str


class _StorageType:
    def __init__(self, dtype: str) -> None:
        self.dtype = dtype


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        raise pickle.UnpicklingError(f"{module}.{name} is not a tensor table's")

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError("not a torch storage")
        _, kind, key, _location, _numel = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str):
            raise pickle.UnpicklingError("not a typed torch storage")
        return _Storage(kind.dtype, key)


def _rebuild(storage: Any, offset: Any, size: Any, *_: Any) -> PickledTensor:
    if not isinstance(storage, _Storage) or type(offset) is not int or not isinstance(size, tuple):
        raise pickle.UnpicklingError("not a tensor")
    numel = 1
    for dim in size:
        if type(dim) is not int or dim < 0:
            raise pickle.UnpicklingError("not a tensor shape")
        numel *= dim
    return PickledTensor(storage.dtype, numel, storage.key, offset)


def _leaves(obj: Any, out: dict[str, PickledTensor], depth: int = 0) -> None:
    """The tensors of nested dicts by their innermost key (a ``{'state_dict': {...}}`` wrapper is looked through)."""
    if depth > 8 or not isinstance(obj, dict):
        return
    for key, value in obj.items():
        if isinstance(value, PickledTensor) and isinstance(key, str):
            out[key] = value
        else:
            _leaves(value, out, depth + 1)


def pickled_table(path: str | os.PathLike[str]) -> dict[str, PickledTensor] | None:
    """``name -> PickledTensor`` of a zip-format ``torch.save`` file's tensors (nested dicts looked through), or None
    when the file is not one this reads (see the module docstring)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(names) != 1 or archive.getinfo(names[0]).file_size > MAX_PICKLE_BYTES:
                return None
            raw = archive.read(names[0])
        tree = _Unpickler(io.BytesIO(raw)).load()
    except (OSError, zipfile.BadZipFile, pickle.UnpicklingError, EOFError, ValueError, TypeError,
            AttributeError, IndexError, KeyError, RecursionError, MemoryError):  # fmt: skip
        return None
    out: dict[str, PickledTensor] = {}
    _leaves(tree, out)
    return out or None


def table_bytes(
    table: dict[str, PickledTensor],
    dtype: str | None,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    merged: tuple[str, ...] = (),
) -> tuple[int, int]:
    """(bytes, tensor count) of the tensors of ``table`` whose names start with a prefix of ``include`` (any, when
    empty), with none of ``exclude`` and contain none of ``merged``; floating tensors at ``dtype`` (None: as
    stored); a tensor saved under several names counted once."""
    seen: set[tuple[str, int, int]] = set()
    total = 0
    for name, t in table.items():
        if (include and not name.startswith(include)) or name.startswith(exclude) or any(m in name for m in merged):
            continue
        if (t.storage, t.offset, t.numel) in seen:
            continue
        seen.add((t.storage, t.offset, t.numel))
        size = ELEMENT_BYTES[dtype] if dtype in ELEMENT_BYTES and t.dtype in FLOATING else ELEMENT_BYTES[t.dtype]
        total += t.numel * size
    return total, len(seen)
