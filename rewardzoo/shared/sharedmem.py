"""Arrays in shared memory: media decoded straight into memory that a worker process can map.

Inside :func:`shared_arrays` (the ``"array"`` input form, what an entry with ``environment:`` sends on),
:func:`empty` is :func:`numpy.empty` whose memory is an anonymous shared memory file (``memfd``) of its own. The
parent then passes that file's descriptor to its worker instead of copying the array into the channel's buffer
(:mod:`rewardzoo.environments.channel`, :func:`segment_of`): the decoded media are held once, not twice. Outside
it, for arrays under :data:`MIN_BYTES`, where there is no ``memfd_create`` and past :data:`MAX_LIVE` live
segments (each holds two descriptors), :func:`empty` is plain :func:`numpy.empty`.
"""

from __future__ import annotations

import contextlib
import contextvars
import mmap
import os
import socket
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

#: Arrays smaller than this stay in ordinary memory (the channel copies small arrays; a 1 MiB copy is cheap).
MIN_BYTES = 1 << 20
#: Segments alive at once at most (a batch of media; each holds its descriptor and the mapping's own copy of it).
MAX_LIVE = 128

_SHARED: contextvars.ContextVar[bool] = contextvars.ContextVar("rewardzoo_shared_arrays", default=False)
_LOCK = threading.Lock()
_live = 0


class Segment(mmap.mmap):
    """One anonymous shared memory file mapped read-write: ``fd`` its descriptor (closed when the mapping goes),
    ``address`` where it is mapped."""

    fd: int
    address: int


def available() -> bool:
    """Whether arrays can live in shared memory that a worker maps (Linux: ``memfd_create`` and ``SCM_RIGHTS``)."""
    return hasattr(os, "memfd_create") and hasattr(socket, "send_fds")


@contextlib.contextmanager
def shared_arrays() -> Iterator[None]:
    """Within it, :func:`empty` allocates large arrays in shared memory (this thread / task only)."""
    token = _SHARED.set(True)
    try:
        yield
    finally:
        _SHARED.reset(token)


def empty(shape: Any, dtype: Any = np.uint8) -> np.ndarray:
    """:func:`numpy.empty`; within :func:`shared_arrays`, a large array's memory is a shared memory file of its own."""
    dtype = np.dtype(dtype)
    shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    count = int(np.prod(shape, dtype=np.int64))
    if not _SHARED.get() or count * dtype.itemsize < MIN_BYTES or not available():
        return np.empty(shape, dtype)
    segment = _segment(count * dtype.itemsize)
    if segment is None:
        return np.empty(shape, dtype)
    return np.frombuffer(segment, dtype, count).reshape(shape)


def _segment(size: int) -> Segment | None:
    global _live
    with _LOCK:
        if _live >= MAX_LIVE:
            return None
        _live += 1
    try:
        fd = os.memfd_create("rewardzoo-media", os.MFD_CLOEXEC)
    except OSError:  # out of descriptors, say: ordinary memory
        _released()
        return None
    try:
        os.ftruncate(fd, size)
        segment = Segment(fd, size)
    except BaseException:
        os.close(fd)
        _released()
        raise
    segment.fd = fd
    segment.address = np.frombuffer(segment, np.uint8, 1).__array_interface__["data"][0]
    weakref.finalize(segment, _close, fd)
    return segment


def _close(fd: int) -> None:
    try:
        os.close(fd)
    finally:
        _released()


def _released() -> None:
    global _live
    with _LOCK:
        _live -= 1


def live_segments() -> int:
    """How many shared segments are alive in this process."""
    return _live


def segment_of(view: memoryview) -> tuple[Segment, int] | None:
    """The segment holding ``view``'s bytes (contiguous) and their offset in it; None for any other memory."""
    if not view.c_contiguous or view.nbytes == 0:
        return None
    owner: Any = view.obj
    while isinstance(owner, (np.ndarray, memoryview)):
        owner = owner.base if isinstance(owner, np.ndarray) else owner.obj
    if not isinstance(owner, Segment) or owner.closed:
        return None
    start = np.frombuffer(view, np.uint8).__array_interface__["data"][0]
    offset = start - owner.address
    if offset < 0 or offset + view.nbytes > len(owner):
        return None
    return owner, offset
