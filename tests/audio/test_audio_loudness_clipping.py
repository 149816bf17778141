"""Loudness (BS.1770-4) against pyloudnorm; clipping against a direct count."""

from __future__ import annotations

import math

import numpy as np
import pyloudnorm
import pytest
import soundfile as sf
import torch

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.audio.clipping import AudioClipping
from rewardzoo.rewards.audio.loudness import GATED_LUFS, Loudness

from .signals import clipped_tone, noise, speech_like, tone

RATES = (8000, 16000, 44100, 48000)


def _varied(rate: int, kind: str) -> np.ndarray:
    """(channels, time) float64 test signals with different spectra, levels, lengths and channel counts."""
    if kind == "speech_mono":
        return speech_like(rate, 3.3, seed=1)[None]
    if kind == "stereo_tone_noise":
        return np.stack([tone(rate, 2.05, freq=997, amp=0.5), noise(rate, 2.05, amp=0.05, seed=3)])
    if kind == "bass_5ch":  # 5 channels: surrounds weighted 1.41
        t = np.arange(int(1.7 * rate)) / rate
        return np.stack([0.4 * np.sin(2 * np.pi * f * t) for f in (40, 60, 1000, 3000, 6000 if rate > 12000 else 3500)])
    if kind == "fade_in_gating":  # a long quiet part: the relative gate removes blocks
        x = noise(rate, 4.0, amp=0.2, seed=7)
        return (x * np.linspace(0, 1, x.size) ** 4)[None]
    if kind == "short_block":  # just over one 400 ms block
        return noise(rate, 0.43, amp=0.3, seed=8)[None]
    raise ValueError(kind)


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("kind", ["speech_mono", "stereo_tone_noise", "bass_5ch", "fade_in_gating", "short_block"])
def test_loudness_equals_pyloudnorm(rate, kind):
    x = _varied(rate, kind)
    expected = pyloudnorm.Meter(rate).integrated_loudness(x.T.copy())
    for target in (-23.0, -14.0):
        out = Loudness(target=target)(audio=[x.astype(np.float32)], audio_sample_rate=[rate])
        ref32 = pyloudnorm.Meter(rate).integrated_loudness(x.astype(np.float32).astype(np.float64).T.copy())
        assert abs(out.extras["lufs"][0] - ref32) < 0.01
        assert abs(out.rewards[0] - (-abs(ref32 - target))) < 0.01
    assert abs(ref32 - expected) < 0.01


def test_loudness_input_forms_agree(tmp_path):
    rate = 44100
    x = np.clip(np.round(speech_like(rate, 1.5, seed=2) * 32768), -32768, 32767).astype(np.int16)
    stereo = np.stack([x, (x // 2).astype(np.int16)])
    sf.write(tmp_path / "s.wav", stereo.T, rate, subtype="PCM_16")
    sf.write(tmp_path / "s.flac", stereo.T, rate, subtype="PCM_16")
    forms = [
        stereo,
        stereo.T,
        torch.from_numpy(stereo.copy()),
        stereo / 32768.0,
        tmp_path / "s.wav",
        str(tmp_path / "s.flac"),
    ]
    out = Loudness()(audio=forms, audio_sample_rate=[rate] * 4 + [None, None])
    ref = pyloudnorm.Meter(rate).integrated_loudness((stereo / 32768.0).T.copy())
    np.testing.assert_allclose(out.extras["lufs"], ref, atol=0.01)


def test_fully_gated_clip_gets_a_finite_documented_score():
    rate = 16000
    quiet = [np.zeros(rate), 1e-5 * noise(rate, 1.0)]
    for x in quiet:
        assert pyloudnorm.Meter(rate).integrated_loudness(x) == -math.inf  # the reference gives -inf
    out = Loudness(target=-14.0)(audio=quiet, audio_sample_rate=[rate, rate])
    np.testing.assert_array_equal(out.extras["lufs"], [GATED_LUFS, GATED_LUFS])
    np.testing.assert_array_equal(out.rewards, [-abs(GATED_LUFS + 14.0)] * 2)


def test_loudness_bad_input():
    with pytest.raises(InputError, match="shorter than one 400 ms") as info:
        Loudness()(audio=[noise(16000, 1.0), noise(16000, 0.3)], audio_sample_rate=[16000, 16000])
    assert info.value.sample == 1 and info.value.field == "audio"
    with pytest.raises(InputError, match="at most 5 channels"):
        Loudness()(audio=[np.zeros((6, 16000))], audio_sample_rate=[16000])
    with pytest.raises(InputError, match="NaN"):
        Loudness()(audio=[np.full(16000, np.nan)], audio_sample_rate=[16000])
    with pytest.raises(ConfigError):
        Loudness(target=float("nan"))


@pytest.mark.parametrize("rate", RATES)
def test_clipping_counts_samples_at_full_scale(rate):
    mono = clipped_tone(rate, 0.5, gain=1.6)
    stereo = np.stack([tone(rate, 0.5, amp=0.9), tone(rate, 0.5, amp=1.3)])  # only the 2nd channel clips (beyond 1)
    clean = noise(rate, 0.5, amp=0.1)
    clips = [mono, stereo, clean]
    out = AudioClipping()(audio=clips, audio_sample_rate=[rate] * 3)
    for i, x in enumerate(clips):
        x32 = np.asarray(x, dtype=np.float32)
        expected = 1.0 - np.mean(np.abs(x32) >= np.float32(32767 / 32768))
        assert out.rewards[i] == pytest.approx(expected, abs=1e-12)
        assert out.extras["clipped_fraction"][i] == pytest.approx(1 - expected, abs=1e-12)
    assert 0.0 < out.rewards[0] < 1.0 and 0.0 < out.rewards[1] < 1.0 and out.rewards[2] == 1.0


def test_clipping_int16_rails_and_threshold():
    x = np.array([32767, -32768, 0, 16384, -16384, 32766], dtype=np.int16)
    out = AudioClipping()(audio=[x], audio_sample_rate=[8000])
    assert out.rewards[0] == pytest.approx(1 - 2 / 6)  # both rails count as full scale
    half = AudioClipping(threshold=0.5)(audio=[x], audio_sample_rate=[8000])
    assert half.rewards[0] == pytest.approx(1 - 5 / 6)
    with pytest.raises(ConfigError):
        AudioClipping(threshold=0)
