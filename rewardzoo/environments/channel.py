"""Messages between a parent and its worker: framed MessagePack maps over a connected stream socket.

A frame is an 8-byte big-endian length and a MessagePack map of plain data (never a pickle). A score message
carries a :mod:`rewardzoo.transport.wire` request map; raw arrays of at least :data:`SHARED_MIN_BYTES` travel
in a :class:`SharedBuffer` instead of the frame when both ends are on one host: the parent writes them into an
anonymous shared memory file (``memfd``) whose descriptor it passes once over the Unix socket (``SCM_RIGHTS``),
and the array's ``data`` becomes ``{"shm": [offset, length]}``. Where that is missing (loopback TCP, no
``memfd``), the bytes go in the frame.
"""

from __future__ import annotations

import mmap
import os
import socket
import struct
from typing import Any

from ..transport.wire import WireLimits, dumps, loads

#: Raw arrays at least this large go through shared memory (a 128x128 RGB image is 48 KiB).
SHARED_MIN_BYTES = 32 * 1024
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
            head, fds, _, _ = socket.recv_fds(self.sock, _HEADER.size, 4)
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

    def pack(self, request: Any) -> tuple[Any, tuple[int, ...]]:
        """A copy of ``request`` whose large raw arrays are in the buffer (``request`` itself is left as it is, for
        a retry); and the descriptor to pass along when the buffer is new, else ()."""
        views: list[tuple[dict, memoryview]] = []
        packed = _collect(request, views)
        need = sum(len(v) for _, v in views)
        if not views:
            return packed, ()
        fds: tuple[int, ...] = ()
        if need > self.size or self.map is None:  # (size > 0 means a map)
            fd, mapped = self._grow(need)
            fds = (fd,)
        else:
            mapped = self.map
        offset = 0
        for holder, view in views:
            mapped[offset : offset + len(view)] = view
            holder["data"] = {"shm": [offset, len(view)]}
            offset += len(view)
        return packed, fds

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
    """The worker's side: the parent's latest buffer, mapped read-only; a request's arrays are read in place (the
    parent writes the next request only after this one is answered)."""

    def __init__(self) -> None:
        self.map: mmap.mmap | None = None

    def adopt(self, fds: list[int]) -> None:
        for fd in fds[:-1]:
            os.close(fd)
        if fds:
            if self.map is not None:
                try:
                    self.map.close()
                except BufferError:  # a reward kept an array of an earlier request: the map goes with it
                    pass
            fd = fds[-1]
            self.map = mmap.mmap(fd, os.fstat(fd).st_size, access=mmap.ACCESS_READ)
            os.close(fd)

    def unpack(self, value: Any) -> Any:
        """``value`` with each ``{"shm": [offset, length]}`` replaced by the bytes it points to."""
        if isinstance(value, dict):
            data = value.get("data")
            if isinstance(data, dict) and "shm" in data:
                offset, length = data["shm"]
                if self.map is None or not (offset >= 0 and offset + length <= len(self.map)):
                    raise ValueError("a shared-memory array outside the shared buffer")
                value["data"] = memoryview(self.map)[offset : offset + length]  # read in place, not copied
                return value
            for item in value.values():
                self.unpack(item)
        elif isinstance(value, list):
            for item in value:
                self.unpack(item)
        return value
