"""The framed wire body: a score request whose large byte strings travel beside its map, not inside it.

``Content-Type: application/x-rewardzoo-frames``; the body is::

    b"RZF1" | header length (uint32, little-endian) | header (MessagePack map) | padding | buffers

The header is a request map of :mod:`rewardzoo.transport.wire` in which a byte string of at least
:data:`MIN_OUT_OF_BAND` bytes (a raw image's pixels, a PNG, a clip) is replaced by a reference ``[offset, length]``
into the buffer region (which starts at the first multiple of :data:`ALIGN` past the header). The server reads the
header with MessagePack and hands each reference on as a read-only view of the received body: the pixels are never
copied into Python byte strings, and a raw image reaches the processor as an array over the body's own memory.

**Same-host shared memory.** A client on the server's machine may put the buffers in an anonymous shared memory
file (``memfd``) instead of the body; the header then names it: ``"shm": {"pid": P, "fd": N, "size": S, "host":
H}`` (``H``: the client's :func:`host_identity`, which must be the server's; the server maps the first ``S`` bytes).
The server opens ``/proc/P/fd/N`` read-only and maps it. It does so only when it was started with shared memory
allowed (the default), only for a client connected from a loopback address with no forwarding header, and only for
a ``memfd`` named ``rewardzoo-wire`` owned by the server's own user, sealed against shrinking and growing (its pages
cannot vanish under the server's mapping: no SIGBUS) and holding at least ``S`` bytes; anything else is a 403
``shm`` refusal (the client then sends the buffers in the body). The kernel itself refuses ``/proc/P/fd`` of
another user's process. A file also sealed against writing (:class:`SharedBody`) is read in place; one its client
can still write (the reusable segments of :mod:`rewardzoo.transport.segments`) has only its raw uint8 pixels read in
place, every other buffer copied before it is checked (:func:`_raw_pixels`). :func:`host_identity` tells a client
whether it shares the server's host and process namespace (the server advertises its own in ``GET /v1/rewards``).
"""

from __future__ import annotations

import functools
import mmap
import os
import stat
import struct
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .wire import FRAMES, MEDIA_FIELDS, PROTOCOL, WireError, WireLimits, _check_msgpack_lengths, loads

__all__ = ["FRAMES", "SharedBody", "encode", "host_identity", "loads_frames", "shm_available", "split"]
MAGIC = b"RZF1"
#: Byte strings at least this long travel beside the header (shorter ones stay inline, where they cost nothing).
MIN_OUT_OF_BAND = 4096
#: Buffers start at multiples of this (cache lines; arrays of any dtype read aligned).
ALIGN = 64
#: The name a shared memory file of a request carries (``/memfd:rewardzoo-wire``); others are refused.
SHM_NAME = "rewardzoo-wire"
_SEALS = ("F_SEAL_SEAL", "F_SEAL_SHRINK", "F_SEAL_GROW", "F_SEAL_WRITE")
Buffer = bytes | bytearray | memoryview


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def split(payload: Mapping[str, Any], *, with_refs: bool = False) -> Any:
    """A request map with its large byte strings replaced by ``[offset, length]`` references, and those byte
    strings (views, nothing copied) in order; offsets are aligned to :data:`ALIGN`. ``with_refs``: the reference
    lists too (the header's own, in the same order: a caller may place the buffers elsewhere and rewrite them)."""
    buffers: list[memoryview] = []
    refs: list[list[int]] = []
    at = 0

    def walk(value: Any) -> Any:
        nonlocal at
        if isinstance(value, (bytes, bytearray, memoryview)):
            view = memoryview(value).cast("B")
            if view.nbytes < MIN_OUT_OF_BAND:
                return bytes(view)
            ref = [at, view.nbytes]
            buffers.append(view)
            refs.append(ref)
            at = _align(at + view.nbytes)
            return ref
        if isinstance(value, Mapping):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    head = walk(payload)
    return (head, buffers, refs) if with_refs else (head, buffers)


def _header(head: Mapping[str, Any]) -> bytes:
    import msgpack

    try:
        packed = msgpack.packb(head, use_bin_type=True)
    except (ValueError, OverflowError):
        _check_msgpack_lengths(head, ())
        raise
    prefix = MAGIC + struct.pack("<I", len(packed)) + packed
    return prefix + bytes(_align(len(prefix)) - len(prefix))


def encode(payload: Mapping[str, Any]) -> tuple[list[Buffer], int]:
    """A request map as a framed body: the pieces to send in order (the header and padding as bytes, the large
    byte strings as the caller's own views) and their total length."""
    head, buffers = split(payload)
    pieces: list[Buffer] = [_header(head)]
    size = len(pieces[0])
    for i, view in enumerate(buffers):
        pieces.append(view)
        size += view.nbytes
        if i + 1 < len(buffers):
            pad = _align(view.nbytes) - view.nbytes
            if pad:
                pieces.append(bytes(pad))
                size += pad
    return pieces, size


