"""Audio conversion: file paths, NumPy arrays and tensors -> float32 (channels, time) at a wanted rate.

Rules (the same for every audio reward):

- **Files** (``str`` / ``os.PathLike``) are read with soundfile (wav, flac, ogg/vorbis, and whatever
  the installed libsndfile reads); the file's own sample rate is used. ``torchaudio.load`` is never
  used (it needs torchcodec and a system FFmpeg).
- **Arrays** (NumPy or torch) need ``audio_sample_rate``. Shapes: ``(time,)`` (mono) or
  ``(channels, time)``. A 2-D array whose first axis is longer than :data:`MAX_CHANNELS` while its
  second is not is read as ``(time, channels)`` — soundfile's layout — and transposed; when both axes
  exceed :data:`MAX_CHANNELS` the array is refused as ambiguous. Anything else is ``(channels, time)``.
- **Sample types**: float arrays are taken as they are (full scale is +-1.0; values beyond it are kept
  so that clipping can be measured); int16 and int32 are divided by 2**15 and 2**31, uint8 (8-bit PCM)
  becomes ``(x - 128) / 128``. Other integer types and booleans are refused.
- **Mono mixdown** (``mono=True``): the mean over channels, shape ``(1, time)``.
- **Resampling** to ``target_rate`` with ``torchaudio.functional.resample`` (its default windowed-sinc
  filter), after the mixdown.
- Empty audio, NaN/Inf samples, an unreadable file, a missing or invalid sample rate, and a file whose
  rate contradicts a given ``audio_sample_rate`` raise :class:`~rewardzoo.errors.InputError` (without
  location; the processor adds reward, field and sample).
"""

from __future__ import annotations

import numbers
import os
from typing import Any

import numpy as np

from ..errors import InputError
from .files import regular_file
from .media import is_path, is_tensor

#: Most channels an array may have; decides the (time, channels) rule above (7.1 surround = 8).
MAX_CHANNELS = 8

_INT_SCALE = {np.dtype(np.int16): 2.0**15, np.dtype(np.int32): 2.0**31}
#: Frames read, mixed down or checked at a time: converting a clip never holds a full float64 or second float32 copy.
BLOCK = 1 << 16


def check_sample_rate(rate: Any, what: str = "audio_sample_rate") -> int:
    """A positive integer sample rate (integral floats such as 16000.0 are accepted)."""
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
        raise InputError(f"{what} must be a positive integer in Hz, got {type(rate).__name__} {rate!r}")
    if not float(rate).is_integer() or rate <= 0:
        raise InputError(f"{what} must be a positive integer in Hz, got {rate!r}")
    return int(float(rate))  # integral (checked above), so exact


def check_duration(samples: int, rate: int, max_seconds: float | None, where: str = "the audio") -> None:
    """InputError when ``samples`` at ``rate`` last longer than ``max_seconds`` (None: no limit)."""
    if max_seconds is not None and samples / rate > max_seconds:
        raise InputError(
            f"{where} lasts {samples / rate:.1f} s, more than this reward's limit of {max_seconds:g} s "
            "(raise it with `limits: {seconds: ...}` in the config entry)"
        )


def read_audio_file(
    path: str | os.PathLike, max_seconds: float | None = None, mono: bool = False
) -> tuple[np.ndarray, int]:
    """Read a file with soundfile: float32 ``(channels, time)`` in [-1, 1] and the file's sample rate.

    A file longer than ``max_seconds`` is refused from its header, before it is decoded. The file is read in
    blocks of :data:`BLOCK` frames into the ``(channels, time)`` result (no interleaved copy of the whole clip);
    with ``mono`` each block is mixed down as it is read (the float64 mean over channels, as :func:`mix_down`),
    so only the mono clip is ever held.
    """
    import soundfile as sf

    path = regular_file(path, "audio")
    try:
        with sf.SoundFile(os.fspath(path)) as f:
            check_duration(f.frames, f.samplerate, max_seconds, f"audio file '{path}'")
            channels, rate = f.channels, int(f.samplerate)
            out = np.empty((1 if mono else channels, max(f.frames, 0)), dtype=np.float32)
            done = 0
            for block in f.blocks(BLOCK, dtype="float32", always_2d=True):
                end = min(done + len(block), out.shape[1])
                block = block[: end - done]
                if mono:
                    out[0, done:end] = block.T.mean(axis=0, dtype=np.float64)
                else:
                    out[:, done:end] = block.T
                done = end
    except FileNotFoundError:
        raise InputError(f"audio file not found: '{path}'") from None
    except (sf.LibsndfileError, RuntimeError, OSError, TypeError, ValueError) as exc:
        if not os.path.exists(path):
            raise InputError(f"audio file not found: '{path}'") from None
        raise InputError(f"cannot read audio file '{path}': {exc}") from None
    return out[:, :done], rate


