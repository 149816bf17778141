"""The client side of same-host shared memory: reusable segments, and arrays that already live in one.

A :class:`Segment` is a ``memfd`` named ``rewardzoo-wire``, sealed against shrinking and growing (so a server that
maps it can never take a SIGBUS: the file can neither lose pages under its mapping nor be swapped for another) but
writable by this process, and mapped read-write here. Two uses:

- :class:`SegmentPool`: a request's buffers are copied into a free segment of the pool (a memcpy into pages mapped
  long ago: ~2 ms for 25 MB, against ~14 ms to create and fill a fresh file), the server maps it, and the segment
  goes back to the pool only once the server's answer has arrived (:meth:`SegmentPool.give`); a request that ended
  without an answer (a timeout, a broken connection) may still be read by the server, so its segment is dropped
  (:meth:`SegmentPool.discard`), never reused. Each request holds its own segment: concurrent calls never share one.
- :func:`shared_array`: an array whose memory is a segment of its own. A request whose buffers all lie in one such
  array is sent without copying anything: the server reads the pixels where the caller wrote them. The segment's
  descriptor is closed when the last view of the array is gone.

The server checks every segment before it maps it (:func:`rewardzoo.transport.frames._open_shm`): loopback, same
host, PID namespace and user, the name, the two seals and the size. Since such a segment stays writable, the server
reads raw uint8 pixels in place (every byte value is a valid pixel; shapes come from the header it parsed) and copies
every other buffer (PNG, audio) before checking it, so a client that rewrites its segment mid-request changes only
its own request's pixels and can neither slip past a check nor touch another request.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .frames import ALIGN, SHM_NAME, _align, _header, host_identity, split

__all__ = ["Segment", "SegmentPool", "shared_array", "shared_request"]
#: Segments are made in multiples of this (requests of slightly different sizes reuse the same segment).
GRAIN = 2**20
_PAGE = mmap.PAGESIZE


class Segment:
    """``size`` bytes of a sealed (against shrinking and growing), writable ``memfd``, mapped here; ``fd`` stays
    open while the mapping lives (the server names it by ``/proc/PID/fd/N``)."""

    def __init__(self, size: int) -> None:
        self.size = size
        import fcntl

        fd = os.memfd_create(SHM_NAME, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self.mem = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.array = np.frombuffer(self.mem, np.uint8)
        self.address = self.array.ctypes.data
        weakref.finalize(self.mem, os.close, fd)  # the descriptor lives as long as the mapping (and its views)


class SegmentPool:
    """Free segments kept for reuse (at most ``max_free`` of them and ``max_free_bytes`` in all); thread-safe."""

    def __init__(self, max_free: int = 4, max_free_bytes: int = 2**30) -> None:
        self.max_free, self.max_free_bytes = max_free, max_free_bytes
        self._free: list[Segment] = []
        self._lock = threading.Lock()
        self.made = 0  # segments created (a test's and a benchmark's view of the reuse)

    def take(self, nbytes: int) -> Segment:
        """A segment of at least ``nbytes`` that no other request holds (the smallest free one, else a new one)."""
        with self._lock:
            fits = [s for s in self._free if s.size >= nbytes]
            if fits:
                best = min(fits, key=lambda s: s.size)
                self._free.remove(best)
                return best
            self.made += 1
        return Segment(max(GRAIN, -(-nbytes // GRAIN) * GRAIN))

    def give(self, segment: Segment) -> None:
        """``segment`` back, once the server has answered the request that used it."""
        with self._lock:
            self._free.append(segment)
            while len(self._free) > self.max_free or sum(s.size for s in self._free) > self.max_free_bytes:
                self._free.remove(min(self._free, key=lambda s: s.size))  # dropped: its descriptor closes with it

    def discard(self, segment: Segment) -> None:
        """``segment`` is never reused (the server may still read it): dropped; the server's mapping keeps its
        pages for as long as it holds them."""

    def close(self) -> None:
        with self._lock:
            self._free.clear()

    @property
    def free(self) -> int:
        return len(self._free)


_SHARED: dict[int, tuple[int, int, weakref.ref]] = {}  # address -> (size, fd, its mapping) of each shared_array
_SHARED_LOCK = threading.Lock()


def shared_array(shape: int | Sequence[int], dtype: Any = np.uint8) -> np.ndarray:
    """A zeroed array in a shared memory segment of its own: images written into it (``arr[i] = image``) and sent to
    a server on this host in requests whose buffers all lie in it travel without a copy (:func:`shared_request`).
    Read-write, C-order; its segment is freed with the array and its last view."""
    dt = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    segment = Segment(max(_PAGE, -(-nbytes // _PAGE) * _PAGE))
    with _SHARED_LOCK:
        _SHARED[segment.address] = (segment.size, segment.fd, weakref.ref(segment.mem))
    weakref.finalize(segment.mem, _forget, segment.address)
    return segment.array[:nbytes].view(dt).reshape(shape)  # its views keep the mapping (and the descriptor) alive


def _forget(address: int) -> None:
    with _SHARED_LOCK:
        _SHARED.pop(address, None)


def _owner(buffers: Sequence[memoryview]) -> tuple[dict[str, Any], list[int]] | None:
    """The ``shm`` naming of the shared_array segment holding every one of ``buffers`` and each one's offset in it,
    else None."""
    if not _SHARED or not buffers:
        return None
    addresses = [np.frombuffer(b, np.uint8).ctypes.data for b in buffers]
    with _SHARED_LOCK:
        found = [(base, entry) for base, entry in _SHARED.items() if base <= addresses[0] < base + entry[0]]
    if not found:
        return None
    base, (size, fd, mem) = found[0]
    offsets = [a - base for a in addresses]
    if mem() is None or not all(o >= 0 and o + b.nbytes <= size for o, b in zip(offsets, buffers)):
        return None
    return naming(fd, max(o + b.nbytes for o, b in zip(offsets, buffers))), offsets


def naming(fd: int, used: int) -> dict[str, Any]:
    """A request header's ``shm`` entry for the first ``used`` bytes of this process's segment ``fd``."""
    return {"pid": os.getpid(), "fd": fd, "size": max(_PAGE, -(-used // _PAGE) * _PAGE), "host": host_identity()}


def shared_request(payload: Mapping[str, Any], pool: SegmentPool) -> tuple[bytes, Segment | None]:
    """A request whose buffers travel in shared memory: the framed header naming the segment, and the pool's segment
    it leased (to :meth:`~SegmentPool.give` back once answered), or None when every buffer already lay in one
    :func:`shared_array` (nothing copied)."""
    head, buffers, refs = split(payload, with_refs=True)
    owned = _owner(buffers)
    if owned is not None:
        head["shm"], offsets = owned
        for ref, offset in zip(refs, offsets):
            ref[0] = offset
        return _header(head), None
    used = _align(refs[-1][0] + refs[-1][1]) if refs else ALIGN
    lease = pool.take(used)
    try:
        for ref, view in zip(refs, buffers):
            lease.array[ref[0] : ref[0] + ref[1]] = np.frombuffer(view, np.uint8)
        head["shm"] = naming(lease.fd, used)
    except BaseException:
        pool.discard(lease)
        raise
    return _header(head), lease
