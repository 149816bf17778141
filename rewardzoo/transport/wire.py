"""The wire format of ``rewardzoo serve``: samples and scores as plain data, never a pickle.

A request body is MessagePack (``application/msgpack``) or JSON (``application/json``) holding one map::

    {"protocol": 1, "rewards": ["pickscore"] | null, "samples": [{field: value, ...}, ...]}

Sample fields are those of :class:`rewardzoo.Sample`: ``prompt``, ``completion``, ``dataset`` (strings),
``group_id`` (int or string), ``metadata`` (a map or a JSON string), and media:

- an **image** (``image``, each of ``condition_images``): ``{"format": "png", "data": <bytes>}``, or a raw
  array ``{"format": "raw", "dtype": "uint8", "shape": [H, W, 3], "data": <bytes>}`` (C-order; 1, 3 or 4
  channels, or ``[H, W]``);
- a **video** (``video``, each of ``condition_videos``): ``{"frames": [image, ...]}``, or a raw uint8
  array of shape ``[T, H, W, 3]``;
- a **latent** (``latent``): a raw float16 / bfloat16 / float32 tensor that the server's ``decode:`` stage decodes
  (:mod:`rewardzoo.transport.latents`);
- **audio** (``audio``, ``condition_audio``): ``{"format": "raw", "dtype": "float32" | "int16",
  "shape": [time] | [channels, time], "sample_rate": 16000, "data": <bytes>}``.

Raw arrays are little-endian. In JSON, ``data`` is a base64 string. A response is a map in the request's
format: ``{"protocol": 1, "rewards": {name: [score | null]}, "total": [...], "applied": [[name, ...]],
"weights": {name: [...]}, "extras": {name: {key: [number | string | null]}}}`` (null where a reward does
not apply); an error is ``{"protocol": 1, "error": {"kind": ..., "message": ..., "limit": ...}}``.

Decoding refuses, with a :class:`WireError` that names the limit and the sample, anything outside
:class:`WireLimits` before the cost is paid: the body size before it is parsed, a PNG's pixels from its
header before it is decoded, a raw array's pixels from its shape, audio length from its shape and rate.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from .latents import decode_latent, encode_latent

PROTOCOL = 1
MSGPACK = "application/msgpack"
JSON = "application/json"
#: A score request whose large byte strings travel beside its map (:mod:`rewardzoo.transport.frames`).
FRAMES = "application/x-rewardzoo-frames"
_MSGPACK_TYPES = (MSGPACK, "application/x-msgpack", "application/vnd.msgpack")
TEXT_FIELDS = ("prompt", "completion", "dataset")
IMAGE_FIELDS = ("image",)
MEDIA_FIELDS = ("image", "video", "audio", "condition_images", "condition_videos", "condition_audio")
SAMPLE_FIELDS = (*TEXT_FIELDS, "group_id", "metadata", *MEDIA_FIELDS, "video_fps", "latent")
AUDIO_DTYPES: dict[str, np.dtype[Any]] = {"float32": np.dtype("<f4"), "int16": np.dtype("<i2")}
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The longest bin / str and the most items of an array / map MessagePack can frame (a 32-bit length).
MSGPACK_MAX_LENGTH = 2**32 - 1
#: A PNG's chunk lengths, width and height are at most 2**31 - 1 (PNG spec, 5.3 and 11.2.2).
PNG_MAX_INT = 2**31 - 1


class WireError(InputError):
    """A request the server refuses before scoring it: ``status`` is the HTTP status (400, 413, 415, 422),
    ``kind`` a short word (``protocol``, ``format``, ``limit``, ``input``), ``limit`` the name of the limit
    it broke (one of :class:`WireLimits`' fields) or None."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        kind: str = "format",
        limit: str | None = None,
        field: str | None = None,
        sample: int | None = None,
    ):
        self.status, self.kind, self.limit = status, kind, limit
        super().__init__(message, field=field, sample=sample)

    def located(self, **where: Any) -> WireError:  # keep status, kind and limit through re-location
        err = super().located(**where)
        err.status, err.kind, err.limit = self.status, self.kind, self.limit
        return err


@dataclass(frozen=True)
class WireLimits:
    """What one request may hold (the server's ``--max-*`` options); None lifts a limit."""

    max_request_bytes: int | None = 64 * 2**20
    max_samples: int | None = 512
    max_pixels: int | None = 4096 * 4096  # per image or frame
    max_request_pixels: int | None = 2**28  # decoded pixels over the whole request (~805 MB of RGB)
    max_frames: int | None = 2048  # per video
    max_audio_seconds: float | None = 600.0  # per clip

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def over(self, name: str, value: float, what: str, **where: Any) -> None:
        """WireError (413) naming the limit when ``value`` exceeds the limit ``name``."""
        limit = getattr(self, name)
        if limit is not None and value > limit:
            shown = f"{limit:g}" if isinstance(limit, float) else str(limit)
            raise WireError(
                f"{what} is over the server's limit {name}={shown}", status=413, kind="limit", limit=name, **where
            )


