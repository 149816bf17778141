"""The demo's generated media as files and a manifest, for trying ``rewardzoo report`` (and its screenshot)."""

from __future__ import annotations

import dataclasses
import json
import os
import wave
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image


def write_demo_manifest(folder: str | os.PathLike) -> Path:
    """Write :func:`rewardzoo.jobs.demo.demo_samples` as PNG / MP4 / WAV files plus ``manifest.jsonl`` in ``folder``.

    Every field of each sample is kept: arrays become files (an image field a PNG, a video field an MP4,
    an audio field a WAV at its ``*_sample_rate``, whose rate the file then carries), the rest is written
    as it is. Videos need PyAV (the ``video`` extra); without it, samples with a video are left out.
    Returns the manifest's path.
    """
    from ..jobs.demo import demo_samples

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[int, str] = {}  # one file per array, however many samples share it
    lines = []
    for k, (label, sample) in enumerate(demo_samples()):
        values = {f.name: getattr(sample, f.name) for f in dataclasses.fields(sample)}
        entry: dict[str, Any] = {"prompt": label}
        try:
            for name, value in values.items():
                media = name.removesuffix("_sample_rate")
                if value is None or (media != name and values.get(media) is not None):
                    continue  # the rate of an array written to a file: the file carries it
                if isinstance(value, list) and value and all(isinstance(v, np.ndarray) for v in value):
                    entry[name] = [
                        _write(folder, f"{name}_{k}_{j}", name, v, values, written) for j, v in enumerate(value)
                    ]
                elif isinstance(value, np.ndarray):
                    entry[name] = _write(folder, f"{name}_{k}", name, value, values, written)
                else:
                    entry[name] = value
        except ImportError:  # no PyAV: no video files
            continue
        lines.append(json.dumps(entry))
    path = folder / "manifest.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write(folder: Path, stem: str, field: str, array: np.ndarray, values: dict, written: dict[int, str]) -> str:
    if id(array) in written:
        return written[id(array)]
    if "image" in field:
        name = f"{stem}.png"
        data = np.round(array * 255) if array.dtype.kind == "f" else array
        Image.fromarray(np.asarray(data).astype(np.uint8)).save(folder / name)
    elif "video" in field:
        from ..shared.video import write_video

        name = f"{stem}.mp4"
        write_video(folder / name, array, fps=8)
    elif "audio" in field:
        name = f"{stem}.wav"
        _write_wav(folder / name, array, int(values[f"{field}_sample_rate"]))
    else:
        raise ValueError(f"do not know how to write the array field '{field}' to a file")
    written[id(array)] = name
    return name


def _write_wav(path: Path, audio: np.ndarray, rate: int) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
