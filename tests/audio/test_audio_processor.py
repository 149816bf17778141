"""The audio rewards through RewardProcessor with their cards' example configs, on the demo's kind of media."""

from __future__ import annotations

import numpy as np
import pyloudnorm
import pytest

from rewardzoo import RewardProcessor, load_config
from rewardzoo.errors import InputError
from rewardzoo.registry import example_config
from rewardzoo.spec.sample import Sample

from .signals import clipped_tone, noise, tone

RATE = 16000


@pytest.fixture(scope="module")
def processor():
    specs = [
        spec for name in ("dnsmos", "loudness", "audio_clipping") for spec in load_config(example_config(name)).rewards
    ]
    return RewardProcessor(specs)


def test_demo_media_scored_like_the_references(processor, speechmos_run):
    # 2.3 s tiles to one 9.2 s DNSMOS window (3 s, as in the demo, tiles to 12 s: 3 windows)
    clips = [tone(RATE, 2.3, amp=0.3), noise(RATE, 2.3, amp=0.1), clipped_tone(RATE, 2.3, gain=1.6)]
    samples = [Sample(audio=x.astype(np.float32), audio_sample_rate=RATE, dataset="audio") for x in clips]
    result = processor(samples)
    assert [set(a) for a in result.applied] == [{"dnsmos", "loudness", "audio_clipping"}] * 3
    for i, x in enumerate(clips):
        x32 = x.astype(np.float32)
        assert abs(result.rewards["dnsmos"][i] - speechmos_run(x32)["ovrl"]) < 1e-3
        lufs = pyloudnorm.Meter(RATE).integrated_loudness(x32.astype(np.float64))
        assert abs(result.rewards["loudness"][i] - (-abs(lufs + 23.0))) < 0.01
        assert result.rewards["audio_clipping"][i] == pytest.approx(1 - np.mean(np.abs(x32) >= 32767 / 32768), abs=1e-6)
    assert result.rewards["audio_clipping"][2] < 1.0 == result.rewards["audio_clipping"][0]
    assert np.isfinite(result.total).all()
    assert set(result.extras["dnsmos"]) == {"ovrl", "sig", "bak", "p808"}


def test_errors_name_reward_field_and_sample(processor, tmp_path):
    good = Sample(audio=tone(RATE, 1.0).astype(np.float32), audio_sample_rate=RATE)
    (tmp_path / "bad.wav").write_bytes(b"RIFF0000WAVEjunk")
    cases = [
        (Sample(audio=np.zeros(100, np.float32)), "needs audio_sample_rate"),
        (Sample(audio=np.zeros(0, np.float32), audio_sample_rate=RATE), "empty"),
        (Sample(audio=np.array([0.0, np.nan], np.float32), audio_sample_rate=RATE), "NaN"),
        (Sample(audio=str(tmp_path / "bad.wav")), "cannot read audio file"),
    ]
    for bad, match in cases:
        with pytest.raises(InputError, match=match) as info:
            processor([good, bad])
        err = info.value
        assert err.sample == 1 and err.field == "audio" and err.reward == "dnsmos", str(err)


def test_too_short_for_loudness_is_an_input_error():
    short = Sample(audio=tone(RATE, 0.2).astype(np.float32), audio_sample_rate=RATE)
    only_loudness = RewardProcessor(load_config(example_config("loudness")).rewards)
    with pytest.raises(InputError, match="shorter than one 400 ms") as info:
        only_loudness([short])
    assert info.value.reward == "loudness" and info.value.sample == 0
