"""Where a loaded reward's tensors are in its checkpoint files, so that a dropped reward wakes from them.

The files (:func:`checkpoint_files`): the checkpoints (safetensors; torch zip files ``.bin`` ``.pt`` ``.pth``
``.ckpt``) under the model paths the reward was loaded from: a local file or directory, or a hub id already in
the local cache (nothing is downloaded). A tensor is bound (:func:`bind`) to a checkpoint entry of the same shape
whose values, cast to the tensor's dtype, equal the tensor's bit for bit (candidates found by a fingerprint of a
few elements, then compared in full, once, at the first drop): names are not used, since a checkpoint and the
module loading it differ in prefixes and, with transformers' renames, in whole names; any bit-equal entry brings
back exactly what was there. A tensor equal to no entry (a buffer computed at load, a weight changed or fused
after loading) is not bound.

Integrity: an entry keeps its file's identity (device, inode, size, modification and change time: ``utime`` can
restore the modification time of a file rewritten in place, not its change time nor its inode) and two digests of
the tensor's bits as they were live: SHA-256 of all of them (:func:`digest`), and SHA-256 of 16 evenly spaced 4 KiB
windows (:func:`sample_digest`). Reading back (:func:`read_entries`) copies each tensor out of its file into
private memory first (a private mapping alone is not enough: on Linux, its pages not yet written reflect later
writes to the file), then checks that copy: the windows' digest when the file's identity is unchanged (stat taken
before and after the copy), the full digest when it changed (a file copied or restored with the same bits is
accepted; other bits are :class:`FileChanged`). What goes live is therefore exactly what was checked, and no later
write to the file reaches it.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..shared.weights import load_state_dict

CHECKPOINT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
_MAX_TRIES = 8  # candidates compared in full per tensor (same shape and fingerprint) before giving up


Identity = tuple[int, int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns


@dataclass(frozen=True)
class Entry:
    """One tensor of a checkpoint file: the file's :func:`identity` when the tensor was bound, and the digests of
    the tensor's live bits then (:func:`digest`, :func:`sample_digest`)."""

    path: str
    key: str
    identity: Identity
    digest: bytes
    sample: bytes


