"""speech_presence with the real Silero VAD weights against silero-vad's own get_speech_timestamps."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import torch

from rewardzoo import RewardProcessor, load_config
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.registry import example_config
from rewardzoo.rewards.audio.vad import SpeechPresence, presence
from rewardzoo.shared.audio import prepare_audio
from rewardzoo.spec.sample import Sample

from ..commands import require_command
from .signals import noise, tone

silero_vad = pytest.importorskip("silero_vad")
get_speech_timestamps, load_silero_vad = silero_vad.get_speech_timestamps, silero_vad.load_silero_vad

RATE = 16000
TEXT = "The quick brown fox jumps over the lazy dog. Rewards for speech generation, tested with real weights."


@pytest.fixture(scope="module")
def reward():
    return SpeechPresence()


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> np.ndarray:
    """espeak-ng speech (Debian package espeak-ng), read back and resampled to 16 kHz."""
    require_command("espeak-ng", "espeak-ng")
    path = tmp_path_factory.mktemp("tts") / "speech.wav"
    subprocess.run(["espeak-ng", "-w", str(path), TEXT], check=True, capture_output=True)
    return prepare_audio(str(path), target_rate=RATE)[0][0]


def _reference(clip: np.ndarray) -> tuple[float, float]:
    model = load_silero_vad()
    segments = get_speech_timestamps(torch.from_numpy(np.array(clip)), model, sampling_rate=RATE)
    return presence(segments, clip.shape[0], RATE)


def test_presence_formula():
    assert presence([], 16000, RATE) == (0.0, 1.0)
    frac, gap = presence([{"start": 1600, "end": 8000}, {"start": 12000, "end": 14400}], 16000, RATE)
    assert frac == pytest.approx((6400 + 2400) / 16000) and gap == pytest.approx(4000 / RATE)


def test_speech_scores_clearly_above_silence_and_noise(reward, speech):
    clips = [
        speech,
        np.zeros(3 * RATE, np.float32),
        noise(RATE, 3.0, amp=0.3).astype(np.float32),
        tone(RATE, 3.0).astype(np.float32),
    ]
    out = reward(audio=clips, audio_sample_rate=[RATE] * 4)
    assert out.rewards[0] > 0.5 and out.rewards[1] == 0.0 and out.rewards[2] < 0.1 and out.rewards[3] < 0.1
    assert out.extras["longest_silence"][1] == pytest.approx(3.0)
    assert out.extras["longest_silence"][0] < 1.0


def test_batched_call_equals_silero_vad_per_clip(reward, speech):
    pause = np.zeros(RATE, np.float32)
    clips = [
        speech,
        np.concatenate([speech[: RATE * 2], pause, speech[RATE * 2 :]]),
        speech[: RATE // 2],
        np.concatenate([pause, speech[: RATE * 3]]),
        0.2 * speech[RATE:],
    ]
    out = reward(audio=clips, audio_sample_rate=[RATE] * len(clips))
    for i, clip in enumerate(clips):
        frac, gap = _reference(clip)
        assert out.rewards[i] == pytest.approx(frac, abs=1e-12)
        assert out.extras["longest_silence"][i] == pytest.approx(gap, abs=1e-12)
    assert out.extras["longest_silence"][1] >= 0.8  # the inserted 1 s pause, less the segments' padding


def test_through_the_processor_with_resampling(speech):
    clip44 = prepare_audio(speech, RATE, target_rate=44100)[0][0]
    proc = RewardProcessor(load_config(example_config("speech_presence")).rewards)
    res = proc(
        [
            Sample(audio=clip44, audio_sample_rate=44100),
            Sample(audio=np.zeros(RATE, np.float32), audio_sample_rate=RATE),
        ]
    )
    assert res.rewards["speech_presence"][0] > 0.5 and res.rewards["speech_presence"][1] == 0.0
    assert set(res.extras["speech_presence"]) == {"longest_silence"}


def test_bad_input(reward):
    ok = tone(RATE, 1.0).astype(np.float32)
    nan = ok.copy()
    nan[3] = np.nan
    for clips, rates in (([ok, ok[:300]], [RATE] * 2), ([ok, nan], [RATE] * 2), ([ok, ok], [RATE, 0])):
        with pytest.raises(InputError) as exc:
            reward(audio=clips, audio_sample_rate=rates)
        assert (exc.value.field, exc.value.sample) == ("audio", 1)
    with pytest.raises(ConfigError):
        SpeechPresence(threshold=1.5)
    with pytest.raises(ConfigError):
        SpeechPresence(model_path="somewhere")