class SharedBody:
    """A request's buffers in a sealed ``memfd`` of this process (one copy of them), and the header naming it.
    ``close()`` (or leaving the ``with``) closes the file; the server's mapping keeps its pages while it holds them."""

    def __init__(self, payload: Mapping[str, Any]) -> None:
        head, buffers = split(payload)
        size = _align(sum(_align(b.nbytes) for b in buffers)) or ALIGN
        flags = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
        self.fd = os.memfd_create(SHM_NAME, flags)
        try:
            pieces: list[Buffer] = []
            for view in buffers:
                pieces += [view, bytes(_align(view.nbytes) - view.nbytes)]
            _write_all(self.fd, pieces)  # write(2) fills tmpfs pages without page faults: ~2x a mapped copy
            os.ftruncate(self.fd, size)
            import fcntl

            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, _seal_bits())
        except BaseException:
            os.close(self.fd)
            raise
        head["shm"] = {"pid": os.getpid(), "fd": self.fd, "size": size, "host": host_identity()}
        self.body = _header(head)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> SharedBody:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_all(fd: int, pieces: Sequence[Buffer]) -> None:
    """Write ``pieces`` one after the other at the file's position (``writev``, at most 512 at a time, any short
    write finished)."""
    for start in range(0, len(pieces), 512):
        group = [memoryview(p).cast("B") for p in pieces[start : start + 512] if len(p)]
        done = os.writev(fd, group) if group else 0
        for view in group:  # a short write (a signal, a full tmpfs): the rest piece by piece
            if done >= view.nbytes:
                done -= view.nbytes
                continue
            rest, done = view[done:], 0
            while rest.nbytes:
                rest = rest[os.write(fd, rest) :]


def _seal_bits() -> int:
    import fcntl

    bits = 0
    for name in _SEALS:
        bits |= getattr(fcntl, name)
    return bits


def shm_available() -> bool:
    """Whether this platform can pass request buffers in sealed shared memory files (Linux)."""
    import fcntl

    return hasattr(os, "memfd_create") and hasattr(os, "MFD_ALLOW_SEALING") and hasattr(fcntl, "F_ADD_SEALS")


@functools.cache
def host_identity() -> str:
    """This machine's boot and this process's PID namespace and user: a client whose identity equals the server's
    can name its files by ``/proc/PID/fd/N`` to it."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot}/{ns}/{os.getuid()}"


# ------------------------------------------------------------------------------------------- server side
class ShmRefused(WireError):
    """A request naming shared memory the server will not read (403, kind ``shm``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=403, kind="shm", field="shm")


def loads_frames(
    body: bytearray | bytes | mmap.mmap, limits: WireLimits = WireLimits(), *, shm_allowed: str | None = None
) -> Any:
    """Parse a framed body into a request map whose references are read-only views of ``body`` or of the client's
    shared memory (read-only). ``shm_allowed``: None when shared memory may be read, else why not (a ShmRefused
    names it when the header asks for it). WireError 400 when malformed."""
    limits.over("max_request_bytes", len(body), f"the request body ({len(body)} bytes)")
    if len(body) < 8 or bytes(body[:4]) != MAGIC:
        raise WireError("the framed body does not start with RZF1 and its header's length")
    (length,) = struct.unpack("<I", bytes(body[4:8]))
    if 8 + length > len(body):
        raise WireError(f"the framed header claims {length} bytes; the body holds {len(body) - 8} after its prefix")
    # read-only views, even of the server's own bytearray: writable ones reached the reward as tensors over the body,
    # which the engine then clones to protect the "caller's" array (measured 6-14 ms slower per 25 MB request for
    # laion_aesthetic than the one copy to_uint8_tensor makes of a read-only array, which it hands on uncloned)
    view = memoryview(body).toreadonly()
    head = loads(bytes(view[8 : 8 + length]), "msgpack", limits)  # the header alone (small) is copied
    if not isinstance(head, dict):
        raise WireError("the framed header must be a request map", kind="protocol")
    shm = head.pop("shm", None)
    if shm is None:
        return _resolve(head, view[_align(8 + length) :])
    if shm_allowed is not None:
        raise ShmRefused(f"this server does not read shared memory here: {shm_allowed}")
    region, sealed = _open_shm(shm, limits)
    return _resolve(head, region, in_place=None if sealed else _raw_pixels)


def _raw_pixels(media: dict[str, Any]) -> bool:
    """Whether a media map's buffer may be read in place from a segment its client can still write: raw uint8
    pixels only (any byte is a valid pixel and the shape is the header's, parsed already); a PNG (whose size was
    checked from its header), audio (checked finite) and anything else is copied first, so a client rewriting its
    segment cannot slip past a check."""
    return media.get("format") == "raw" and media.get("dtype") == "uint8"


def _resolve(head: dict[str, Any], region: memoryview, in_place: Any = None) -> dict[str, Any]:
    """Each media value's ``data`` reference (in the samples' media fields only) -> a view of ``region`` (or, when
    ``in_place`` says a buffer may not stay there, a copy of it)."""
    samples = head.get("samples")
    for sample in samples if isinstance(samples, list) else []:
        for key in MEDIA_FIELDS:
            value = sample.get(key) if isinstance(sample, dict) else None
            for item in value if isinstance(value, list) else [value]:
                if not isinstance(item, dict):
                    continue
                for media in item["frames"] if isinstance(item.get("frames"), list) else [item]:
                    if isinstance(media, dict) and isinstance(media.get("data"), list):
                        data = _ref(media["data"], region)
                        media["data"] = data if in_place is None or in_place(media) else bytes(data)
    return head