def identity(path: str) -> Identity:
    """What ``stat`` says of ``path`` that a rewrite in place changes (``utime`` cannot restore ``st_ctime``)."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def entry(path: str, key: str, stat: Identity, tensor: Any) -> Entry:
    """The :class:`Entry` of ``tensor`` (its live bits, on the CPU) at ``path`` / ``key``."""
    return Entry(path, key, stat, digest(tensor), sample_digest(tensor))


def _bytes(tensor: Any) -> Any:
    """The bytes of a contiguous CPU tensor, as a numpy ``uint8`` array over the same memory (no copy)."""
    import torch

    return tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy()


def digest(tensor: Any) -> bytes:
    """SHA-256 of every byte of ``tensor`` (a CPU tensor; hashlib releases the GIL while it hashes)."""
    return hashlib.sha256(_bytes(tensor).data).digest()


_WINDOWS, _WINDOW = 16, 4096


def sample_digest(tensor: Any) -> bytes:
    """SHA-256 of 16 evenly spaced 4 KiB windows of ``tensor``'s bytes (all of them when that is less), with the
    byte count: the cheap check of a tensor read back from a file whose identity is unchanged."""
    data = _bytes(tensor)
    n = int(data.shape[0])
    h = hashlib.sha256(n.to_bytes(8, "little"))
    if n <= _WINDOWS * _WINDOW:
        h.update(data.data)
    else:
        for i in range(_WINDOWS):
            start = i * (n - _WINDOW) // (_WINDOWS - 1)
            h.update(data[start : start + _WINDOW].data)
    return h.digest()


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
    stats: dict[str, Identity] = {}
    for path in files:
        try:
            stats[path] = identity(path)  # before reading: a rewrite from now on changes it
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
                # the digests are of the live bits (private memory): what a wake must bring back
                out[id(tensor)] = entry(path, key, stats[path], host)
                break
    return out


def _fingerprint(value: Any, dtype: Any) -> tuple[Any, ...]:
    """Shape, dtype and the bits of 16 evenly spaced elements (cast to ``dtype``): a cheap key to find candidates."""
    import torch

    flat = value.reshape(-1)
    # integer positions: a float32 linspace rounds above 2**24 elements (a CLIP token embedding), past the end
    picks = torch.tensor(sorted({i * (flat.numel() - 1) // 15 for i in range(16)}), dtype=torch.long)
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


def read_entries(
    entries: dict[str, Entry],
    dtypes: dict[str, Any],
    what: str = "checkpoint file",
    devices: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Entry]]:
    """The tensors of ``entries`` (by key), copied out of their files into private CPU memory, cast to ``dtypes``,
    checked against the entries' digests (see the module docstring) and moved to ``devices`` (one tensor at a time:
    a wake onto a GPU holds one tensor in host memory, not the model); and the entries whose file's identity
    changed while their bits did not, with the new identity. :class:`FileChanged` (naming the ``what`` file) when
    one is gone or holds other bits, ``OSError`` when it cannot be read."""
    by_file: dict[str, list[tuple[str, Entry]]] = {}
    for key, item in entries.items():
        by_file.setdefault(item.path, []).append((key, item))
    out: dict[str, Any] = {}
    renewed: dict[str, Entry] = {}
    for path, wanted in by_file.items():
        try:
            before = identity(path)
        except FileNotFoundError:
            raise FileChanged(f"its {what} {path} is gone") from None
        try:
            state = read(path)
        except Exception as exc:
            raise OSError(f"reading its {what} {path} failed ({type(exc).__name__}: {exc})") from exc
        mapped = file_mappings(before)
        for key, item in wanted:
            try:
                copy = _private(state[item.key], dtypes[key])
                after = identity(path)  # unchanged since before: the copy is of the file as it was bound
            except Exception as exc:
                raise OSError(f"reading its {what} {path} failed ({type(exc).__name__}: {exc})") from exc
            if not (before == after == item.identity and sample_digest(copy) == item.sample):
                if digest(copy) != item.digest:
                    raise FileChanged(f"its {what} {path} was rewritten since it was loaded: it holds other weights")
                renewed[key] = Entry(item.path, item.key, after, item.digest, item.sample)
            if _inside(state[item.key], mapped):  # its file pages leave this process (bf16 waking as float32: 1.5x)
                release(state[item.key])
            device = (devices or {}).get(key)
            out[key] = copy if device is None or str(device) == "cpu" else copy.to(device)
        del state  # the mapping goes: nothing live refers to the file
    return out, renewed


def _private(value: Any, dtype: Any) -> Any:
    """``value`` (memory-mapped) as a tensor of ``dtype`` in private memory that no write to the file reaches: an
    anonymous mapping of its own, unmapped when the tensor is freed (from the heap, glibc would keep the pages of a
    dropped reward: sizes under its 32 MB mmap threshold come from an arena that does not shrink)."""
    import mmap

    import torch

    size = value.numel() * torch.empty((), dtype=dtype).element_size()
    if size == 0:
        return torch.empty(value.shape, dtype=dtype)
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for advice in (getattr(mmap, "MADV_HUGEPAGE", None), 23):  # 23: MADV_POPULATE_WRITE (Linux 5.14), all pages now
        try:  # huge pages where the kernel allows them: half the time of the copy into 4 KiB pages
            if advice is not None:
                buf.madvise(advice)
        except OSError:
            pass
    out = torch.frombuffer(buf, dtype=dtype).view(value.shape)
    if value.dtype == dtype:
        populate(value)  # one madvise to map the file's pages, then one copy
    out.copy_(value)
    return out


_LIBC: Any = None
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _madvise(tensor: Any, advice: int, whole_pages: bool) -> None:
    """``madvise`` over a CPU tensor's bytes: from the page holding its first byte, or (``whole_pages``) only over
    the pages that hold nothing else; nothing where the system cannot."""
    global _LIBC
    if not sys.platform.startswith("linux") or tensor.device.type != "cpu":
        return
    if _LIBC is None:
        import ctypes

        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    begin = start - start % _PAGE
    if whole_pages:
        begin, end = -(-start // _PAGE) * _PAGE, end - end % _PAGE
    if end > begin:
        _LIBC.madvise(begin, end - begin, advice)


def populate(tensor: Any) -> None:
    """Map the pages of a memory-mapped CPU tensor now (one ``madvise`` instead of a fault per page on first use);
    nothing where the system cannot."""
    _madvise(tensor, 22, whole_pages=False)  # MADV_POPULATE_READ


def release(tensor: Any) -> None:
    """Unmap the pages of a memory-mapped, never written CPU tensor from this process (``MADV_DONTNEED``: they stay in
    the page cache and are read again if touched), so that reading a checkpoint one tensor at a time holds one
    tensor's file pages, not the whole file's. Only the pages that hold nothing else (a neighbour may be in use)."""
    _madvise(tensor, 4, whole_pages=True)


def file_mappings(stat: Identity) -> list[tuple[int, int]]:
    """The address ranges of this process mapped from the file of ``stat`` (Linux's ``/proc/self/maps``; else
    none)."""
    dev = f"{os.major(stat[0]):02x}:{os.minor(stat[0]):02x}" if hasattr(os, "major") else None
    out = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) >= 5 and fields[3] == dev and fields[4] == str(stat[1]):
                    lo, hi = fields[0].split("-")
                    out.append((int(lo, 16), int(hi, 16)))
    except OSError:
        return []
    return out


def _inside(tensor: Any, ranges: list[tuple[int, int]]) -> bool:
    """Whether a CPU tensor's bytes lie in one of ``ranges`` (a file's mappings: memory no one else allocated)."""
    if tensor.device.type != "cpu":
        return False
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    return any(lo <= start and end <= hi for lo, hi in ranges)