def to_float_channels(value: Any) -> np.ndarray:
    """An array or tensor -> float32 NumPy ``(channels, time)`` (see the module rules)."""
    if is_tensor(value):
        import torch

        value = value.detach().cpu()
        if value.dtype in (torch.float16, torch.bfloat16):
            value = value.float()
        value = value.numpy()
    elif not isinstance(value, np.ndarray):
        raise InputError(
            f"unsupported audio type {type(value).__name__}; use a file path, a NumPy array "
            "or a torch tensor (time,) or (channels, time)"
        )
    arr = value
    if arr.dtype.kind != "f" and arr.dtype not in _INT_SCALE and arr.dtype != np.uint8:
        raise InputError(f"unsupported audio sample type {arr.dtype}; use float, int16, int32 or uint8 samples")
    if arr.ndim == 1:
        arr = arr[None, :]
    elif arr.ndim == 2:
        rows, cols = arr.shape
        if rows > MAX_CHANNELS and cols > MAX_CHANNELS:
            raise InputError(
                f"audio array of shape {tuple(arr.shape)} is ambiguous: a 2-D array is (channels, time) "
                f"or (time, channels) with at most {MAX_CHANNELS} channels"
            )
        if rows > MAX_CHANNELS:
            arr = arr.T  # (time, channels), soundfile's layout
    else:
        raise InputError(
            f"audio arrays are (time,) or (channels, time); got shape {tuple(arr.shape)} "
            "(pass one clip per sample, not a batch)"
        )
    if arr.shape[1] == 0 or arr.shape[0] == 0:
        raise InputError("audio is empty (no samples)")
    arr = _as_float32(arr)
    check_finite(arr)
    return arr


def _as_float32(arr: np.ndarray) -> np.ndarray:
    """float32 C-contiguous ``(channels, time)``, one copy at most (none for such an input). Integers are scaled in
    float32: ``x / 2**15`` (or ``2**31``, ``(x - 128) / 128``) are powers of two, so the result is bit for bit
    that of float64 division rounded once to float32, without the float64 temporaries."""
    if arr.dtype == np.float32 and arr.flags.c_contiguous:
        return arr
    out = np.empty(arr.shape, dtype=np.float32)
    out[...] = arr  # one pass: converts and (for a transposed view) lays out
    if arr.dtype in _INT_SCALE:
        out *= np.float32(1.0 / _INT_SCALE[arr.dtype])
    elif arr.dtype == np.uint8:
        out -= np.float32(128.0)
        out *= np.float32(1.0 / 128.0)
    return out


def check_finite(audio: np.ndarray, where: str = "audio") -> None:
    """InputError when a float ``(channels, time)`` clip has a NaN or infinite sample (checked in blocks)."""
    for start in range(0, audio.shape[-1], BLOCK):
        if not np.isfinite(audio[..., start : start + BLOCK]).all():
            raise InputError(f"{where} contains NaN or infinite samples")


def mix_down(audio: np.ndarray) -> np.ndarray:
    """float32 ``(1, time)``: the mean over channels computed in float64 and rounded once (in blocks, so no
    float64 copy of the clip is held)."""
    out = np.empty((1, audio.shape[1]), dtype=np.float32)
    for start in range(0, audio.shape[1], BLOCK):
        out[0, start : start + BLOCK] = audio[:, start : start + BLOCK].mean(axis=0, dtype=np.float64)
    return out


def load_audio(
    value: Any, sample_rate: Any = None, max_seconds: float | None = None, mono: bool = False
) -> tuple[np.ndarray, int]:
    """Any supported audio value -> (float32 ``(channels, time)``, sample rate), before resampling; InputError
    when it lasts longer than ``max_seconds``. ``mono``: a file is mixed down as it is read (:func:`mix_down`
    semantics); arrays are returned as they are (the caller mixes them down)."""
    if is_path(value):
        audio, rate = read_audio_file(value, max_seconds, mono=mono)
        if sample_rate is not None and check_sample_rate(sample_rate) != rate:
            raise InputError(
                f"audio_sample_rate {sample_rate} contradicts the file's rate {rate} Hz ('{value}'); "
                "leave audio_sample_rate unset for files"
            )
        if audio.shape[1] == 0:
            raise InputError(f"audio file '{value}' is empty (no samples)")
        check_finite(audio, f"audio file '{value}'")
        return audio, rate
    if sample_rate is None:
        raise InputError("audio given as an array needs audio_sample_rate (the sample rate in Hz)")
    rate = check_sample_rate(sample_rate)
    audio = to_float_channels(value)
    check_duration(audio.shape[1], rate, max_seconds)
    return audio, rate


