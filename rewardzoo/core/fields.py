"""Turn a sample's raw field values into what a reward declared it wants.

One function per field kind; video and audio converters live in ``shared/video.py`` and
``shared/audio.py`` and are imported only when a reward asks for those fields. A converter gets the
raw value, the sample (for context such as ``audio_sample_rate``) and the reward's
:class:`~rewardzoo.rewards.base.Inputs` declaration (what it wants). This is the one place the
declaration's media forms are read (the engine reads only its ``fields``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from ..errors import InputError
from ..shared.media import is_tensor
from ..shared.sharedmem import shared_arrays
from .decoded import DecodedLatent, pixels_of

if TYPE_CHECKING:
    from ..rewards.base import Inputs
    from ..spec.sample import Sample


def _text(value: Any, sample: Sample, wants: Inputs) -> str:
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}")
    return value


def _metadata(value: Any, sample: Sample, wants: Inputs) -> str:
    if isinstance(value, str):
        try:
            json.loads(value)
        except json.JSONDecodeError as exc:
            raise InputError(f"metadata is not valid JSON: {exc}") from None
        return value
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InputError(f"metadata cannot be encoded as JSON: {exc}") from None


def _image(value: Any, sample: Sample, wants: Inputs) -> Any:
    from ..shared.media import (
        check_pixels,
        image_to_uint8,
        is_float_image_tensor,
        to_image_tensor,
        to_pil_rgb,
        to_uint8_tensor,
    )

    value = check_pixels(pixels_of(value), wants.max_pixels)  # a latent decoded by the decode stage: its pixels
    if wants.images == "pil":
        return to_pil_rgb(value)
    if wants.images == "array":
        with shared_arrays():  # decoded straight into memory a worker maps (no copy for it to be sent)
            return image_to_uint8(value)
    if wants.images == "native":
        return to_image_tensor(value) if is_float_image_tensor(value) else to_uint8_tensor(value)
    return to_uint8_tensor(value) if wants.images == "uint8" else to_image_tensor(value)


def _video(value: Any, sample: Sample, wants: Inputs) -> Any:
    from ..shared.video import prepare_video

    with shared_arrays() if wants.frames == "array" else contextlib.nullcontext():  # (as for images)
        return prepare_video(
            pixels_of(value),
            as_array=wants.frames == "array",
            as_tensor=wants.frames in ("float", "native"),
            keep_uint8=wants.frames == "native",
            num_frames=wants.num_frames,
            frame_step=wants.frame_step,
            max_frames=wants.max_frames,
            max_pixels=wants.max_pixels,
        )


def _video_with_rate(value: Any, sample: Sample, wants: Inputs) -> Any:
    """``video`` converted; with ``wants.frame_rate``, ``(frames, rate)``: a file's own rate, else the sample's
    ``video_fps`` (None when neither says)."""
    frames = _video(value, sample, wants)
    if not wants.frame_rate:
        return frames
    from ..shared.media import is_path
    from ..shared.video import video_rate

    return frames, video_rate(value) if is_path(value) else sample.video_fps


def _audio(value: Any, sample: Sample, wants: Inputs) -> tuple[Any, int]:
    from ..shared.audio import prepare_audio

    return prepare_audio(
        value,
        sample_rate=sample.audio_sample_rate,
        target_rate=wants.sample_rate,
        mono=wants.mono,
        as_tensor=wants.audio == "tensor",
        max_seconds=wants.max_seconds,
    )


def _condition_audio(value: Any, sample: Sample, wants: Inputs) -> tuple[Any, int]:
    """The reference clip, converted exactly like ``audio`` (same rate, mixdown, form and limit);
    an array's rate is ``condition_audio_sample_rate``."""
    from ..shared.audio import prepare_audio

    try:
        return prepare_audio(
            value,
            sample_rate=getattr(sample, "condition_audio_sample_rate", None),
            target_rate=wants.sample_rate,
            mono=wants.mono,
            as_tensor=wants.audio == "tensor",
            max_seconds=wants.max_seconds,
        )
    except InputError as exc:
        raise InputError(
            exc.message.replace("audio_sample_rate", "condition_audio_sample_rate").replace(
                "audio ", "condition audio ", 1
            )
        ) from None