# ---------------------------------------------------------------------------------------------- bodies
def content_type(fmt: str) -> str:
    if fmt not in ("msgpack", "json"):
        raise ValueError(f"the wire format is 'msgpack' or 'json', got {fmt!r}")
    return MSGPACK if fmt == "msgpack" else JSON


def format_of(content_type_header: str | None) -> str:
    """``msgpack`` or ``json`` for a Content-Type header; WireError 415 for anything else (a pickle)."""
    kind = (content_type_header or "").split(";")[0].strip().lower()
    if kind in _MSGPACK_TYPES:
        return "msgpack"
    if kind == JSON:
        return "json"
    if kind == FRAMES:
        return "frames"
    raise WireError(
        f"unsupported Content-Type {kind or '(none)'!r}; send {MSGPACK} or {JSON} (pickles are never accepted)",
        status=415,
        kind="format",
    )


def dumps(payload: Any, fmt: str) -> bytes:
    """Serialise plain data (maps, lists, str, int, float, bool, None, bytes) as MessagePack or JSON."""
    if fmt == "msgpack":
        import msgpack

        try:
            return msgpack.packb(payload, use_bin_type=True)
        except (ValueError, OverflowError):
            _check_msgpack_lengths(payload, ())  # an InputError naming the value over a 32-bit length
            raise
    return json.dumps(_for_json(payload), separators=(",", ":"), allow_nan=False).encode("utf-8")


def _check_msgpack_lengths(value: Any, path: tuple[Any, ...]) -> None:
    """InputError (the field and sample of a request's value) for a value MessagePack cannot frame."""
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        size = len(value.encode("utf-8")) if isinstance(value, str) else memoryview(value).nbytes
        what = f"{size} bytes"
    elif isinstance(value, (Mapping, list, tuple)):
        size, what = len(value), f"{len(value)} items"
    else:
        return
    if size > MSGPACK_MAX_LENGTH:
        at = path.index("samples") if "samples" in path else None
        sample = path[at + 1] if at is not None and len(path) > at + 1 else None
        field = path[at + 2] if at is not None and len(path) > at + 2 else (path[-1] if path else None)
        raise InputError(
            f"a value of {what} is over MessagePack's limit of {MSGPACK_MAX_LENGTH} (a 32-bit length); "
            "send it smaller (a video as PNG frames, fewer frames) or as JSON",
            field=str(field) if field is not None else None,
            sample=sample if isinstance(sample, int) else None,
        )
    if isinstance(value, (Mapping, list, tuple)):
        for key, item in value.items() if isinstance(value, Mapping) else enumerate(value):
            _check_msgpack_lengths(item, (*path, key))


#: Containers (maps, arrays) and their items a body may hold per sample it may carry, and for the message around
#: them (a request's fields, condition lists and metadata; a response's columns of scores and extras): a body
#: of tiny containers would otherwise cost up to ~70x its bytes in Python objects before any limit applied.
ITEMS_PER_SAMPLE = 64
BASE_ITEMS = 4096


#: An upper bound of the Python objects one counted container or item costs once parsed, besides the bytes of its
#: strings: a small dict is 64-232 bytes, a list 56 + 8 per item, a key or short string 49 + its length, a float 24,
#: an int 28-36, and a dict slot ~40 amortised; a map of one pair (2 counted) is ~300 bytes in all.
BYTES_PER_ITEM = 256
#: Copies of a body's bytes alive while it is parsed: the body and the strings and bytes built from it (MessagePack);
#: JSON adds its decoded text (at most the body's bytes: UTF-8 is never shorter than CPython's str of it, per
#: character) or, before it, the body with its strings cut out (:func:`loads` counts the items there); a framed
#: body is held once and its header's inline strings copied (at most the body's bytes).
PARSE_COPIES = {"msgpack": 2, "json": 3, "frames": 2}


def item_budget(limits: WireLimits) -> int | None:
    """How many containers and items a body under ``limits`` may hold (None: unbounded, no ``max_samples``)."""
    return None if limits.max_samples is None else BASE_ITEMS + ITEMS_PER_SAMPLE * limits.max_samples


def parse_bytes(size: int, fmt: str, limits: WireLimits = WireLimits()) -> int:
    """An upper bound of the memory a body of ``size`` bytes holds while :func:`loads` parses it and after: the
    body's copies (:data:`PARSE_COPIES`) and :data:`BYTES_PER_ITEM` for each container and item it may hold
    (:func:`item_budget`; without one, one per body byte)."""
    items = item_budget(limits)
    return PARSE_COPIES.get(fmt, 3) * size + BYTES_PER_ITEM * (size + 1 if items is None else min(items, size + 1))


class _Items:
    """Counts containers and items as the parser builds them and stops it past ``budget``."""

    def __init__(self, budget: int | None, limits: WireLimits) -> None:
        self.left, self.budget, self.limits = budget, budget, limits

    def take(self, n: int) -> None:
        if self.left is not None:
            self.left -= n
            if self.left < 0:
                raise _TooMany(self.budget)

    def map(self, pairs: list) -> dict:
        self.take(len(pairs) + 1)
        return _str_keyed(pairs)

    def list(self, items: list) -> list:
        self.take(len(items) + 1)
        return items