def _ref(ref: list, region: memoryview) -> memoryview:
    if (
        len(ref) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in ref)
        or ref[0] < 0
        or ref[1] < 0
        or ref[0] + ref[1] > region.nbytes
    ):
        raise WireError(f"a buffer reference {ref!r:.60} is not [offset, length] within the {region.nbytes} bytes sent")
    return region[ref[0] : ref[0] + ref[1]]


def _open_shm(shm: Any, limits: WireLimits) -> tuple[memoryview, bool]:
    """The first ``size`` bytes of the client's memfd, mapped read-only, after every check (ShmRefused otherwise),
    and whether the file is also sealed against writing (a pooled segment is not: see :func:`_raw_pixels`). Sealed
    against shrinking, it keeps at least ``size`` bytes for as long as it exists: reading the mapping cannot fault."""
    if not isinstance(shm, dict) or not all(
        isinstance(shm.get(k), int) and not isinstance(shm.get(k), bool) and shm[k] >= 0 for k in ("pid", "fd", "size")
    ):
        raise WireError("'shm' must be a map of non-negative ints pid, fd and size", field="shm")
    limits.over("max_request_bytes", shm["size"], f"the shared memory of the request ({shm['size']} bytes)")
    if not shm.get("host") or shm.get("host") != host_identity():  # a PID means nothing on another host / namespace
        raise ShmRefused("the client's shared memory is on another host, PID namespace or user than this server's")
    path = f"/proc/{shm['pid']}/fd/{shm['fd']}"
    try:
        target = os.readlink(path)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise ShmRefused(f"cannot open the client's shared memory {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not target.startswith(f"/memfd:{SHM_NAME}") or not stat.S_ISREG(info.st_mode):
            raise ShmRefused(f"{path} is not a rewardzoo shared memory file")
        if info.st_uid != os.getuid():
            raise ShmRefused(f"{path} belongs to another user")
        import fcntl

        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        fixed = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
        if seals & fixed != fixed:
            raise ShmRefused(f"{path} is not sealed against growing and shrinking")
        if shm["size"] == 0 or info.st_size < shm["size"]:
            raise ShmRefused(f"{path} holds {info.st_size} bytes, fewer than the {shm['size']} the request names")
        sealed = bool(seals & fcntl.F_SEAL_WRITE)
        mem = _mapping((shm["pid"], shm["fd"]), (info.st_dev, info.st_ino), fd, shm["size"], reuse=not sealed)
    finally:
        os.close(fd)
    return memoryview(mem)[: shm["size"]], sealed


#: Mappings of clients' reusable segments kept for their next requests (mapping 25 MB costs ~2 ms): at most
#: :data:`MAPPINGS` of them, least recently used dropped first. Every request still passes every check of
#: :func:`_open_shm`; a kept mapping is used only for the same file (device and inode: a file cannot be replaced by
#: another with its inode while a mapping holds it) and a size within it.
MAPPINGS = 4
_mappings: dict[tuple[int, int], tuple[tuple[int, int], mmap.mmap]] = {}
_mappings_lock = threading.Lock()


def _mapping(key: tuple[int, int], file: tuple[int, int], fd: int, size: int, *, reuse: bool) -> mmap.mmap:
    """A read-only mapping of at least ``size`` bytes of ``fd`` (the file ``file``): a kept one for a reusable
    segment when there is one, else a new one (kept when ``reuse``)."""
    with _mappings_lock:
        kept = _mappings.pop(key, None)
        if kept is not None and kept[0] == file and len(kept[1]) >= size:
            _mappings[key] = kept  # the most recently used now
            return kept[1]
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)  # its pages mapped at once, not one fault each
    mem = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ)
    if reuse:
        with _mappings_lock:
            _mappings[key] = (file, mem)
            while len(_mappings) > MAPPINGS:
                del _mappings[next(iter(_mappings))]  # the views of a request still scoring keep it mapped
    return mem


def client_is_local(client: Sequence[Any] | None, headers: Mapping[str, str]) -> str | None:
    """None when a connection's peer (an ASGI ``client`` pair) is this machine's loopback and no proxy forwarded it;
    else why not."""
    import ipaddress

    if any(h in headers for h in ("forwarded", "x-forwarded-for", "x-real-ip")):
        return "the request came through a proxy"
    host = client[0] if client else None
    try:
        local = host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    return None if local else f"the client {host!r} is not on this machine's loopback"


def wire_listing(shm: bool) -> dict[str, Any]:
    """What ``GET /v1/rewards`` says of the bodies the server takes (``frames``) and its shared memory."""
    return {"protocol": PROTOCOL, "frames": True, "shm": host_identity() if shm and shm_available() else None}
