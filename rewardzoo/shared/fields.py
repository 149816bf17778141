"""Turn a sample's raw field values into what a reward declared it wants.

One function per field kind; video and audio converters live in ``shared/video.py`` and
``shared/audio.py`` and are imported only when a reward asks for those fields. A converter gets the
raw value, the sample (for context such as ``audio_sample_rate``) and the reward (for what it wants:
``use_tensor_inputs``, ``uint8_images``, and optionally ``num_frames``, ``sample_rate``, ``mono``).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Hashable

from ..errors import InputError


def _text(value: Any, sample, reward) -> str:
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}")
    return value


def _metadata(value: Any, sample, reward) -> str:
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


def _image(value: Any, sample, reward):
    from .media import to_image_tensor, to_pil_rgb, to_uint8_tensor

    if not reward.use_tensor_inputs:
        return to_pil_rgb(value)
    return to_uint8_tensor(value) if getattr(reward, "uint8_images", False) else to_image_tensor(value)


def _video(value: Any, sample, reward):
    from .video import prepare_video

    return prepare_video(value, as_tensor=reward.use_tensor_inputs, num_frames=getattr(reward, "num_frames", None))


def _audio(value: Any, sample, reward):
    from .audio import prepare_audio

    return prepare_audio(value, sample_rate=sample.audio_sample_rate, target_rate=getattr(reward, "sample_rate", None),
                         mono=getattr(reward, "mono", True), as_tensor=reward.use_tensor_inputs)


def _nested(convert: Callable) -> Callable:
    def inner(value: Any, sample, reward) -> list:
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if not items:
            raise InputError("empty list of condition media")
        return [convert(item, sample, reward) for item in items]

    return inner


def _passthrough(value: Any, sample, reward) -> Any:
    return value


CONVERTERS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "prompt": _text,
    "completion": _text,
    "metadata": _metadata,
    "image": _image,
    "video": _video,
    "audio": _audio,  # returns (array, sample_rate); the processor splits it into audio + audio_sample_rate
    "condition_images": _nested(_image),
    "condition_videos": _nested(_video),
    "dataset": _passthrough,
    "group_id": _passthrough,
}


def conversion_key(field: str, reward) -> Hashable:
    """Two rewards with equal keys receive identical converted values, so conversions can be shared."""
    if field in ("prompt", "completion", "metadata", "dataset", "group_id"):
        return field
    return (field, reward.use_tensor_inputs, getattr(reward, "uint8_images", False), getattr(reward, "num_frames", None),
            getattr(reward, "sample_rate", None), getattr(reward, "mono", True))


def convert_field(field: str, value: Any, sample, reward) -> Any:
    """Convert one raw value; InputError (without location) when it is unusable."""
    try:
        converter = CONVERTERS[field]
    except KeyError:
        raise InputError(f"reward declares unknown field '{field}'") from None
    return converter(value, sample, reward)