class _TooMany(Exception):
    pass


def _too_many(budget: int | None, limits: WireLimits) -> WireError:
    return WireError(
        f"the body holds more than {budget} maps, arrays and items, the most a message of max_samples="
        f"{limits.max_samples} samples holds",
        status=413,
        kind="limit",
        limit="max_samples",
    )


def loads(body: bytes | bytearray, fmt: str, limits: WireLimits = WireLimits()) -> Any:
    """Parse a body; no extension types, no code, sizes bounded by ``limits`` (the body's bytes, and while it is
    parsed the containers and items it may hold, :func:`item_budget`). WireError 400 when malformed."""
    limits.over("max_request_bytes", len(body), f"the request body ({len(body)} bytes)")
    budget = item_budget(limits)
    items = _Items(budget, limits)
    if fmt == "msgpack":
        import msgpack

        size = max(len(body), 1)
        count = size if budget is None else min(size, budget)
        try:
            return msgpack.unpackb(
                body,
                raw=False,
                strict_map_key=True,
                use_list=True,
                ext_hook=_no_ext,
                object_pairs_hook=items.map,
                list_hook=items.list,
                max_bin_len=size,
                max_str_len=size,
                max_array_len=count,
                max_map_len=count,
            )
        except _NoExt as exc:
            raise WireError(str(exc)) from None
        except _TooMany:
            raise _too_many(budget, limits) from None
        except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
            if budget is not None and "exceeds max_" in str(exc):  # one container longer than the budget
                raise _too_many(budget, limits) from None
            raise WireError(f"the body is not valid MessagePack: {type(exc).__name__}: {exc}"[:300]) from None
    if budget is not None and _json_items(body, budget) > budget:  # counted before any is built
        raise _too_many(budget, limits)
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=items.map)
    except _TooMany:
        raise _too_many(budget, limits) from None
    except RecursionError:
        raise WireError("the JSON body nests too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"the body is not valid JSON: {exc}"[:300]) from None


def _json_items(body: bytes | bytearray, stop: int | None = None) -> int:
    """An upper bound of the containers and items of a JSON body, as the MessagePack hooks count them (a container
    and each of its items): outside its strings, two per bracket and one per comma. Linear and vectorised, 64 kB
    at a time (a few arrays of that length, no copy of the body): a quote preceded by an odd run of
    backslashes is escaped, every other one opens or closes a string, and the parity of those before a byte says
    whether it is inside one. Counting ends early once past ``stop``."""
    data = np.frombuffer(body, np.uint8)
    count, inside, run, step = 1, False, 0, 2**16  # run: backslashes ending the previous part
    for start in range(0, len(data), step):
        part = data[start : start + step]
        at = np.arange(len(part), dtype=np.int32)
        backslash = part == ord("\\")
        last = np.maximum.accumulate(np.where(backslash, -1, at))  # the last byte at or before i that is not one
        ending = at - last + np.where(last < 0, run, 0)  # backslashes ending at i (a run may start in a part before)
        before = np.concatenate(([run], ending[:-1]))
        quote = (part == ord('"')) & (before % 2 == 0)
        odd = np.logical_xor.accumulate(quote)  # an odd number of string quotes so far in this part
        outside = odd if inside else ~odd
        brackets = (part == ord("[")) | (part == ord("{"))
        count += 2 * int(np.count_nonzero(brackets & outside)) + int(np.count_nonzero((part == ord(",")) & outside))
        inside, run = not bool(outside[-1]), int(ending[-1])
        if stop is not None and count > stop:
            break
    return count


class _NoExt(Exception):
    pass


def _no_ext(code: int, data: bytes) -> Any:
    raise _NoExt(f"MessagePack extension type {code} is not part of the protocol")


def _str_keyed(pairs: list) -> dict:
    """A MessagePack map whose keys are all strings (a ``bin`` key is refused: the protocol's keys are text)."""
    for key, _ in pairs:
        if not isinstance(key, str):
            raise _NoExt(f"MessagePack map keys must be strings, got {type(key).__name__} {key!r:.40}")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _for_json(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        return {k: _for_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_for_json(v) for v in value]
    return value


def error_payload(kind: str, message: str, limit: str | None = None) -> dict[str, Any]:
    return {"protocol": PROTOCOL, "error": {"kind": kind, "message": message, "limit": limit}}


# -------------------------------------------------------------------------------------------- encoding
def encode_image(value: Any, image_format: str = "png") -> dict[str, Any]:
    """One image (path, PIL, array, tensor; see ``rewardzoo.shared.media``) as a wire image."""
    from PIL import Image

    from ..shared.media import image_to_uint8

    if image_format == "raw" and isinstance(value, Image.Image) and value.mode == "RGB" and value.width * value.height:
        arr = np.asarray(value)  # one copy (Pillow's tobytes), read-only: the wire only reads it (2x the strip copy)
    else:
        arr = image_to_uint8(value)
    if image_format == "raw":
        return raw_array(arr)
    if image_format != "png":
        raise ValueError(f"image_format is 'png' or 'raw', got {image_format!r}")
    return {"format": "png", "data": png_bytes(arr)}


def png_bytes(arr: np.ndarray, level: int = 1) -> bytes:
    """A PNG of a uint8 (H, W, 1|3|4) array: every row with the Sub filter (the difference to the pixel on
    its left, computed with NumPy) and zlib at ``level`` — several times faster than PIL's adaptive filters,
    and nearly as small for photographs."""
    h, w, c = arr.shape
    if max(h, w) > PNG_MAX_INT:
        raise InputError(f"a PNG is at most {PNG_MAX_INT} pixels wide and high, got {w}x{h}; send it raw")
    rows = np.ascontiguousarray(arr).reshape(h, w * c)
    filtered = np.empty((h, w * c + 1), dtype=np.uint8)
    filtered[:, 0] = 1  # filter type Sub
    filtered[:, 1 : c + 1] = rows[:, :c]
    np.subtract(rows[:, c:], rows[:, :-c], out=filtered[:, c + 1 :])  # uint8 arithmetic wraps modulo 256

    def chunk(kind: bytes, data: bytes | memoryview) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))

    color = {1: 0, 3: 2, 4: 6}[c]
    header = struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)
    # compressed data past a chunk's 31-bit length continues in further IDAT chunks (decoders concatenate them)
    stream = memoryview(zlib.compress(filtered.data, level))
    step = PNG_MAX_INT
    return b"".join(
        [
            _PNG_SIGNATURE,
            chunk(b"IHDR", header),
            *(chunk(b"IDAT", stream[i : i + step]) for i in range(0, max(len(stream), 1), step)),
            chunk(b"IEND", b""),
        ]
    )