def _latent(value: Any, sample: Sample, wants: Inputs) -> Any:
    """A floating-point tensor of 3 (C, H, W) or 4 dimensions, on the CPU as given (no copy of a tensor)."""
    import torch

    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if not is_tensor(value):
        raise InputError(f"latent must be a tensor or an array, got {type(value).__name__}")
    if not value.is_floating_point():
        raise InputError(f"latent must be floating point, got {value.dtype}")
    if value.dim() not in (3, 4):
        raise InputError(f"latent must have 3 (C, H, W) or 4 dimensions, got shape {tuple(value.shape)}")
    if not bool(torch.isfinite(value).all()):
        raise InputError("latent has NaN or infinite values")
    return value


def _nested(convert: Callable[[Any, Sample, Inputs], Any]) -> Callable[[Any, Sample, Inputs], list[Any]]:
    def inner(value: Any, sample: Sample, wants: Inputs) -> list[Any]:
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if not items:
            raise InputError("empty list of condition media")
        return [convert(item, sample, wants) for item in items]

    return inner


def _passthrough(value: Any, sample: Sample, wants: Inputs) -> Any:
    return value


CONVERTERS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "prompt": _text,
    "completion": _text,
    "metadata": _metadata,
    "image": _image,
    "video": _video_with_rate,  # (frames, rate) when the reward asks for the rate; the processor splits it
    "audio": _audio,  # returns (array, sample_rate); the processor splits it into audio + audio_sample_rate
    "condition_audio": _condition_audio,  # (array, rate), split like audio
    "condition_images": _nested(_image),
    "condition_videos": _nested(_video),
    "latent": _latent,
    "dataset": _passthrough,
    "group_id": _passthrough,
}


def convert_field(field: str, value: Any, sample: Sample, wants: Inputs) -> Any:
    """Convert one raw value as ``wants`` asks; InputError (without location) when it is unusable."""
    try:
        converter = CONVERTERS[field]
    except KeyError:
        raise InputError(f"reward declares unknown field '{field}'") from None
    return converter(value, sample, wants)


def protected(value: Any) -> Any:
    """What one reward call receives of a converted value: its own copy, or a read-only view.

    NumPy arrays become read-only views (no copy; writing raises); PIL images become read-only images
    sharing the pixels (Pillow's copy-on-write: ``paste``, ``ImageDraw`` and friends copy first, pixel
    access raises); tensors are copied; lists and tuples are protected item by item; text and numbers
    are immutable already. So a reward that modifies its input in place changes neither the caller's
    data nor another reward's input.
    """
    if isinstance(value, np.ndarray):
        view = value.view()
        view.flags.writeable = False
        return view
    if isinstance(value, (list, tuple)):
        return type(value)(protected(v) for v in value)
    if isinstance(value, Image.Image):
        value.load()
        try:
            view = value._new(value.im)  # a new Image over the same pixel core
        except AttributeError:  # a Pillow without it: a real copy
            return value.copy()
        view.readonly = 1
        return view
    if is_tensor(value):
        return value.clone()
    return value


_byte_bounds = getattr(np, "byte_bounds", None) or np.lib.array_utils.byte_bounds  # NumPy 1.x / 2.x


def owns_memory(value: Any, raw: Any) -> bool:
    """Whether ``value`` (a converted tensor, or a list / tuple holding tensors and plain values) is a tensor's
    memory of its own: it holds a tensor, and none of its tensors overlaps the memory of an array or tensor in
    ``raw`` (the sample's value). Such a value can be handed to its last reader without the copy of
    :func:`protected`: changing it changes nobody else's data."""
    tensors = [v for v in _items(value) if is_tensor(v)]
    if not tensors or any(isinstance(v, (np.ndarray, Image.Image)) for v in _items(value)):
        return False
    held = [_bounds(v) for v in _items(raw) if isinstance(v, np.ndarray) or is_tensor(v)]
    return all(lo >= hi2 or hi <= lo2 for lo, hi in map(_bounds, tensors) for lo2, hi2 in held)


def _items(value: Any) -> list[Any]:
    if isinstance(value, DecodedLatent):  # the decoded pixels are the sample's, shared by every reward of the call
        return [value.pixels()]
    if isinstance(value, (list, tuple)):
        return [item for v in value for item in _items(v)]
    return [value]


def _bounds(value: Any) -> tuple[int, int]:
    """The byte range of an array's or a tensor's whole buffer (its base's / storage's, not just the view)."""
    if isinstance(value, np.ndarray):
        while isinstance(value.base, np.ndarray):
            value = value.base
        lo, hi = _byte_bounds(value)
        return int(lo), int(hi)
    storage = value.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()