def resample(audio: np.ndarray, rate: int, target_rate: int) -> np.ndarray:
    """Resample float32 ``(channels, time)`` with ``torchaudio.functional.resample`` (identity when equal).

    torchaudio's own steps (its windowed-sinc kernel, zero padding, a strided convolution, the output trimmed to
    ``ceil(time * target / rate)``), but the convolution runs over blocks of output positions (its unfolded input about 1 MiB),
    each on its own zero-padded slice: in one call its unfolded input is ~13x the clip (48 -> 16 kHz) and the
    padded copy 1x more, here a block's. The samples equal torchaudio's to float32 rounding (a mono clip's
    convolution may round a few ulps apart, at most ~5e-7, by block length)."""
    if rate == target_rate:
        return audio
    import math

    import torch
    import torch.nn.functional as F
    from torchaudio.functional import functional as taf

    gcd = math.gcd(rate, target_rate)
    orig, new = rate // gcd, target_rate // gcd
    with torch.inference_mode():
        source = torch.from_numpy(audio if audio.flags.writeable else audio.copy())  # a read-only view (an input)
        kernel, width = taf._get_sinc_resample_kernel(rate, target_rate, gcd, dtype=source.dtype)
        channels, length = source.shape
        size = kernel.shape[-1]  # input samples per output position; positions every `orig` samples
        positions = (length + 2 * width + orig - size) // orig + 1
        target = math.ceil(new * length / orig)
        out = torch.empty((channels, target), dtype=source.dtype)
        step = max(1, 4 * BLOCK // (size * channels))  # the convolution unfolds `size` samples per position: ~1 MiB
        for j0 in range(0, positions, step):
            j1 = min(j0 + step, positions)
            if j0 * new >= target:
                break
            # the block's slice of the zero-padded clip (`width` zeros before, `width + orig` after), built here
            p0, p1 = j0 * orig, (j1 - 1) * orig + size
            window = torch.zeros((channels, 1, p1 - p0), dtype=source.dtype)
            a, b = max(p0 - width, 0), min(p1 - width, length)
            if b > a:
                window[:, 0, a + width - p0 : b + width - p0] = source[:, a:b]
            block = F.conv1d(window, kernel, stride=orig).transpose(1, 2).reshape(channels, -1)
            end = min(j1 * new, target)
            out[:, j0 * new : end] = block[:, : end - j0 * new]
    if out.shape[-1] == 0:
        raise InputError(
            f"audio of {audio.shape[-1]} samples at {rate} Hz is empty after resampling to {target_rate} Hz"
        )
    return out.numpy()


def prepare_audio(
    value: Any,
    sample_rate: Any = None,
    target_rate: int | None = None,
    mono: bool = True,
    as_tensor: bool = False,
    max_seconds: float | None = None,
) -> tuple[Any, int]:
    """Convert one audio value for a reward: ``(audio, rate)``.

    ``audio`` is float32 ``(channels, time)`` — NumPy, or a CPU torch tensor when ``as_tensor`` — mixed
    down to one channel when ``mono``; ``rate`` is ``target_rate`` when given (after resampling), else
    the source rate. See the module docstring for the accepted inputs and the errors.
    """
    audio, rate = load_audio(value, sample_rate, max_seconds, mono=mono)
    if mono and audio.shape[0] > 1:
        audio = mix_down(audio)
    if target_rate is not None:
        target_rate = check_sample_rate(target_rate, "target sample rate")
        audio = resample(audio, rate, target_rate)
        rate = target_rate
    audio = np.ascontiguousarray(audio, dtype=np.float32)
    if as_tensor:
        import torch

        return torch.from_numpy(audio), rate
    return audio, rate


def prepare_clips(
    audio: Any, audio_sample_rate: Any = None, target_rate: int | None = None, mono: bool = True, field: str = "audio"
) -> tuple[list[np.ndarray], list[int]]:
    """A reward call's ``audio`` / ``audio_sample_rate`` lists -> float32 NumPy clips ``(channels, time)`` and rates.

    Inside the processor the clips are already converted and this is a cheap check (no resampling);
    a reward called directly gets the same conversion as through the processor. An unusable clip
    raises :class:`InputError` with ``field`` (``'audio'``, or ``'condition_audio'`` for reference
    clips, whose rates are ``condition_audio_sample_rate``) and the clip's index as ``sample``; a
    missing clip (None) is an InputError too.
    """
    if isinstance(audio, (str, os.PathLike, np.ndarray)) or is_tensor(audio):
        raise InputError(f"{field} must be a list with one clip per input", field=field)
    audio = list(audio)
    rates = [None] * len(audio) if audio_sample_rate is None else list(audio_sample_rate)
    if len(rates) != len(audio):
        raise InputError(f"got {len(audio)} {field} clips but {len(rates)} sample rates", field=f"{field}_sample_rate")
    clips, out_rates = [], []
    for i, (value, rate) in enumerate(zip(audio, rates)):
        if value is None:
            raise InputError(f"missing {field} (no clip given for this sample)", field=field, sample=i)
        try:
            clip, rate = prepare_audio(value, rate, target_rate=target_rate, mono=mono)
        except InputError as exc:
            raise exc.located(field=field, sample=i) from None
        clips.append(clip)
        out_rates.append(rate)
    return clips, out_rates