def raw_array(arr: np.ndarray, **extra: Any) -> dict[str, Any]:
    arr = np.ascontiguousarray(arr)
    dtype = {np.dtype(np.uint8): "uint8", np.dtype(np.float32): "float32", np.dtype(np.int16): "int16"}[arr.dtype]
    little = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    return {"format": "raw", "dtype": dtype, "shape": list(arr.shape), "data": little.data.cast("B"), **extra}


def encode_video(value: Any, image_format: str = "png") -> dict[str, Any]:
    """A video (path, frame list, (T, H, W, C) array, (T, C, H, W) tensor) as a wire video."""
    from ..shared.video import video_to_uint8

    frames = video_to_uint8(value)
    if image_format == "raw":
        return raw_array(frames)
    return {"frames": [encode_image(f, "png") for f in frames]}


def encode_audio(value: Any, sample_rate: Any) -> dict[str, Any]:
    """A clip (path, array, tensor) as float32 (channels, time) with its sample rate; int16 arrays stay int16."""
    from ..shared.audio import load_audio

    if isinstance(value, np.ndarray) and value.dtype == np.int16:
        from ..shared.audio import check_sample_rate

        return raw_array(value, sample_rate=check_sample_rate(sample_rate))
    audio, rate = load_audio(value, sample_rate)
    return raw_array(audio.astype(np.float32, copy=False), sample_rate=rate)


def encode_sample(sample: Mapping[str, Any], image_format: str = "png") -> dict[str, Any]:
    """One sample (a mapping of :class:`rewardzoo.Sample` fields) as a wire sample; None fields are left out."""
    out: dict[str, Any] = {}
    for key, value in sample.items():
        if value is None or key in ("audio_sample_rate", "condition_audio_sample_rate"):
            continue
        if key in TEXT_FIELDS or key == "group_id":
            out[key] = value
        elif key == "metadata":
            out[key] = value if isinstance(value, str) else json.dumps(value)
        elif key == "image":
            out[key] = encode_image(value, image_format)
        elif key == "condition_images":
            out[key] = [encode_image(v, image_format) for v in value]
        elif key == "video":
            out[key] = encode_video(value, image_format)
            if sample.get("video_fps") is None and isinstance(value, (str, os.PathLike)):
                from ..shared.video import video_rate

                rate = video_rate(value)  # a file's rate travels beside its frames
                if rate is not None:
                    out["video_fps"] = rate
        elif key == "video_fps":
            out[key] = float(value)
        elif key == "condition_videos":
            out[key] = [encode_video(v, image_format) for v in value]
        elif key == "audio":
            out[key] = encode_audio(value, sample.get("audio_sample_rate"))
        elif key == "condition_audio":
            out[key] = encode_audio(value, sample.get("condition_audio_sample_rate"))
        elif key == "latent":
            out[key] = encode_latent(value)
        else:
            raise InputError(
                f"'{key}' is not a field of the wire format; fields: {', '.join(SAMPLE_FIELDS)}", field=key
            )
    return out


def encode_request(
    samples: Sequence[Mapping[str, Any]],
    rewards: Sequence[str] | None = None,
    *,
    fmt: str = "msgpack",
    image_format: str = "png",
) -> bytes:
    """A score request body; errors name the sample."""
    return dumps(request_map(samples, rewards, image_format=image_format), fmt)


#: Threads a client encodes a request's PNG images on.
ENCODE_THREADS = min(4, os.cpu_count() or 1)


