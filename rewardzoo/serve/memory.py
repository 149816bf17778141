"""The server's memory budget: bytes that requests may hold at once, across requests (``max_decoded_bytes``).

A PNG of 4096x4096 black pixels is 50 kB on the wire and 64 MB decoded; a MessagePack body of empty maps costs
~60x its bytes once parsed. Without a bound across requests a few clients multiply the server's memory. Each
request reserves (:meth:`MemoryBudget.reserve`) what it will hold before it holds it, in two steps, and gives it all
back once answered:

1. before its body is parsed: the body and what parsing it builds, from its size alone
   (:func:`~rewardzoo.transport.wire.parse_bytes`: the body's copies and a stated cost per container and item);
2. before any medium is decoded: what decoding its PNGs holds (from their headers,
   :func:`~rewardzoo.transport.wire.decoded_bytes`) plus what converting every image, frame and clip to the served
   rewards' forms allocates (:class:`ConversionCost`: a reward that wants float images holds 12 bytes per pixel, 3x
   the decoded PIL image).

A step that cannot get its share within ``wait_s`` is refused with 503 and Retry-After, a request larger than the
whole budget with 413 (before anything it asked for is decoded). Waiters are served in arrival order, so a large
request is not starved by small ones. When the budget falls idle the freed heap goes back to the OS
(:func:`~rewardzoo.shared.heap.release_heap`): glibc keeps what decoding threads freed in their arenas otherwise.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from ..transport.wire import WireError, png_size

#: Bytes per pixel of an image or frame converted to each form: a PNG arrives as an RGB PIL image (the ``pil``
#: form costs nothing more), a raw array as a view over the received bytes (a PIL image copies it, 4 bytes per
#: pixel); ``uint8`` / ``native`` copy 3 bytes per pixel, ``float`` allocates float32 RGB, 12; frames as an
#: ``array`` are the raw video itself (PNG frames are stacked: 3).
FORM_BYTES = {"pil": (0, 4), "uint8": (3, 3), "native": (3, 3), "float": (12, 12), "array": (3, 0)}


@dataclass(frozen=True)
class ConversionCost:
    """What converting a request's media to the served rewards' forms allocates, on top of decoding them.

    ``image_forms`` / ``frame_forms``: the distinct forms images (``image``, ``condition_images``) and video frames
    are converted to (each distinct conversion is held once, :class:`~rewardzoo.core.engine.ConversionCache`);
    ``audio``: the distinct ``(target rate or None, mono)`` audio conversions. A clip of C channels and T samples
    at rate r costs, per conversion, its float32 source (4 C T bytes, the form the converter reads it into) and its
    float32 result (4 C' ceil(T * rate' / r), C' = 1 when mono)."""

    image_forms: frozenset[str] = frozenset()
    frame_forms: frozenset[str] = frozenset()
    audio: frozenset[tuple[int | None, bool]] = frozenset()

    @classmethod
    def of(cls, rewards: Iterable[Any]) -> ConversionCost:
        """The cost of the forms that ``rewards`` (loaded rewards, with their ``inputs``) declare."""
        images, frames, audio = set(), set(), set()
        for reward in rewards:
            wants = reward.inputs
            if {"image", "condition_images"} & set(wants.fields):
                images.add(wants.images)
            if {"video", "condition_videos"} & set(wants.fields):
                frames.add(wants.frames)
            if {"audio", "condition_audio"} & set(wants.fields):
                audio.add((wants.sample_rate, wants.mono))
        return cls(frozenset(images), frozenset(frames), frozenset(audio))

    def bytes(self, data: Any) -> int:
        """An upper bound of what converting a parsed request map's media allocates (malformed parts count 0:
        decoding refuses them)."""
        total = 0
        samples = data.get("samples") if isinstance(data, dict) else None
        for sample in samples if isinstance(samples, list) else []:
            if not isinstance(sample, dict):
                continue
            images = [sample.get("image")] + _list(sample.get("condition_images"))
            total += sum(self._image(obj, self.image_forms) for obj in images)
            for video in [sample.get("video")] + _list(sample.get("condition_videos")):
                total += self._video(video)
            for key in ("audio", "condition_audio"):
                total += self._audio(sample.get(key))
        return total

    @staticmethod
    def _image(obj: Any, forms: frozenset[str], count: int = 1) -> int:
        if not isinstance(obj, dict) or not forms:
            return 0
        pixels, raw = _pixels(obj)
        return count * pixels * sum(FORM_BYTES.get(form, (12, 12))[raw] for form in forms)

    def _video(self, obj: Any) -> int:
        if not isinstance(obj, dict):
            return 0
        if isinstance(obj.get("frames"), list):
            return sum(self._image(frame, self.frame_forms) for frame in obj["frames"])
        shape = obj.get("shape")
        if isinstance(shape, list) and _shape_ok(shape, 4):
            t, h, w = shape[:3]
            return t * h * w * sum(FORM_BYTES.get(form, (12, 12))[1] for form in self.frame_forms)
        return 0

    def _audio(self, obj: Any) -> int:
        if not isinstance(obj, dict) or not self.audio:
            return 0
        shape, rate = obj.get("shape"), obj.get("sample_rate")
        if not isinstance(shape, list) or not (_shape_ok(shape, 1) or _shape_ok(shape, 2)):
            return 0
        if not isinstance(rate, int) or rate <= 0:
            return 0
        channels, samples = (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])
        total = 0
        for target, mono in self.audio:
            out = math.ceil(samples * (target or rate) / rate)
            total += 4 * channels * samples + 4 * (1 if mono else channels) * out
        return total


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _shape_ok(shape: Any, ndim: int) -> bool:
    return (
        isinstance(shape, list)
        and len(shape) == ndim
        and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
    )


