"""Synthetic test signals (float64 NumPy; (time,) or (channels, time))."""

from __future__ import annotations

import numpy as np


def tone(rate: int, seconds: float, freq: float = 440.0, amp: float = 0.3, channels: int = 1) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    x = amp * np.sin(2 * np.pi * freq * t)
    return np.stack([x * (1.0 - 0.3 * c) for c in range(channels)]) if channels > 1 else x


def noise(rate: int, seconds: float, amp: float = 0.1, seed: int = 0, channels: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (channels, int(round(seconds * rate))) if channels > 1 else (int(round(seconds * rate)),)
    return amp * rng.standard_normal(shape)


def speech_like(rate: int, seconds: float, seed: int = 0, amp: float = 0.3) -> np.ndarray:
    """A voiced, formant-shaped harmonic signal with a gliding pitch and syllable-rate envelope."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(seconds * rate))) / rate
    f0 = 110 + 25 * np.sin(2 * np.pi * 0.4 * t + seed) + 10 * np.sin(2 * np.pi * 2.1 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    x = np.zeros_like(t)
    for k in range(1, 40):
        fk = k * f0
        weight = (
            np.exp(-(((fk - 650) / 300) ** 2))
            + 0.6 * np.exp(-(((fk - 1750) / 400) ** 2))
            + 0.3 * np.exp(-(((fk - 2600) / 500) ** 2))
        ) / k**0.5
        x += weight * np.sin(k * phase) * (fk < rate / 2)
    envelope = np.clip(np.sin(2 * np.pi * 2.7 * t + rng.uniform(0, 6)), 0, None) ** 0.6
    x = x * envelope + 0.004 * rng.standard_normal(t.size)
    return amp * x / np.abs(x).max()


def clipped_tone(rate: int, seconds: float, gain: float = 1.6) -> np.ndarray:
    return np.clip(tone(rate, seconds, amp=gain), -1.0, 1.0)