def request_map(
    samples: Sequence[Mapping[str, Any]], rewards: Sequence[str] | None = None, *, image_format: str = "png"
) -> dict[str, Any]:
    """A score request as plain data (raw media as views of the caller's arrays, nothing copied); errors name the
    sample."""

    def one(i: int) -> dict[str, Any]:
        try:
            return encode_sample(samples[i], image_format)
        except InputError as exc:
            raise exc.located(sample=i) from None

    threads = min(ENCODE_THREADS, len(samples)) if image_format == "png" else 1  # zlib releases the GIL
    encoded = (
        list(_pool(threads).map(one, range(len(samples)))) if threads > 1 else [one(i) for i in range(len(samples))]
    )
    return {"protocol": PROTOCOL, "rewards": list(rewards) if rewards is not None else None, "samples": encoded}


# -------------------------------------------------------------------------------------------- decoding
@dataclass
class ScoreRequest:
    """A decoded score request: ``rewards`` (None: every served reward) and the samples as ``Sample``
    keyword mappings (media as PIL images, uint8 arrays, float32/int16 audio arrays)."""

    rewards: list[str] | None
    samples: list[dict[str, Any]]


def decode_request(body: bytes, fmt: str, limits: WireLimits = WireLimits()) -> ScoreRequest:
    """Parse and check a score request; WireError naming the limit, field and sample when refused."""
    return decode_request_map(loads(body, fmt, limits), limits)


def decode_request_map(
    data: Any, limits: WireLimits = WireLimits(), *, dry: bool = False, threads: int = 1
) -> ScoreRequest:
    """Check an already parsed score request map (a worker's, whose frame is parsed with its other keys).

    ``dry``: check every limit that decoding checks, from the PNG headers and the raw shapes alone, and decode
    nothing (media come back as None): the same WireError, naming the limit, field and sample, before a single
    image is decoded (the server checks a request so before admitting its memory). ``threads``: PNG images are
    decoded on up to this many threads (Pillow's decoder releases the GIL), after every other check."""
    if not isinstance(data, dict):
        raise WireError("the body must be a map with 'protocol' and 'samples'", kind="protocol")
    check_protocol(data)
    unknown = sorted(map(repr, set(data) - {"protocol", "rewards", "samples"}))
    if unknown:
        raise WireError(
            f"unknown request key(s) {', '.join(unknown)}; keys: protocol, rewards, samples", kind="protocol"
        )
    rewards = data.get("rewards")
    if rewards is not None and (
        not isinstance(rewards, list) or not rewards or not all(isinstance(r, str) for r in rewards)
    ):
        raise WireError("'rewards' must be null or a non-empty list of reward names", field="rewards")
    samples = data.get("samples")
    if not isinstance(samples, list) or not samples:
        raise WireError("'samples' must be a non-empty list of sample maps", field="samples")
    limits.over("max_samples", len(samples), f"the request's {len(samples)} samples")
    budget = _PixelBudget(limits)
    if threads > 1 and not dry:
        budget.pending = []
    out = []
    for i, raw in enumerate(samples):
        try:
            budget.sample = i
            out.append(decode_sample(raw, limits, budget, dry=dry))
        except InputError as exc:
            raise (exc if isinstance(exc, WireError) else WireError(exc.message, field=exc.field)).located(
                sample=i
            ) from None
    if budget.pending:
        _decode_pending(out, budget.pending, threads)
    return ScoreRequest(rewards, out)


class _Pending:
    """A PNG whose decoding waits for the request's parallel pass (its place in a decoded sample)."""

    __slots__ = ("data", "image", "key", "sample")

    def __init__(self, data: Any, key: str, sample: int) -> None:
        self.data, self.key, self.sample, self.image = data, key, sample, None


_POOLS: dict[int, Any] = {}
#: Requests whose PNGs a server decodes at once (its ``decode_threads``, 4 by default), each on its own threads.
DECODE_REQUESTS = 4


def _pool(threads: int) -> Any:
    from concurrent.futures import ThreadPoolExecutor

    pool = _POOLS.get(threads)
    if pool is None:
        pool = _POOLS.setdefault(threads, ThreadPoolExecutor(threads, thread_name_prefix="rewardzoo-png"))
    return pool


def _decode_pending(out: list[dict[str, Any]], pending: list[_Pending], threads: int) -> None:
    """Decode the pending PNGs on ``threads`` threads and put each image in its place; the first failure (in
    sample order) is raised naming its sample and field."""

    def run(p: _Pending) -> WireError | None:
        try:
            p.image = _png_image(p.data, p.key)
        except WireError as exc:
            return exc.located(sample=p.sample)
        return None

    # ``threads`` workers of a long-lived pool (threads kept: no per-request thread or malloc arena churn) pull the
    # request's PNGs in turn; the pool has room for DECODE_REQUESTS requests' workers at once, so concurrent
    # requests decode side by side, each on its own threads, as a serial decode per request did
    items, lock = iter(list(enumerate(pending))), threading.Lock()
    errors: list[WireError | None] = [None] * len(pending)

    def worker() -> None:
        while True:
            with lock:
                nxt = next(items, None)
            if nxt is None:
                return
            errors[nxt[0]] = run(nxt[1])

    pool = _pool(DECODE_REQUESTS * threads)
    for future in [pool.submit(worker) for _ in range(min(threads, len(pending)))]:
        future.result()
    failed = [e for e in errors if e is not None]
    if failed:
        raise min(failed, key=lambda e: e.sample if e.sample is not None else -1)

    def put(value: Any) -> Any:
        if isinstance(value, _Pending):
            image, value.image = value.image, None  # held by the sample only
            return image
        if isinstance(value, list):
            return [put(v) for v in value]
        return value

    for sample in out:
        for key in ("image", "condition_images", "video", "condition_videos"):
            if key in sample:
                sample[key] = put(sample[key])