def _pixels(obj: dict[str, Any]) -> tuple[int, int]:
    """(pixels of a wire image, 1 when it is a raw array else 0); 0 pixels when malformed."""
    if obj.get("format") == "png" and isinstance(obj.get("data"), (bytes, bytearray, memoryview)):
        try:
            w, h = png_size(obj["data"])
        except WireError:
            return 0, 0
        return w * h, 0
    shape = obj.get("shape")
    if obj.get("format") == "raw" and isinstance(shape, list) and (_shape_ok(shape, 2) or _shape_ok(shape, 3)):
        return shape[0] * shape[1], 1
    return 0, 0


class DecodeBusy(Exception):
    """No share of the budget within the wait; ``retry_after`` seconds is a fair wait."""

    def __init__(self, needed: int, limit: int, retry_after: float = 1.0):
        self.retry_after = retry_after
        super().__init__(
            f"the server's memory budget (max_decoded_bytes={limit}) is in use; this request "
            f"needs {needed} bytes; retry in {retry_after:g} s"
        )


class Reservation:
    """What one request holds of a :class:`MemoryBudget`: :meth:`grow` it before each allocation step."""

    def __init__(self, budget: MemoryBudget) -> None:
        self.budget, self.bytes = budget, 0

    async def grow(self, n: int, what: str = "the request") -> None:
        """``n`` bytes more, waiting in turn; DecodeBusy (503) past the wait, WireError 413 when the request would
        hold more than the whole budget."""
        await self.budget._acquire(n, held=self.bytes, what=what)
        self.bytes += n


class MemoryBudget:
    """``async with budget.reserve() as held: await held.grow(n)`` — bytes of the ``limit`` (None: unbounded) until
    the block ends; ``async with budget.hold(n):`` for one step. Used from one event loop."""

    #: A release that leaves the budget idle hands the freed heap back to the OS after this delay (when still idle):
    #: the request's last objects (its answer's batch) are freed by then. Not sooner: a client whose requests come
    #: a few hundred ms apart would otherwise fault every byte in again each time (a 32-image 512x512 request to a
    #: CLIP reward: 66 ms with a trim 0.2 s after each request, 51 ms with none between them; bench_serve.py).
    TRIM_AFTER_S = 2.0

    def __init__(self, limit: int | None, wait_s: float = 5.0) -> None:
        self.limit, self.wait_s = limit, wait_s
        self.used = 0
        self.peak = 0
        self.trims = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future]] = collections.deque()
        self._trim: asyncio.TimerHandle | None = None

    @contextlib.asynccontextmanager
    async def reserve(self) -> AsyncIterator[Reservation]:
        held = Reservation(self)
        try:
            yield held
        finally:
            self._release(held.bytes)

    @contextlib.asynccontextmanager
    async def hold(self, n: int) -> AsyncIterator[None]:
        async with self.reserve() as held:
            await held.grow(n)
            yield

    async def keep(self, n: int, what: str) -> None:
        """``n`` bytes held past a request (a job's body or answer, :mod:`~rewardzoo.serve.jobs`) until
        :meth:`give_back`; waits and refuses as :meth:`Reservation.grow` does."""
        await self._acquire(n, what=what)

    def give_back(self, n: int) -> None:
        """Bytes taken by :meth:`keep`, free again."""
        self._release(n)

    async def _acquire(self, n: int, held: int = 0, what: str = "the request") -> None:
        if self.limit is None or n == 0:
            self._take(n)
            return
        if held + n > self.limit:
            raise WireError(
                f"{what} needs {held + n} bytes (its body parsed, its media decoded and converted to the rewards' "
                f"forms), over the server's limit max_decoded_bytes={self.limit}; send fewer or smaller media "
                "per request",
                status=413,
                kind="limit",
                limit="max_decoded_bytes",
            )
        if not self._waiters and self.used + n <= self.limit:
            self._take(n)
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((n, future))
        try:
            await asyncio.wait_for(asyncio.shield(future), self.wait_s)
        except asyncio.TimeoutError:
            if future.done():  # granted just as the wait ended: keep it
                return
            self._waiters.remove((n, future))
            future.cancel()
            self._wake()
            raise DecodeBusy(n, self.limit, max(1.0, self.wait_s)) from None
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release(n)
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove((n, future))
            raise

    def _take(self, n: int) -> None:
        self.used += n
        self.peak = max(self.peak, self.used)

    def _release(self, n: int) -> None:
        self.used -= n
        self._wake()
        if n and self.used == 0 and self._trim is None:
            with contextlib.suppress(RuntimeError):  # no running loop (closing): nothing to schedule
                self._trim = asyncio.get_running_loop().call_later(self.TRIM_AFTER_S, self._release_heap)

    def _release_heap(self) -> None:
        """Idle since the release: the freed heap back to the OS, on a thread (a trim of GBs takes milliseconds)."""
        self._trim = None
        if self.used == 0:
            from ..shared.heap import release_heap

            self.trims += 1
            asyncio.get_running_loop().run_in_executor(None, release_heap)

    def _wake(self) -> None:
        if self.limit is None:  # unbounded: nobody waits
            return
        while self._waiters and self.used + self._waiters[0][0] <= self.limit:
            n, future = self._waiters.popleft()
            if not future.done():
                self._take(n)
                future.set_result(None)


#: The name the server used before the budget counted parsed bodies too.
DecodeBudget = MemoryBudget
