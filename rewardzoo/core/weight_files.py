"""Where a loaded reward's tensors are in its checkpoint files, so that a dropped reward wakes from them.

The files (:func:`checkpoint_files`): the checkpoints (safetensors; torch zip files ``.bin`` ``.pt`` ``.pth``
``.ckpt``) under the model paths the reward was loaded from: a local file or directory, or a hub id already in
the local cache (nothing is downloaded). A tensor is bound (:func:`bind`) to a checkpoint entry of the same shape
whose values, cast to the tensor's dtype, equal the tensor's bit for bit (candidates found by a fingerprint of a
few elements, then compared in full, once, at the first drop): names are not used, since a checkpoint and the
module loading it differ in prefixes and, with transformers' renames, in whole names; any bit-equal entry brings
back exactly what was there. A tensor equal to no entry (a buffer computed at load, a weight changed or fused
after loading) is not bound.

Reading back (:func:`read_entries`) is memory-mapped (safetensors; ``torch.load(mmap=True)``): no private copy
unless the dtype differs, and the pages of each tensor are mapped in one call (``MADV_POPULATE_READ``) instead of
one fault per page on first use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..shared.weights import load_state_dict

CHECKPOINT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
_MAX_TRIES = 8  # candidates compared in full per tensor (same shape and fingerprint) before giving up


@dataclass(frozen=True)
class Entry:
    """One tensor of a checkpoint file, with the file's size and modification time when it was bound."""

    path: str
    key: str
    size: int
    mtime_ns: int


class FileChanged(OSError):
    """A bound checkpoint file is gone or was rewritten since the tensors were bound to it."""


def checkpoint_files(roots: Iterable[str | None]) -> list[str]:
    """The checkpoint files under ``roots`` (files, directories two levels deep, hub ids in the local cache)."""
    found: dict[str, None] = {}
    for root in roots:
        for path in _files_of(root):
            found.setdefault(os.path.realpath(path), None)
    return list(found)


def _files_of(root: str | None) -> list[str]:
    if not isinstance(root, str) or not root:
        return []
    local = _local(root.removeprefix("hf-hub:"))
    if local is None:
        return []
    if os.path.isfile(local):
        return [local] if local.endswith(CHECKPOINT_SUFFIXES) else []
    out = []
    base = local.rstrip(os.sep).count(os.sep)
    for folder, dirs, names in os.walk(local):
        if folder.count(os.sep) - base >= 2:
            dirs[:] = []
        out += [os.path.join(folder, n) for n in sorted(names) if n.endswith(CHECKPOINT_SUFFIXES)]
    return out


def _local(root: str) -> str | None:
    if os.path.exists(root):
        return root
    if root.count("/") != 1 or root.startswith((".", "/")):
        return None
    try:  # a hub id: its snapshot if the local cache has it (never a download)
        from huggingface_hub import snapshot_download

        return str(snapshot_download(root, local_files_only=True))
    except Exception:
        return None


def read(path: str) -> dict[str, Any]:
    """The tensors of a checkpoint file, memory-mapped (nothing is read until used)."""
    return load_state_dict(path, mmap=True)


def bind(tensors: Iterable[Any], files: list[str]) -> dict[int, Entry]:
    """``{id(tensor): Entry}`` for each of ``tensors`` found in ``files`` (see the module docstring)."""
    tensors = [t for t in tensors if t.data.is_contiguous() and t.data.numel()]
    shapes = {(tuple(t.shape), t.dtype) for t in tensors}
    index: dict[tuple[Any, ...], list[tuple[str, str]]] = {}
    states: dict[str, dict[str, Any]] = {}
    for path in files:
        try:
            states[path] = read(path)
        except Exception:  # not a state dict, or a torch file too old to map: its tensors are not bound
            continue
        for key, value in states[path].items():
            for shape, dtype in shapes:
                if hasattr(value, "shape") and tuple(value.shape) == shape:
                    index.setdefault(_fingerprint(value, dtype), []).append((path, key))
    out: dict[int, Entry] = {}
    for tensor in tensors:
        host = tensor.data.detach().to("cpu")
        for path, key in index.get(_fingerprint(host, host.dtype), ())[:_MAX_TRIES]:
            if same_bits(states[path][key].to(host.dtype), host):
                stat = os.stat(path)
                out[id(tensor)] = Entry(path, key, stat.st_size, stat.st_mtime_ns)
                break
    return out


def _fingerprint(value: Any, dtype: Any) -> tuple[Any, ...]:
    """Shape, dtype and the bits of 16 evenly spaced elements (cast to ``dtype``): a cheap key to find candidates."""
    import torch

    flat = value.reshape(-1)
    n = flat.numel()
    picks = torch.tensor(sorted({i * (n - 1) // 15 for i in range(16)}))  # exact: float32 rounds above 2^24
    return (tuple(value.shape), dtype, flat[picks].to(dtype).contiguous().view(torch.uint8).numpy().tobytes())


def same_bits(a: Any, b: Any) -> bool:
    """Whether two tensors of one dtype and shape hold the same bits (-0.0 and NaN payloads included)."""
    import torch

    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    if (a.dtype.is_floating_point or a.dtype.is_complex) and a.element_size() in ints:
        as_int = ints[a.element_size()]
        a, b = a.contiguous().view(as_int), b.contiguous().view(as_int)
    return bool(torch.equal(a, b))


def read_entries(entries: dict[str, Entry], dtypes: dict[str, Any]) -> dict[str, Any]:
    """The tensors of ``entries`` (by key), mapped from their files and cast to ``dtypes``; :class:`FileChanged`
    (naming the file) when one is gone or was rewritten since it was bound, ``OSError`` when it cannot be read."""
    by_file: dict[str, list[tuple[str, Entry]]] = {}
    for key, entry in entries.items():
        by_file.setdefault(entry.path, []).append((key, entry))
    out: dict[str, Any] = {}
    for path, wanted in by_file.items():
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            raise FileChanged(f"its checkpoint file {path} is gone") from None
        if (stat.st_size, stat.st_mtime_ns) != (wanted[0][1].size, wanted[0][1].mtime_ns):
            raise FileChanged(f"its checkpoint file {path} was rewritten since it was loaded")
        try:
            state = read(path)
            for key, entry in wanted:
                value = state[entry.key]
                if value.dtype != dtypes[key]:
                    value = value.to(dtypes[key])
                else:
                    populate(value)
                out[key] = value
        except Exception as exc:
            raise OSError(f"reading its checkpoint file {path} failed ({type(exc).__name__}: {exc})") from exc
    return out


_LIBC: Any = None
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def populate(tensor: Any) -> None:
    """Map the pages of a memory-mapped CPU tensor now (one ``madvise`` instead of a fault per page on first use);
    nothing where the system cannot."""
    global _LIBC
    if not sys.platform.startswith("linux") or tensor.device.type != "cpu":
        return
    if _LIBC is None:
        import ctypes

        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    start = tensor.data_ptr()
    begin = start - start % _PAGE
    _LIBC.madvise(begin, start + tensor.numel() * tensor.element_size() - begin, 22)  # MADV_POPULATE_READ