#: Bytes a decoded PNG pixel holds: Pillow keeps an RGB image in 4-byte pixels (RGBX), not 3.
PIL_RGB_BYTES = 4


def decoded_bytes(data: Any, limits: WireLimits = WireLimits()) -> int:
    """An upper bound of the memory decoding a parsed request map's PNGs will hold, from their headers alone:
    :data:`PIL_RGB_BYTES` per pixel kept (an RGB PIL image) plus 4 per pixel of the largest one (its decoded mode,
    before conversion). Raw arrays are views over the received bytes (0). Malformed parts and images over
    ``limits`` count 0, and the total at most what ``max_request_pixels`` allows: a dry
    :func:`decode_request_map` refuses those from the same headers before anything is decoded."""
    sizes: list[int] = []

    def image(obj: Any) -> None:
        if (
            isinstance(obj, dict)
            and obj.get("format") == "png"
            and isinstance(obj.get("data"), (bytes, bytearray, memoryview))
        ):
            try:
                w, h = png_size(obj["data"])
            except WireError:
                return
            if limits.max_pixels is None or w * h <= limits.max_pixels:
                sizes.append(w * h)

    samples = data.get("samples") if isinstance(data, dict) else None
    for sample in samples if isinstance(samples, list) else []:
        if not isinstance(sample, dict):
            continue
        image(sample.get("image"))
        videos = [sample.get("video")] + (
            sample["condition_videos"] if isinstance(sample.get("condition_videos"), list) else []
        )
        images = sample["condition_images"] if isinstance(sample.get("condition_images"), list) else []
        for video in videos:
            if isinstance(video, dict) and isinstance(video.get("frames"), list):
                images = images + video["frames"]
        for obj in images:
            image(obj)
    total = sum(sizes) if limits.max_request_pixels is None else min(sum(sizes), limits.max_request_pixels)
    return PIL_RGB_BYTES * total + 4 * max(sizes, default=0)


def check_protocol(data: Mapping[str, Any]) -> None:
    version = data.get("protocol")
    if version != PROTOCOL or isinstance(version, bool):
        raise WireError(
            f"protocol version {version!r} is not supported; this server speaks protocol {PROTOCOL}",
            kind="protocol",
            field="protocol",
        )


class _PixelBudget:
    def __init__(self, limits: WireLimits):
        self.limits, self.used = limits, 0
        self.pending: list[_Pending] | None = None  # PNGs left for a parallel pass (decode_request_map's threads)
        self.sample = 0

    def take(self, pixels: int, what: str, field: str, count: int = 1) -> None:
        """Count ``count`` images of ``pixels`` each against the per-image and per-request limits."""
        self.limits.over("max_pixels", pixels, what, field=field)
        self.used += pixels * count
        self.limits.over(
            "max_request_pixels", self.used, f"the request's decoded images ({self.used} pixels)", field=field
        )


def decode_sample(
    raw: Any, limits: WireLimits = WireLimits(), budget: _PixelBudget | None = None, *, dry: bool = False
) -> dict[str, Any]:
    """One wire sample -> a mapping of ``Sample`` fields (``dry``: checked only, media None)."""
    if not isinstance(raw, dict):
        raise WireError(f"a sample is a map of fields, got {type(raw).__name__}")
    budget = budget or _PixelBudget(limits)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in TEXT_FIELDS:
            if not isinstance(value, str):
                raise WireError(f"must be a string, got {type(value).__name__}", field=key)
            out[key] = value
        elif key == "group_id":
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise WireError(f"must be an int or a string, got {type(value).__name__}", field=key)
            out[key] = value
        elif key == "metadata":
            if not isinstance(value, (str, dict)):
                raise WireError(f"must be a map or a JSON string, got {type(value).__name__}", field=key)
            out[key] = value if isinstance(value, str) else json.dumps(value)
        elif key == "image":
            out[key] = decode_image(value, limits, budget, key, dry=dry)
        elif key == "condition_images":
            out[key] = [decode_image(v, limits, budget, key, dry=dry) for v in _listed(value, key)]
        elif key == "video":
            out[key] = decode_video(value, limits, budget, key, dry=dry)
        elif key == "condition_videos":
            out[key] = [decode_video(v, limits, budget, key, dry=dry) for v in _listed(value, key)]
        elif key in ("audio", "condition_audio"):
            out[key], out[f"{key}_sample_rate"] = decode_audio(value, limits, key, dry=dry)
        elif key == "video_fps":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e4:
                raise WireError(f"must be a positive number of frames a second, got {value!r}", field=key)
            out[key] = float(value)
        elif key == "latent":
            out[key] = decode_latent(value, budget, key, dry=dry, error=WireError)
        else:
            raise WireError(f"unknown field; fields: {', '.join(SAMPLE_FIELDS)}", field=str(key)[:40])
    return out


