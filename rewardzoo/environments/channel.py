"""Messages between a parent and its worker: framed MessagePack maps over a connected stream socket.

A frame is an 8-byte big-endian length and a MessagePack map of plain data (never a pickle). A score message
carries a :mod:`rewardzoo.transport.wire` request map; raw arrays of at least :data:`SHARED_MIN_BYTES` travel
in a :class:`SharedBuffer` instead of the frame when both ends are on one host: the parent writes them into an
anonymous shared memory file (``memfd``) whose descriptor it passes once over the Unix socket (``SCM_RIGHTS``),
and the array's ``data`` becomes ``{"shm": [offset, length]}``. An array that already lives in a shared segment
of its own (media decoded by :func:`rewardzoo.shared.sharedmem.empty`) is not copied: the segment's descriptor goes
with the message and ``data`` becomes ``{"shm": [offset, length, k]}``, ``k`` its place among the message's
``segments`` (the last descriptors passed with it). Where that is missing (loopback TCP, no ``memfd``), the bytes go
in the frame.
"""

from __future__ import annotations

import mmap
import os
import socket
import struct
from typing import Any

from ..shared.sharedmem import MAX_LIVE, Segment, segment_of
from ..transport.wire import WireLimits, dumps, loads

#: Raw arrays at least this large go through shared memory (a 128x128 RGB image is 48 KiB).
SHARED_MIN_BYTES = 32 * 1024
#: Shared segments passed with one message at most (further arrays are copied into the buffer).
MAX_SEGMENTS = MAX_LIVE
#: Descriptors one message carries at most: its segments and a new buffer.
MAX_FDS = MAX_SEGMENTS + 1
_HEADER = struct.Struct(">Q")
_NO_LIMITS = WireLimits(max_request_bytes=None)


class ChannelClosed(ConnectionError):
    """The other end closed the connection (or died)."""


class Channel:
    """One connected socket: :meth:`send` and :meth:`recv` whole messages (maps), with descriptors alongside."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.passes_fds = sock.family == getattr(socket, "AF_UNIX", None) and hasattr(socket, "send_fds")

    def send(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        body = dumps(message, "msgpack")
        header = _HEADER.pack(len(body))
        if fds:
            socket.send_fds(self.sock, [header], list(fds))
            self.sock.sendall(body)
        else:
            self.sock.sendall(header + body)

    def recv(self) -> tuple[dict[str, Any], list[int]]:
        """The next message and the descriptors that came with it; :class:`ChannelClosed` at end of stream."""
        fds: list[int] = []
        if self.passes_fds:
            head, fds, _, _ = socket.recv_fds(self.sock, _HEADER.size, MAX_FDS)
        else:
            head = self.sock.recv(_HEADER.size)
        if not head:
            raise ChannelClosed("the connection was closed")
        head += self._exactly(_HEADER.size - len(head))
        (size,) = _HEADER.unpack(head)
        message = loads(self._exactly(size), "msgpack", _NO_LIMITS)
        if not isinstance(message, dict):
            raise ValueError(f"a message is a map, got {type(message).__name__}")
        return message, fds

    def _exactly(self, n: int) -> bytes:
        out = bytearray(n)
        view, got = memoryview(out), 0
        while got < n:
            chunk = self.sock.recv_into(view[got:], n - got)
            if chunk == 0:
                raise ChannelClosed("the connection was closed in the middle of a message")
            got += chunk
        return bytes(out)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class SharedBuffer:
    """The parent's shared memory for one worker: grown (a new ``memfd``) when a request needs more room."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.map: mmap.mmap | None = None
        self.size = 0

    @staticmethod
    def available() -> bool:
        return hasattr(os, "memfd_create") and hasattr(socket, "send_fds")

    def pack(self, request: Any) -> tuple[Any, tuple[int, ...], int]:
        """A copy of ``request`` whose large raw arrays are in shared memory (``request`` itself is left as it is,
        for a retry); the descriptors to pass along (a new buffer's, then the segments'); how many of them are
        segments. An array in a segment of its own is passed as that segment; the others are copied into the
        buffer."""
        views: list[tuple[dict, memoryview]] = []
        packed = _collect(request, views)
        segments: dict[int, tuple[int, Segment]] = {}  # id -> (place, segment)
        copied: list[tuple[dict, memoryview]] = []
        for holder, view in views:
            found = segment_of(view)
            if found is None or (id(found[0]) not in segments and len(segments) >= MAX_SEGMENTS):
                copied.append((holder, view))
                continue
            segment, offset = found
            place = segments.setdefault(id(segment), (len(segments), segment))[0]
            holder["data"] = {"shm": [offset, len(view), place]}
        fds: tuple[int, ...] = ()
        if copied:
            need = sum(len(v) for _, v in copied)
            if need > self.size or self.map is None:  # (size > 0 means a map)
                fd, mapped = self._grow(need)
                fds = (fd,)
            else:
                mapped = self.map
            offset = 0
            for holder, view in copied:
                mapped[offset : offset + len(view)] = view
                holder["data"] = {"shm": [offset, len(view)]}
                offset += len(view)
        return packed, fds + tuple(segment.fd for _, segment in segments.values()), len(segments)

    def _grow(self, need: int) -> tuple[int, mmap.mmap]:
        self.close()
        size = max(need, 2 * self.size, 1 << 20)
        fd = os.memfd_create("rewardzoo-worker", getattr(os, "MFD_CLOEXEC", 0))
        os.ftruncate(fd, size)
        self.fd, self.map, self.size = fd, mmap.mmap(fd, size), size
        return fd, self.map

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
        if self.fd is not None:
            os.close(self.fd)
        self.fd, self.map, self.size = None, None, 0


