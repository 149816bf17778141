"""Video reading and conversion: files (decord, PyAV fallback), frame lists, NumPy and tensors.

A video enters as

- a file path: decoded with decord when it is installed and can read the file, otherwise with PyAV;
- a list/tuple of frames, each anything :mod:`rewardzoo.shared.media` accepts as an image
  (path, PIL, NumPy (H, W[, C]), tensor (C, H, W));
- a NumPy array (T, H, W[, C]) or a tensor (T, C, H, W).

and leaves :func:`prepare_video` as a list of RGB PIL frames or a float32 tensor (T, 3, H, W) in
[0, 1] (or, on request, a uint8 tensor where the source is 8-bit). Per-frame conversion follows the
image rules of ``media.py`` (float input must lie in [0, 1], grayscale is repeated, alpha dropped,
16-bit scaled). ``num_frames=K`` keeps K frames at
uniformly spaced indices ``round(linspace(0, T - 1, K))`` (first and last frame included; all
frames when T <= K) and, for files, decodes only what those frames need: with decord,
``get_batch`` seeks to each frame's keyframe unless those seeks would cost more than decoding
straight through (then it skips forward without converting the skipped frames); the PyAV reader
seeks to the keyframe before a wanted frame only when that keyframe lies ahead of the decoder, and
decodes forward only up to the frame. Errors are :class:`~rewardzoo.errors.InputError` without
location. :func:`write_video` encodes frames with PyAV (tests, benchmarks, the demo).
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
from PIL import Image

from ..errors import InputError
from . import sharedmem
from .files import regular_file
from .media import (
    check_pixels,
    check_unit_range,
    image_to_uint8,
    is_float_image_tensor,
    is_path,
    is_tensor,
    tensor_to_uint8,
    to_image_tensor,
    to_uint8_tensor,
)
from .options import positive_int

BACKENDS = ("auto", "decord", "pyav")
_DECORD_PREFIX = re.compile(r"^\[[\d:]+\] \S+:\d+: ")


def sample_indices(total: int, num_frames: int | None, *, floor: bool = False) -> list[int]:
    """Indices of ``num_frames`` uniformly spaced frames out of ``total`` (all of them when None or >= total).

    The first and last frames are always included (for K >= 2); indices are distinct and increasing.
    ``round(linspace(0, T - 1, K))`` by default; ``floor=True`` floors them instead, as
    ``np.linspace(0, T - 1, K, dtype=int)`` does (Pref-GRPO's frame choice).
    """
    if total <= 0:
        raise InputError("the video has no frames")
    if num_frames is None or num_frames >= total:
        return list(range(total))
    if num_frames <= 0:
        raise ValueError(f"num_frames must be a positive integer or None, got {num_frames!r}")
    points = np.linspace(0, total - 1, num_frames)
    return [int(i) for i in (np.floor(points) if floor else np.rint(points))]


def kept_indices(total: int, num_frames: int | None, step: int = 1) -> list[int]:
    """The frames a reward is given out of ``total``: every ``step``-th frame (0, step, 2 step, ...), then
    ``num_frames`` of those sampled uniformly (:func:`sample_indices`; all when None)."""
    if step < 1:
        raise ValueError(f"frame step must be a positive integer, got {step!r}")
    return [i * step for i in sample_indices(-(-total // step), num_frames)]


def stride_indices(total: int, num_frames: int) -> list[int]:
    """``int(i * T / K)`` for ``i < K``: K frames at the start of K equal strides of the video (the last frame
    not always included), as UnifiedReward's ``read_video_frames`` picks them; the video needs ``T >= K``
    (fewer frames would repeat indices: a ValueError)."""
    if num_frames <= 0 or total < num_frames:
        raise ValueError(f"stride_indices needs 0 < num_frames <= total, got {num_frames} of {total}")
    return [i * total // num_frames for i in range(num_frames)]


def check_num_frames(num_frames: Any) -> int | None:
    """Validate a reward's ``num_frames`` option: a positive int, or None for every frame."""
    return positive_int(num_frames, "num_frames", allow_none=True)


def check_temporal(frames: Any, sample: int) -> None:
    """InputError (field ``video``) unless the video has the 2 frames a temporal score needs."""
    if frames.shape[0] < 2:
        raise InputError(
            f"a temporal score needs at least 2 frames, got {frames.shape[0]} (no temporal signal)",
            field="video",
            sample=sample,
        )


# --------------------------------------------------------------------------------------------- files


def check_frame_count(count: int, max_frames: int | None, where: str = "the video") -> None:
    """InputError when a reward would receive more than ``max_frames`` frames (None: no limit)."""
    if max_frames is not None and count > max_frames:
        raise InputError(
            f"{where} brings {count} frames, more than this reward's limit of {max_frames} "
            "(sample fewer with num_frames, or raise it with `limits: {frames: ...}`)"
        )


#: Share of the memory the system reports available (``MemAvailable``) that one video's decoded 8-bit frames may
#: take: a reward's peak is about 1.5x them, and the rest of the process needs room too.
DECODE_SHARE = 0.5


def decode_budget() -> int | None:
    """Bytes one video's decoded frames may take: :data:`DECODE_SHARE` of ``MemAvailable`` (None where the
    system does not say: no check)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(int(line.split()[1]) * 1024 * DECODE_SHARE)
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_decoded_bytes(
    count: int, height: int, width: int, where: str = "the video", *, cost: float = 1.0, budget: int | None = None
) -> None:
    """InputError, before decoding, when ``count`` frames of ``height x width`` RGB, times ``cost`` (what the
    conversion holds per decoded byte: 1 for 8-bit frames, 5 for float ones beside them), would take more than
    ``budget`` bytes (default :func:`decode_budget`): a clear refusal rather than an out-of-memory kill."""
    size = int(count) * int(height) * int(width) * 3
    budget = decode_budget() if budget is None else budget
    if budget is not None and size * cost > budget:
        held = f" ({cost:g}x that once converted to float)" if cost != 1 else ""
        raise InputError(
            f"{where} decodes to {count} frames of {width}x{height} = {size / 1e9:.2f} GB of 8-bit RGB{held}, more "
            f"than the decode budget of {budget / 1e9:.2f} GB ({DECODE_SHARE:g} of the memory available now); "
            "sample fewer frames with num_frames, or score a shorter or smaller video"
        )


def video_rate(path: str | os.PathLike) -> float | None:
    """A video file's average frame rate as its container states it (decord's ``get_avg_fps``, else PyAV's
    ``average_rate``), None when it states none; InputError for a file that does not open."""
    path = regular_file(path, "video")
    try:
        import decord

        rate = float(decord.VideoReader(str(path), num_threads=1).get_avg_fps())
    except ImportError:
        import av

        try:
            with av.open(str(path)) as container:
                if not container.streams.video:
                    raise InputError(f"video file '{path}' has no video stream (no frames)")
                average = container.streams.video[0].average_rate
                rate = float(average) if average else 0.0
        except av.error.FFmpegError as exc:
            raise InputError(f"video file '{path}' cannot be read: {exc}") from None
    except Exception as exc:  # decord's own errors (DECORDError) for an unreadable file
        raise InputError(f"video file '{path}' cannot be read: {exc}") from None
    return rate if rate > 0 else None


def read_video(
    path: str | os.PathLike,
    num_frames: int | None = None,
    *,
    backend: str = "auto",
    max_frames: int | None = None,
    cost: float = 1.0,
    frame_step: int = 1,
) -> np.ndarray:
    """Decode ``num_frames`` uniformly sampled frames (all when None) of every ``frame_step``-th frame
    (:func:`kept_indices`) -> uint8 array (T, H, W, 3); frames left out are never converted nor kept.

    ``backend``: ``"auto"`` (decord, then PyAV when decord is missing or fails on the file; for every
    frame, PyAV first: it holds the frames once where decord's decode-ahead adds ~0.5x at the peak),
    ``"decord"`` or ``"pyav"``. An unreadable, truncated or empty file raises InputError, and so does
    one that would bring more than ``max_frames`` frames or whose frames (times ``cost``, see
    :func:`check_decoded_bytes`) exceed the decode budget (both refused from the container's frame count
    before decoding where the container knows it, else as the frames arrive).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    path = regular_file(path, "video")
    if path.stat().st_size == 0:
        raise InputError(f"video file '{path}' is empty (0 bytes)")
    if backend == "auto" and num_frames is None and frame_step == 1:
        # Every frame, straight through: PyAV holds the video once; decord's decode-ahead buffers add about
        # 0.5x at the peak. (The same FFmpeg decoder and RGB conversion: the same frames.)
        try:
            return _read_pyav(path, None, max_frames, cost)
        except InputError:
            raise
        except Exception:  # PyAV missing or failing: decord, then PyAV again for the message
            pass
    failures = []
    if backend in ("auto", "decord"):
        try:
            return _read_decord(path, num_frames, max_frames, cost, frame_step)
        except InputError:
            raise
        except ImportError as exc:
            if backend == "decord":
                raise InputError(f"decord is not installed ({exc}); use backend 'pyav'") from None
            failures.append("decord is not installed")
        except Exception as exc:  # decord reports every failure as a RuntimeError/DECORDError
            if backend == "decord":
                raise InputError(f"cannot read video file '{path}' with decord: {_first_line(exc)}") from None
            failures.append(f"decord: {_first_line(exc)}")
    try:
        return _read_pyav(path, num_frames, max_frames, cost, frame_step)
    except InputError as exc:
        if failures:
            raise exc.located(suffix=f" ({'; '.join(failures)})") from None
        raise
    except ImportError as exc:
        raise InputError(
            f"cannot read video file '{path}': PyAV is not installed ({exc}); pip install 'rewardzoo[video]'"
        ) from None
    except Exception as exc:  # av.FFmpegError and friends
        why = "; ".join(failures + [f"PyAV: {_first_line(exc)}"])
        raise InputError(f"cannot read video file '{path}' (unreadable, truncated or not a video): {why}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    if not text:
        return type(exc).__name__
    # decord prefixes its messages with "[hh:mm:ss] /path/to/source.cc:123: "
    return f"{type(exc).__name__}: {_DECORD_PREFIX.sub('', text[0])[:300]}"


#: Cost of one decord seek in units of one decoded frame. A seek flushes and restarts the decoder;
#: measured with benchmarks/bench_video.py (decord 0.6, 256x256 H.264, 2-core CPU): 3 seeks made
#: 8 sampled frames of a 48-frame clip with a keyframe every 12 frames cost 1.7x a full decode.
_DECORD_SEEK_COST = 14


def _decord_seek_plan(keys: list[int], wanted: list[int]) -> tuple[int, int]:
    """(frames decoded, seeks) of decord's get_batch: it seeks when a frame lies in another GOP."""
    decoded, seeks, pos = 0, 0, -1  # pos: last decoded frame
    for t in wanted:
        key = keys[bisect.bisect_right(keys, t) - 1] if keys else 0
        if pos >= 0 and (t <= pos or key > pos):
            seeks += 1
            decoded += t - key + 1
        else:
            decoded += t - pos
        pos = t
    return decoded, seeks


def _read_decord(
    path: Path, num_frames: int | None, max_frames: int | None = None, cost: float = 1.0, step: int = 1
) -> np.ndarray:
    import decord

    reader = decord.VideoReader(str(path), ctx=decord.cpu(0))
    total = len(reader)
    if total == 0:
        raise InputError(f"video file '{path}' has no frames")
    wanted = kept_indices(total, num_frames, step)
    check_frame_count(len(wanted), max_frames, f"video file '{path}'")
    h, w = reader[0].shape[:2]
    reader.seek(0)
    check_decoded_bytes(len(wanted), h, w, f"video file '{path}'", cost=cost)
    out = sharedmem.empty((len(wanted), h, w, 3), np.uint8)
    if len(wanted) == total:  # straight through: get_batch would keep ~0.7x the video in decord's buffers
        for k in range(total):
            _put(out, k, reader.next().asnumpy()[None])
        return out
    if len(wanted) < total:
        decoded, seeks = _decord_seek_plan(sorted(int(k) for k in reader.get_key_indices()), wanted)
        if decoded + _DECORD_SEEK_COST * seeks > wanted[-1] + 1:
            # Seeking would cost more than decoding straight through: skip forward without seeking
            # (skipped frames are decoded but not converted to RGB).
            pos = 0
            for k, t in enumerate(wanted):
                if t > pos:
                    reader.skip_frames(t - pos)
                _put(out, k, reader.next().asnumpy()[None])
                pos = t + 1
            return out
    # A few frames at a time into one array: decord's own batch and its NumPy copy never hold the whole video.
    for k in range(0, len(wanted), _DECORD_CHUNK):
        _put(out, k, reader.get_batch(wanted[k : k + _DECORD_CHUNK]).asnumpy())
    return out


#: Frames decord decodes per ``get_batch`` call (its batch and the NumPy copy of it are transient).
_DECORD_CHUNK = 16


def _put(out: np.ndarray, k: int, frames: np.ndarray) -> None:
    """``out[k : k + len(frames)] = frames``, checking that decord returned RGB frames of the first one's size."""
    if frames.ndim != 4 or frames.shape[1:] != out.shape[1:] or 0 in frames.shape:
        raise RuntimeError(f"decord returned frames of shape {frames.shape}, expected (N, *{out.shape[1:]})")
    out[k : k + len(frames)] = frames


def _read_pyav(
    path: Path, num_frames: int | None, max_frames: int | None = None, cost: float = 1.0, step: int = 1
) -> np.ndarray:
    import av

    where = f"video file '{path}'"
    with av.open(str(path)) as container:
        if not container.streams.video:
            raise InputError(f"video file '{path}' has no video stream (no frames)")
        stream = container.streams.video[0]
        h, w = stream.codec_context.height, stream.codec_context.width
        # 0 frames when the container does not say (or as many as asked)
        count = len(kept_indices(stream.frames, num_frames, step)) if stream.frames else (num_frames or 0)
        budget = decode_budget()
        check_decoded_bytes(count, h, w, where, cost=cost, budget=budget)
        frames: _FrameBuffer | list[np.ndarray]
        if num_frames is None and step == 1:
            check_frame_count(stream.frames, max_frames, where)  # 0 when the container does not say
            frames = _FrameBuffer(stream.frames)
            for f in container.decode(stream):
                frames.append(f.to_ndarray(format="rgb24"))
                check_frame_count(len(frames), max_frames, where)
                check_decoded_bytes(len(frames), h, w, where, cost=cost, budget=budget)
        else:

            def check(n: int) -> None:  # the frames the stream's index lists, before any is decoded
                check_frame_count(n, max_frames, where)
                check_decoded_bytes(n, h, w, where, cost=cost, budget=budget)

            check_frame_count(count, max_frames, where)
            frames = _pyav_sampled(container, stream, num_frames, step, check)
    if not len(frames):
        raise InputError(f"video file '{path}' has no frames")
    return frames.array() if isinstance(frames, _FrameBuffer) else np.stack(frames)


class _FrameBuffer:
    """Decoded frames written into one array allocated for the container's frame count (stacking a list of
    frames would hold the video twice); frames past that count, or of another size, go to a list."""

    def __init__(self, expected: int) -> None:
        self.expected = max(0, int(expected or 0))
        self.out: np.ndarray | None = None
        self.n = 0
        self.rest: list[np.ndarray] = []

    def append(self, frame: np.ndarray) -> None:
        if self.out is None and self.expected and not self.rest:
            self.out = sharedmem.empty((self.expected, *frame.shape), frame.dtype)
        if self.out is not None and self.n < len(self.out) and not self.rest and frame.shape == self.out.shape[1:]:
            self.out[self.n] = frame
            self.n += 1
        else:
            self.rest.append(frame)

    def __len__(self) -> int:
        return self.n + len(self.rest)

    def array(self) -> np.ndarray:
        head = self.out[: self.n] if self.out is not None else None
        if not self.rest:
            assert head is not None  # (len > 0 was checked)
            return head
        return np.stack(([*head] if head is not None else []) + self.rest)


def _pyav_sampled(
    container, stream, num_frames: int | None, step: int, check: Callable[[int], None]
) -> _FrameBuffer | list[np.ndarray]:
    # Index the stream from packets (demuxing without decoding is cheap): presentation timestamps in
    # display order, and which of them are keyframes (where decoding can start after a seek).
    pts, keys = [], []
    for packet in container.demux(stream):
        if packet.size == 0:
            continue
        if packet.pts is None:  # no timestamps (e.g. a raw elementary stream): decode everything
            container.seek(0)
            frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
            return [frames[i] for i in kept_indices(len(frames), num_frames, step)] if frames else []
        pts.append(packet.pts)
        if packet.is_keyframe:
            keys.append(packet.pts)
    if not pts:
        return []
    pts.sort()
    keys.sort()
    if not keys or keys[0] > pts[0]:
        keys.insert(0, pts[0])
    wanted = [pts[i] for i in kept_indices(len(pts), num_frames, step)]
    check(len(wanted))
    out = _FrameBuffer(len(wanted))
    decoder, position = None, None  # position: pts of the last decoded frame
    for target in wanted:
        key = keys[bisect.bisect_right(keys, target) - 1]
        if decoder is None or position is None or position >= target or key > position:
            container.seek(key, stream=stream, backward=True)
            decoder, position = container.decode(stream), None
        for frame in decoder:
            position = frame.pts
            if frame.pts is None or frame.pts >= target:
                break
        else:
            raise InputError("the video ends before a frame its index lists (truncated file?)")
        if frame.pts is not None and frame.pts != target:
            raise InputError(f"cannot find the frame at timestamp {target} (corrupt or truncated file?)")
        out.append(frame.to_ndarray(format="rgb24"))
    return out


def write_video(
    path: str | os.PathLike,
    frames: Any,
    fps: float = 24,
    gop: int | None = None,
    *,
    codec: str = "libx264",
    options: dict[str, str] | None = None,
) -> Path:
    """Encode ``frames`` (any video form :func:`prepare_video` accepts) to ``path`` with PyAV.

    ``gop``: distance between keyframes (None: the encoder's default, 250 for libx264).
    Frames are stored as yuv420p, so H.264 output is lossy and needs even width and height.
    """
    import av

    arr = video_to_uint8(frames)
    _t, h, w, _ = arr.shape
    path = Path(path)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=_rate(fps), options=dict(options or {}))
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        if gop is not None:
            stream.codec_context.gop_size = int(gop)
        for frame in arr:
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _rate(fps: float):
    from fractions import Fraction

    return Fraction(fps).limit_denominator(1001)


# ------------------------------------------------------------------------------------- conversion


def video_to_uint8(value: Any, num_frames: int | None = None) -> np.ndarray:
    """Any supported video -> uint8 array (T, H, W, 3) of the sampled frames (a uint8 RGB array: itself, or its
    sampled frames)."""
    if is_path(value):
        return read_video(value, num_frames)
    frames = _frame_list(value)
    return _uint8_array(frames, sample_indices(len(frames), num_frames))


def _uint8_array(frames: Any, index: list[int]) -> np.ndarray:
    """The frames at ``index`` as one uint8 array (T, H, W, 3): a uint8 RGB array's own frames as they are (a view
    when all are kept), other frames converted one at a time into the result."""
    if _is_uint8_video(frames):
        return frames if len(index) == len(frames) else frames[index]
    first = image_to_uint8(frames[index[0]])
    # filled frame by frame: a list of converted frames and its stacked copy would hold the video twice
    out = sharedmem.empty((len(index), *first.shape), np.uint8)
    out[0] = first
    for j, i in enumerate(index[1:], 1):
        frame = image_to_uint8(frames[i])
        if frame.shape != first.shape:
            _check_sizes([image_to_uint8(frames[k]).shape[:2] for k in index])
        out[j] = frame
    return out


def prepare_video(
    value: Any,
    *,
    as_tensor: bool = False,
    num_frames: int | None = None,
    max_frames: int | None = None,
    max_pixels: int | None = None,
    keep_uint8: bool = False,
    as_array: bool = False,
    frame_step: int = 1,
):
    """Convert a video for a reward: RGB PIL frames, or a float32 tensor (T, 3, H, W) in [0, 1].

    ``num_frames``: keep that many uniformly sampled frames (None: all) of every ``frame_step``-th frame
    (:func:`kept_indices`; a file's other frames are decoded but never converted nor kept). A float tensor in [0, 1] keeps
    its full precision when ``as_tensor``; anything else goes through 8-bit RGB. ``keep_uint8`` (with
    ``as_tensor``): what goes through 8-bit RGB stays a uint8 tensor (T, 3, H, W), so that a reward that
    uses a few of the frames converts only those (``x.float() / 255`` of a frame is the float form's
    value). ``as_array``: a uint8 NumPy array (T, H, W, 3) instead (a file's decoded frames themselves, a uint8 RGB
    array as it is). ``max_frames`` / ``max_pixels``: limits on the frames kept and the pixels per frame (InputError).
    """
    num_frames = check_num_frames(num_frames)
    if is_path(value):
        cost = 5.0 if as_tensor and not keep_uint8 else 1.0  # float frames beside the 8-bit ones
        arr = read_video(value, num_frames, max_frames=max_frames, cost=cost, frame_step=frame_step)
        check_pixels(arr[0], max_pixels)
        if as_array:
            return arr
        if not as_tensor:
            return [Image.fromarray(f, mode="RGB") for f in arr]
        import torch

        frames = torch.from_numpy(arr).permute(0, 3, 1, 2)
        return frames if keep_uint8 else frames.float().div_(255.0)
    frames = _frame_list(value)
    index = kept_indices(len(frames), num_frames, frame_step)
    check_frame_count(len(index), max_frames)
    check_pixels(frames[index[0]], max_pixels)
    if as_array:
        return _uint8_array(frames, index)
    if as_tensor and is_tensor(frames) and getattr(frames, "ndim", 0) == 4:
        return _frames_tensor(frames, index, keep_uint8)
    if as_tensor and keep_uint8 and _is_uint8_video(frames):  # (a worker's video, read in shared memory)
        return _uint8_frames_tensor(frames, index)
    picked = [frames[i] for i in index]
    if as_tensor:
        import torch

        if keep_uint8 and not any(is_float_image_tensor(f) for f in picked):
            tensors = [to_uint8_tensor(f) for f in picked]
        else:
            tensors = [to_image_tensor(f) for f in picked]
        _check_sizes([tuple(t.shape[1:]) for t in tensors])
        return torch.stack(tensors)
    arrays = [image_to_uint8(f) for f in picked]
    _check_sizes([a.shape[:2] for a in arrays])
    return [Image.fromarray(a, mode="RGB") for a in arrays]


#: Full-resolution float32 frames a reward converts at a time (a 720p frame is 11 MB): what keeps a long
#: high-resolution video's float working set small beside its 8-bit frames.
CONVERT_BYTES = 64 << 20


def float_frames(frames: Any) -> Any:
    """Frames (..., 3, H, W) in a ``"native"`` form -> float32 in [0, 1]: ``x.float() / 255`` for uint8 (exactly
    the ``"float"`` form's value), float frames as float32."""
    import torch

    return frames.float().div_(255.0) if frames.dtype == torch.uint8 else frames.float()


def frame_batches(frames: Any, batch_size: int | None = None) -> list[Any]:
    """``frames`` (T, ...) split along time into views of at most ``batch_size`` frames (None: no such limit)
    whose float32 form holds at most :data:`CONVERT_BYTES` (one frame at least): the pieces a reward converts
    to float (and resizes) one at a time."""
    per_frame = 4 * max(1, int(frames[0].numel())) if len(frames) else 4
    step = max(1, CONVERT_BYTES // per_frame)
    if batch_size is not None:
        step = min(step, batch_size)
    return list(frames.split(step))


def _is_uint8_video(frames: Any) -> TypeGuard[np.ndarray]:
    """Whether ``frames`` is a uint8 RGB NumPy video (T, H, W, 3)."""
    return isinstance(frames, np.ndarray) and frames.dtype == np.uint8 and frames.ndim == 4 and frames.shape[-1] == 3


def _uint8_frames_tensor(frames: np.ndarray, index: list[int]) -> Any:
    """The frames at ``index`` of a uint8 (T, H, W, 3) array as a uint8 tensor (T, 3, H, W) of their own, copied
    frame by frame (what stacking per-frame tensors gives, without the list of them beside the stack)."""
    import torch

    out = torch.empty((len(index), 3, *frames.shape[1:3]), dtype=torch.uint8)
    target = out.numpy()
    for j, i in enumerate(index):
        target[j] = frames[i].transpose(2, 0, 1)
    return out


def _frames_tensor(frames: Any, index: list[int], keep_uint8: bool) -> Any:
    """A (T, C, H, W) tensor's frames at ``index`` as the per-frame rules of ``media.py`` convert them, in one
    operation over the video (no per-frame loop, no copy of frames that are not kept; the video itself when
    nothing needs converting: the engine hands each reward its own copy)."""
    t = frames.detach()
    if len(index) < t.shape[0]:
        t = t[index]
    if 0 in t.shape:
        raise InputError(f"empty frames of shape {tuple(t.shape[1:])}")
    if t.is_floating_point() and t.shape[1] in (1, 3):  # full precision, as to_image_tensor keeps a frame
        check_unit_range(t)
        t = t.float()
        return t.repeat(1, 3, 1, 1) if t.shape[1] == 1 else t  # a copy, not an expanded view: rewards may write
    t = tensor_to_uint8(t)
    return t if keep_uint8 else t.float().div_(255.0)


def _frame_list(value: Any) -> Sequence[Any] | np.ndarray:
    """Split a video value into indexable frames without converting them."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise InputError("the video has no frames (empty list)")
        return value
    if isinstance(value, np.ndarray):
        if value.ndim not in (3, 4):
            raise InputError(f"a NumPy video is (T, H, W, C) or (T, H, W); got shape {tuple(value.shape)}")
        if value.shape[0] == 0:
            raise InputError("the video has no frames (T = 0)")
        if value.ndim == 4 and value.shape[-1] not in (1, 3, 4):
            raise InputError(
                f"a NumPy video is (T, H, W, C) with C in 1, 3, 4; got shape {tuple(value.shape)}"
                " (pass (T, C, H, W) data as a tensor)"
            )
        return value
    if is_tensor(value):
        if value.ndim not in (3, 4):
            raise InputError(f"a video tensor is (T, C, H, W) or (T, H, W); got shape {tuple(value.shape)}")
        if value.shape[0] == 0:
            raise InputError("the video has no frames (T = 0)")
        if value.ndim == 4 and value.shape[1] not in (1, 3, 4):
            raise InputError(
                f"a video tensor is (T, C, H, W) with C in 1, 3, 4; got shape {tuple(value.shape)}"
                " (channels last? permute(0, 3, 1, 2))"
            )
        return value
    if isinstance(value, Image.Image):
        raise InputError("a single image is not a video; pass a list of frames")
    raise InputError(
        f"unsupported video type {type(value).__name__}; use a file path, a list of frames, "
        "a NumPy array (T, H, W, C) or a tensor (T, C, H, W)"
    )


def _check_sizes(sizes: Iterable[tuple[int, ...]]) -> None:
    sizes = list(sizes)
    if any(s != sizes[0] for s in sizes):
        distinct = sorted(set(sizes))
        raise InputError(
            f"video frames differ in size: {', '.join('x'.join(map(str, s)) for s in distinct[:4])}"
            " (H x W); every frame must have the same size"
        )
