"""The sample type the processor scores: the fields of one manifest line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import InputError, did_you_mean


@dataclass
class Sample:
    """One generated sample and its context.

    Media fields accept a file path, PIL images, NumPy arrays or tensors (see ``rewardzoo.shared``):
    ``image``; ``video`` (path, list of frames, (T, H, W, C) array or (T, C, H, W) tensor; ``video_fps``: an array's
    frame rate, for rewards that sample by time: a file's rate is read from the file); ``audio``
    (path, or array/tensor with ``audio_sample_rate``); ``condition_images`` / ``condition_videos``
    (lists); ``condition_audio``: one reference clip (path, or array/tensor with
    ``condition_audio_sample_rate``, its own rate: a file's rate is read from the file) for
    reference-based audio rewards (speaker similarity, SI-SDR, PESQ, STOI). ``latent``: the generator's latent
    (tensor or array, (C, H, W) for an image, (T, C, H, W) or (C, T, H, W) for a video, floating point) exactly as
    the trainer holds it (scaled and shifted as its VAE expects), for latent rewards and a config's decode stage. ``metadata`` is a mapping or a JSON string; rewards receive it as a JSON string.
    ``group_id`` is an int or str (never a float); ``dataset`` routes the sample to rewards.
    """

    prompt: str | None = None
    completion: str | None = None
    image: Any = None
    video: Any = None
    video_fps: float | None = None
    audio: Any = None
    audio_sample_rate: int | None = None
    condition_images: list[Any] | None = None
    condition_videos: list[Any] | None = None
    condition_audio: Any = None
    condition_audio_sample_rate: int | None = None
    latent: Any = None
    dataset: str | None = None
    group_id: int | str | None = None
    metadata: Any = None

    def __post_init__(self) -> None:
        gid = self.group_id
        if gid is not None and (isinstance(gid, bool) or not isinstance(gid, (int, str))):
            raise InputError(f"group_id must be an int or a str, got {type(gid).__name__} {gid!r}", field="group_id")
        fps = self.video_fps
        if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 0 < fps < 1e4):
            raise InputError(f"video_fps must be a positive number of frames a second, got {fps!r}", field="video_fps")
        if self.dataset is not None and not isinstance(self.dataset, str):
            raise InputError(f"dataset must be a str, got {type(self.dataset).__name__}", field="dataset")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sample:
        """Build a sample from a mapping with the same keys as a manifest line (unknown keys are errors)."""
        names = field_names()
        for key in data:
            if key not in names:
                raise InputError(f"unknown field{did_you_mean(key, names)}; known: {', '.join(names)}", field=key)
        return cls(**data)


def samples_of(rows: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """One :class:`Sample` per mapping of fields (a request's, a trainer's batch); an InputError names the field
    and the index of the row it came from."""
    samples = []
    for i, row in enumerate(rows):
        try:
            samples.append(Sample(**row))
        except InputError as exc:
            raise exc.located(sample=i) from None
    return samples


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Sample))