def _listed(value: Any, key: str) -> list:
    if not isinstance(value, list):
        raise WireError(f"must be a list, got {type(value).__name__}", field=key)
    return value


def _data(obj: Mapping[str, Any], key: str) -> bytes | memoryview:
    data = obj.get("data")
    if isinstance(data, str):  # JSON carries bytes as base64
        try:
            return base64.b64decode(data, validate=True)
        except ValueError:
            raise WireError("'data' is not valid base64", field=key) from None
    if isinstance(data, memoryview):  # a worker's view of its parent's shared memory: read in place
        return data
    if not isinstance(data, (bytes, bytearray)):
        raise WireError(f"'data' must be bytes (base64 in JSON), got {type(data).__name__}", field=key)
    return bytes(data)


def _shape(obj: Mapping[str, Any], key: str, ndims: Iterable[int]) -> tuple[int, ...]:
    shape = obj.get("shape")
    ndims = tuple(ndims)
    if (
        not isinstance(shape, list)
        or len(shape) not in ndims
        or not all(isinstance(d, int) and not isinstance(d, bool) and 0 < d < 2**31 for d in shape)
    ):
        raise WireError(
            f"'shape' must be a list of {' or '.join(map(str, ndims))} positive ints, got {shape!r:.80}", field=key
        )
    return tuple(shape)


def _raw(obj: Mapping[str, Any], key: str, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    data = _data(obj, key)
    expected = math.prod(shape) * dtype.itemsize
    if len(data) != expected:
        raise WireError(
            f"'data' holds {len(data)} bytes; shape {list(shape)} of {dtype.name} needs {expected}", field=key
        )
    arr = np.frombuffer(data, dtype=dtype).reshape(shape)  # read-only, over the received bytes
    return arr if dtype.isnative else arr.astype(dtype.newbyteorder("="))


def png_size(data: bytes | memoryview) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, read without decoding anything."""
    head = bytes(data[:24])
    if len(data) < 33 or not head.startswith(_PNG_SIGNATURE) or head[12:16] != b"IHDR":
        raise WireError("the image data is not a PNG (no PNG signature and IHDR header)")
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def decode_image(
    obj: Any,
    limits: WireLimits = WireLimits(),
    budget: _PixelBudget | None = None,
    key: str = "image",
    *,
    dry: bool = False,
) -> Any:
    """A wire image -> an RGB PIL image (PNG) or a uint8 array (raw); ``dry``: checked from its header, None."""
    budget = budget or _PixelBudget(limits)
    if not isinstance(obj, dict):
        raise WireError(f"an image is a map with 'format' and 'data', got {type(obj).__name__}", field=key)
    fmt = obj.get("format")
    if fmt == "png":
        data = _data(obj, key)
        try:
            width, height = png_size(data)
        except WireError as exc:
            raise exc.located(field=key) from None
        if width == 0 or height == 0:
            raise WireError(f"the PNG header says {width}x{height}: an empty image", field=key)
        budget.take(width * height, f"the PNG image ({width}x{height} = {width * height} pixels, from its header)", key)
        if dry:
            return None
        if budget.pending is not None:
            budget.pending.append(_Pending(data, key, budget.sample))
            return budget.pending[-1]
        return _png_image(data, key)
    if fmt == "raw":
        if obj.get("dtype") != "uint8":
            raise WireError(f"raw images are uint8, got dtype {obj.get('dtype')!r}", field=key)
        shape = _shape(obj, key, (2, 3))
        if len(shape) == 3 and shape[2] not in (1, 3, 4):
            raise WireError(f"a raw image is [H, W] or [H, W, C] with C in 1, 3, 4; got {list(shape)}", field=key)
        budget.take(shape[0] * shape[1], f"the raw image ({shape[1]}x{shape[0]} pixels)", key)
        return None if dry else _raw(obj, key, np.dtype(np.uint8), shape)
    raise WireError(f"image format {fmt!r} is not supported; use 'png' or 'raw'", field=key)


def _png_image(data: bytes | memoryview, key: str) -> Any:
    """A PNG's pixels as an RGB PIL image; WireError naming ``key`` when it cannot be decoded."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data), formats=["PNG"]) as img:
            img.load()
            return img.convert("RGB") if img.mode != "RGB" else img
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError, EOFError) as exc:
        raise WireError(f"the PNG cannot be decoded: {exc}"[:300], field=key) from None


