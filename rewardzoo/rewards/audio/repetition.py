"""Repetition (loops) in generated speech, model-free: self-similarity of log-mel frames.

A TTS model that loops says a stretch of audio again; the later copy's frames then match the earlier
ones at a constant lag. Per clip (16 kHz mono): log-mel frames ``X`` (torchaudio ``MelSpectrogram``,
``n_fft`` 512, hop 320 = 20 ms, 64 mels, power 2, in dB with a 1e-10 floor); voiced frames are those whose
energy (dB of the summed mel power) is within ``floor_db`` (25) of the clip's loudest frame. The voiced frames'
mean is subtracted per mel bin and each frame scaled to unit norm, so ``S[t, u]`` is the cosine of frames
``t`` and ``u``. For each lag ``L >= min_lag`` (0.3 s), ``d_L(t) = S[t, t + L]`` (0 unless both frames are
voiced), averaged over ``window`` (0.4 s) consecutive frames; where that mean is at least ``threshold``
(0.8), the window's frames at ``t + L`` are repeats. ``repeated = |repeat frames & voiced| / |voiced|``;
``score = 1 - repeated``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from ...errors import ConfigError
from ...shared.audio import prepare_clips
from ...shared.options import positive_float
from ..base import Inputs, PointwiseReward, RewardOutput

SAMPLE_RATE = 16000
N_FFT, HOP, N_MELS = 512, 320, 64
FRAME_SECONDS = HOP / SAMPLE_RATE


def log_mel(clip: np.ndarray) -> np.ndarray:
    """(frames, 64) log-mel power in dB of a 16 kHz mono clip ``(time,)``."""
    from torchaudio.transforms import MelSpectrogram

    mel = MelSpectrogram(sample_rate=SAMPLE_RATE, n_fft=N_FFT, hop_length=HOP, n_mels=N_MELS, power=2.0)
    with torch.inference_mode():
        power = mel(torch.from_numpy(np.array(clip, dtype=np.float32))).T.double().numpy()
    return 10.0 * np.log10(power + 1e-10)


def voiced_frames(power_db: np.ndarray, floor_db: float) -> np.ndarray:
    """Frames whose energy (dB of the summed mel power) is within ``floor_db`` of the loudest frame."""
    energy = 10.0 * np.log10(np.sum(10.0 ** (power_db / 10.0), axis=1))
    return energy >= energy.max() - floor_db


def repeated_fraction(power_db: np.ndarray, voiced: np.ndarray, min_lag: int, window: int,
                      threshold: float) -> tuple[float, int]:
    """(share of voiced frames that repeat earlier ones, the lag in frames that found the most; 0 if none)."""
    n = power_db.shape[0]
    if not voiced.any() or n < min_lag + window:
        return 0.0, 0
    x = power_db - power_db[voiced].mean(axis=0)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    sim = x @ x.T
    repeat = np.zeros(n, dtype=bool)
    best, best_lag = 0, 0
    kernel = np.full(window, 1.0 / window)
    for lag in range(min_lag, n - window + 1):
        d = np.where(voiced[:n - lag] & voiced[lag:], np.diagonal(sim, lag), 0.0)
        hits = np.flatnonzero(np.convolve(d, kernel, mode="valid") >= threshold)
        if hits.size == 0:
            continue
        marks = np.zeros(n + 1)
        np.add.at(marks, hits + lag, 1)
        np.add.at(marks, hits + lag + window, -1)
        found = np.cumsum(marks)[:n] > 0
        if found.sum() > best:
            best, best_lag = int(found.sum()), lag
        repeat |= found
    return float((repeat & voiced).sum() / voiced.sum()), best_lag


class Repetition(PointwiseReward):
    """Score = ``1 - repeated``, the share of voiced log-mel frames that repeat earlier frames at a constant lag.

    Inputs: ``audio`` (mixed to mono, resampled to 16 kHz; up to 60 s, the frame similarity matrix grows with
    the square of the length). Options: ``min_lag`` (seconds, 0.3), ``window`` (seconds, 0.4), ``threshold``
    (cosine, 0.8), ``floor_db`` (25). Range [0, 1]. Extras: ``repeated`` and ``lag`` (seconds between the
    copies that repeat the most; 0 when none do).
    """

    inputs = Inputs(("audio",), sample_rate=SAMPLE_RATE, max_seconds=60.0)

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", *,
                 min_lag: float = 0.3, window: float = 0.4, threshold: float = 0.8, floor_db: float = 25.0) -> None:
        super().__init__(model_path, device, dtype)
        if model_path is not None:
            raise ConfigError(f"{self.name} is model-free; model_path must be null", field="model_path")
        self.min_lag = max(1, round(positive_float(min_lag, "kwargs.min_lag") / FRAME_SECONDS))
        self.window = max(1, round(positive_float(window, "kwargs.window") / FRAME_SECONDS))
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not -1.0 < threshold <= 1.0:
            raise ConfigError(f"{self.name} threshold must be a cosine in (-1, 1], got {threshold!r}",
                              field="kwargs.threshold")
        self.threshold = float(threshold)
        self.floor_db = positive_float(floor_db, "kwargs.floor_db")

    def __call__(self, audio: Sequence[Any], audio_sample_rate: Sequence[int] | None = None,
                 **_: Any) -> RewardOutput:
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=SAMPLE_RATE, mono=True)
        repeated, lags = [], []
        for clip in clips:
            power_db = log_mel(clip[0])
            share, lag = repeated_fraction(power_db, voiced_frames(power_db, self.floor_db), self.min_lag,
                                           self.window, self.threshold)
            repeated.append(share)
            lags.append(lag * FRAME_SECONDS)
        repeated_arr = np.asarray(repeated)
        return RewardOutput(1.0 - repeated_arr, extras={"repeated": repeated_arr, "lag": np.asarray(lags)})