def _collect(value: Any, out: list[tuple[dict, memoryview]]) -> Any:
    """A copy of the maps and lists of ``value`` (the data not copied); the copies holding large raw arrays in
    ``out``."""
    if isinstance(value, dict):
        data = value.get("data")
        if (
            value.get("format") == "raw"
            and isinstance(data, (memoryview, bytes, bytearray))
            and len(data) >= SHARED_MIN_BYTES
        ):
            holder = dict(value)
            out.append((holder, memoryview(data).cast("B")))
            return holder
        return {k: _collect(v, out) for k, v in value.items()}
    if isinstance(value, list):
        return [_collect(v, out) for v in value]
    return value


class SharedView:
    """The worker's side: the parent's latest buffer, mapped read-only, and the segments of the current message;
    a request's arrays are read in place (the parent writes the next request only after this one is answered)."""

    def __init__(self) -> None:
        self.map: mmap.mmap | None = None
        self.segments: list[mmap.mmap] = []

    def adopt(self, fds: list[int], segments: int = 0) -> None:
        """Take the descriptors that came with a message: its last ``segments`` are its shared segments (mapped
        for this message), the one before them a new buffer."""
        if not 0 <= segments <= len(fds):
            for fd in fds:
                os.close(fd)
            raise ValueError(f"a message names {segments} shared segments but carries {len(fds)} descriptors")
        buffers, own = fds[: len(fds) - segments], fds[len(fds) - segments :]
        self.segments = []  # an array a reward kept still holds its segment
        for fd in own:
            try:
                self.segments.append(mmap.mmap(fd, os.fstat(fd).st_size, access=mmap.ACCESS_READ))
            finally:
                os.close(fd)
        for fd in buffers[:-1]:
            os.close(fd)
        if buffers:
            if self.map is not None:
                try:
                    self.map.close()
                except BufferError:  # a reward kept an array of an earlier request: the map goes with it
                    pass
            fd = buffers[-1]
            self.map = mmap.mmap(fd, os.fstat(fd).st_size, access=mmap.ACCESS_READ)
            os.close(fd)

    def unpack(self, value: Any) -> Any:
        """``value`` with each ``{"shm": [offset, length]}`` (the buffer) or ``{"shm": [offset, length, k]}``
        (segment ``k``) replaced by the bytes it points to."""
        if isinstance(value, dict):
            data = value.get("data")
            if isinstance(data, dict) and "shm" in data:
                offset, length, *place = data["shm"]
                if place:
                    k = place[0]
                    mapped = self.segments[k] if isinstance(k, int) and 0 <= k < len(self.segments) else None
                else:
                    mapped = self.map
                if mapped is None or not (offset >= 0 and length >= 0 and offset + length <= len(mapped)):
                    raise ValueError("a shared-memory array outside the shared memory passed with it")
                value["data"] = memoryview(mapped)[offset : offset + length]  # read in place, not copied
                return value
            for item in value.values():
                self.unpack(item)
        elif isinstance(value, list):
            for item in value:
                self.unpack(item)
        return value