def decode_video(
    obj: Any,
    limits: WireLimits = WireLimits(),
    budget: _PixelBudget | None = None,
    key: str = "video",
    *,
    dry: bool = False,
) -> Any:
    """A wire video -> a list of frames (``frames``) or a uint8 array (T, H, W, C) (raw)."""
    budget = budget or _PixelBudget(limits)
    if not isinstance(obj, dict):
        raise WireError(f"a video is a map with 'frames' or a raw array, got {type(obj).__name__}", field=key)
    if "frames" in obj:
        frames = _listed(obj["frames"], key)
        if not frames:
            raise WireError("the video has no frames", field=key)
        limits.over("max_frames", len(frames), f"the video's {len(frames)} frames", field=key)
        return [decode_image(f, limits, budget, key, dry=dry) for f in frames]
    if obj.get("format") != "raw" or obj.get("dtype") != "uint8":
        raise WireError("a video is {'frames': [...]} or a raw uint8 array of shape [T, H, W, C]", field=key)
    shape = _shape(obj, key, (4,))
    if shape[3] not in (1, 3, 4):
        raise WireError(f"a raw video is [T, H, W, C] with C in 1, 3, 4; got {list(shape)}", field=key)
    limits.over("max_frames", shape[0], f"the video's {shape[0]} frames", field=key)
    budget.take(shape[1] * shape[2], f"each frame ({shape[2]}x{shape[1]} pixels)", key, count=shape[0])
    return None if dry else _raw(obj, key, np.dtype(np.uint8), shape)


def decode_audio(
    obj: Any, limits: WireLimits = WireLimits(), key: str = "audio", *, dry: bool = False
) -> tuple[np.ndarray | None, int]:
    """A wire clip -> (float32 or int16 array as sent, sample rate); finite samples only (``dry``: None, unread)."""
    if not isinstance(obj, dict) or obj.get("format") != "raw":
        raise WireError("audio is a raw array map: format 'raw', dtype, shape, sample_rate, data", field=key)
    named = obj.get("dtype")
    dtype = AUDIO_DTYPES.get(named) if isinstance(named, str) else None
    if dtype is None:
        raise WireError(f"audio dtype must be one of {sorted(AUDIO_DTYPES)}, got {obj.get('dtype')!r}", field=key)
    rate = obj.get("sample_rate")
    if isinstance(rate, bool) or not isinstance(rate, int) or not 0 < rate <= 1_000_000:
        raise WireError(f"'sample_rate' must be a positive int in Hz (at most 1 MHz), got {rate!r:.40}", field=key)
    shape = _shape(obj, key, (1, 2))
    if len(shape) == 2 and shape[0] > 8:
        raise WireError(f"audio is [time] or [channels, time] with at most 8 channels; got {list(shape)}", field=key)
    limits.over("max_audio_seconds", shape[-1] / rate, f"the clip ({shape[-1] / rate:.1f} s)", field=key)
    if dry:
        return None, rate
    arr = _raw(obj, key, dtype, shape)
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise WireError("the audio contains NaN or infinite samples", field=key, status=422, kind="input")
    return arr, rate


# ------------------------------------------------------------------------------------------- responses
def encode_result(
    rewards: Mapping[str, np.ndarray],
    total: np.ndarray,
    applied: Sequence[Sequence[str]],
    weights: Mapping[str, np.ndarray],
    extras: Mapping[str, Mapping[str, np.ndarray]],
) -> dict[str, Any]:
    """The response map of a score request (NaN -> null)."""
    return {
        "protocol": PROTOCOL,
        "rewards": {k: _numbers(v) for k, v in rewards.items()},
        "total": _numbers(total),
        "applied": [list(a) for a in applied],
        "weights": {k: _numbers(v) for k, v in weights.items()},
        "extras": {k: {kk: _numbers(vv) for kk, vv in v.items()} for k, v in extras.items()},
    }


def _numbers(values: Any) -> list:
    arr = np.asarray(values)
    if arr.dtype == object:
        return [None if v is None else v for v in arr.tolist()]
    return [None if math.isnan(x) else x for x in arr.astype(np.float64).tolist()]


def decode_result(data: Any) -> dict[str, Any]:
    """A response map -> ``{"rewards": {name: float32}, "total", "weights", "applied", "extras"}`` (NaN for null);
    ValueError when it is not one."""
    if not isinstance(data, dict) or data.get("protocol") != PROTOCOL:
        raise ValueError(f"the answer is not a protocol {PROTOCOL} score response")
    try:
        n = len(data["total"])

        def vec(values: Any) -> np.ndarray:
            if len(values) != n:
                raise ValueError(f"a vector of {len(values)} values for {n} samples")
            if any(isinstance(v, str) for v in values):
                arr = np.empty(n, dtype=object)
                arr[:] = values
                return arr
            return np.array([math.nan if v is None else v for v in values], dtype=np.float32)

        return {
            "rewards": {k: vec(v) for k, v in data["rewards"].items()},
            "total": vec(data["total"]),
            "weights": {k: vec(v) for k, v in data.get("weights", {}).items()},
            "applied": [list(a) for a in data["applied"]],
            "extras": {k: {kk: vec(vv) for kk, vv in v.items()} for k, v in data.get("extras", {}).items()},
        }
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"the score response is malformed: {type(exc).__name__}: {exc}") from None
