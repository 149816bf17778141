"""Within-group diversity of the generated media, per modality: the other half of RewardMonitor's collapse alarm.

A prompt-blind pair reward (ImageBind's ``audio_video``: its card's ``prompt_blind_when``) can rise while audio and
video collapse together (black or silent, or saturated noise). The monitor sees that as the reward's trend rising
while the samples' within-group diversity falls. Diversity here is model-free and cheap, computed from the media of
the samples the trainer passes to :meth:`~rewardzoo.monitor.RewardMonitor.update`:

- a video's descriptor: :data:`VIDEO_FRAMES` frames sampled uniformly, each as luma in [0, 1] averaged over a
  :data:`GRID` x :data:`GRID` grid of blocks (a flat or noise-saturated frame has a flat grid);
- an audio's descriptor: the log energy (``log10(1e-8 + e)``) in :data:`AUDIO_BANDS` equal bands of the magnitude
  spectrum of the mono signal at :data:`AUDIO_RATE`, normalised by its number of samples;
- a group's diversity: the mean Euclidean distance between its members' descriptors over all pairs, divided by the
  square root of the descriptor's length (so 0 for identical members); groups of one are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from ..errors import InputError

MODALITIES = ("video", "audio")
VIDEO_FRAMES = 4
GRID = 16
AUDIO_BANDS = 32
AUDIO_RATE = 16_000


def video_descriptor(value: Any) -> np.ndarray:
    """Block-mean luma of :data:`VIDEO_FRAMES` uniformly sampled frames, flattened (see the module docstring)."""
    from ..shared.video import prepare_video

    frames = prepare_video(value, as_array=True, num_frames=VIDEO_FRAMES).astype(np.float64) / 255.0
    luma = frames @ np.array([0.299, 0.587, 0.114])  # (T, H, W)
    _, h, w = luma.shape
    rows = np.array_split(np.arange(h), min(GRID, h))
    cols = np.array_split(np.arange(w), min(GRID, w))
    return np.array([[[f[np.ix_(r, c)].mean() for c in cols] for r in rows] for f in luma]).reshape(-1)


def audio_descriptor(value: Any, sample_rate: Any = None) -> np.ndarray:
    """Log band energies of the mono signal at :data:`AUDIO_RATE` (see the module docstring)."""
    from ..shared.audio import prepare_audio

    audio, _ = prepare_audio(value, sample_rate, target_rate=AUDIO_RATE, mono=True)
    signal = np.asarray(audio, dtype=np.float64).reshape(-1)
    power = np.abs(np.fft.rfft(signal)) ** 2 / max(len(signal), 1)
    bands = np.array_split(power, AUDIO_BANDS)
    return np.log10(1e-8 + np.array([b.sum() for b in bands]))


def _field(sample: Any, name: str) -> Any:
    return sample.get(name) if isinstance(sample, Mapping) else getattr(sample, name, None)


def group_diversities(samples: Sequence[Any], codes: np.ndarray, modality: str) -> np.ndarray:
    """Per group with at least two members carrying ``modality``, its diversity (module docstring); empty when
    no group has two. ``codes``: the samples' group numbers (-1: no group). A medium that cannot be read is an
    InputError naming the field and the sample."""
    members: dict[int, list[np.ndarray]] = {}
    for i, (sample, code) in enumerate(zip(samples, codes.tolist())):
        value = _field(sample, modality)
        if code < 0 or value is None:
            continue
        try:
            if modality == "video":
                desc = video_descriptor(value)
            else:
                desc = audio_descriptor(value, _field(sample, "audio_sample_rate"))
        except InputError as exc:
            raise InputError(f"monitor diversity: {exc.message}", field=modality, sample=i) from None
        members.setdefault(code, []).append(desc)
    out = []
    for descs in members.values():
        if len(descs) < 2 or len({d.shape for d in descs}) != 1:
            continue
        scale = np.sqrt(descs[0].size)
        out.append(np.mean([np.linalg.norm(a - b) / scale for a, b in combinations(descs, 2)]))
    return np.asarray(out, dtype=np.float64)
