"""CLAP score with a tiny random-init ClapModel, against the model's own forward (logits / logit scale)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchaudio.functional as taf

from rewardzoo.errors import InputError
from rewardzoo.rewards.audio.clap import ClapScore, fit_length

from .signals import noise, speech_like, tone


@pytest.fixture(scope="module")
def clap(tiny_clap_dir):
    return ClapScore(model_path=tiny_clap_dir)


def _reference(model_dir: str, clips_48k: list[np.ndarray], prompts: list[str]) -> np.ndarray:
    """cos(audio, text) from ClapModel.forward: diag(logits_per_audio) / exp(logit_scale_a)."""
    from transformers import ClapModel, ClapProcessor

    model, processor = ClapModel.from_pretrained(model_dir).eval(), ClapProcessor.from_pretrained(model_dir)
    out = []
    for clip, prompt in zip(clips_48k, prompts):
        inputs = processor(text=[prompt], audio=[clip], sampling_rate=48000, return_tensors="pt", padding=True)
        with torch.no_grad():
            result = model(**inputs)
        out.append((result.logits_per_audio[0, 0] / model.logit_scale_a.exp()).item())
    return np.array(out)


def test_matches_model_forward(clap, tiny_clap_dir):
    short = tone(48000, 3.7, freq=660).astype(np.float32)  # repeat-padded (the extractor's repeatpad)
    exact = noise(48000, 10.0, amp=0.1, seed=1).astype(np.float32)
    long = speech_like(48000, 12.5, seed=2).astype(np.float32)  # cut to its first 10 s
    low_rate = speech_like(16000, 4.0, seed=3).astype(np.float32)  # resampled to 48 kHz
    stereo = np.stack([tone(48000, 5.0), noise(48000, 5.0, seed=4)]).astype(np.float32)
    prompts = ["a tone", "rain on a roof", "a person speaking", "a tone", "birds and a tone"]
    ours = clap(
        audio=[short, exact, long, low_rate, stereo],
        prompt=prompts,
        audio_sample_rate=[48000, 48000, 48000, 16000, 48000],
    )
    reference_clips = [
        short,
        exact,
        long[:480000],
        taf.resample(torch.from_numpy(low_rate), 16000, 48000).numpy(),
        stereo.mean(axis=0),
    ]
    np.testing.assert_allclose(ours, _reference(tiny_clap_dir, reference_clips, prompts), atol=1e-5)
    assert np.all(np.abs(ours) <= 1.0)
    assert len(set(np.round(ours, 6))) > 1  # the prompts and clips make a difference


def test_fit_length_repeat_pads_and_crops():
    x = np.arange(1, 4, dtype=np.float32)
    np.testing.assert_array_equal(fit_length(x, 8), [1, 2, 3, 1, 2, 3, 0, 0])  # whole repeats, then zeros
    np.testing.assert_array_equal(fit_length(x, 2), [1, 2])
    np.testing.assert_array_equal(fit_length(x, 3), x)


def test_deterministic_and_batch_independent(clap):
    long = speech_like(48000, 11.0, seed=5).astype(np.float32)
    a = clap(audio=[long], prompt=["speech"], audio_sample_rate=[48000])
    b = clap(audio=[tone(48000, 2.0), long], prompt=["x", "speech"], audio_sample_rate=[48000, 48000])
    np.testing.assert_allclose(a[0], b[1], atol=1e-6)


def test_bad_input(clap):
    with pytest.raises(InputError, match="prompts"):
        clap(audio=[tone(48000, 1.0)], prompt=["a", "b"], audio_sample_rate=[48000])
    with pytest.raises(InputError, match="NaN"):
        clap(audio=[np.full(100, np.nan, np.float32)], prompt=["a"], audio_sample_rate=[48000])
    assert clap.sample_rate == 48000 and clap.clip_samples == 480000
