"""The speech guards on espeak-ng speech with planted truncation, silence and loops: each separates the planted
sample from the clean one, and agrees with the quantity re-computed here (soundfile + NumPy for the duration,
silero-vad's own get_speech_timestamps for the silences, torchaudio + NumPy for the frame self-similarity)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import soundfile as sf
import torch

from rewardzoo import RewardProcessor, load_config
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.registry import example_config
from rewardzoo.rewards.audio.duration import SpeechDurationRatio
from rewardzoo.rewards.audio.repetition import Repetition
from rewardzoo.rewards.audio.silence import SilenceRatio
from rewardzoo.shared.audio import prepare_audio
from rewardzoo.spec.sample import Sample

from ..commands import require_command

silero_vad = pytest.importorskip("silero_vad")

RATE = 16000
TEXT = (
    "Please call Stella. Ask her to bring these things with her from the store: six spoons of fresh snow peas, "
    "five thick slabs of blue cheese, and maybe a snack for her brother Bob."
)


@pytest.fixture(scope="module")
def wav(tmp_path_factory):
    """espeak-ng's rendering of TEXT (Debian package espeak-ng), as written (22.05 kHz)."""
    require_command("espeak-ng", "espeak-ng")
    path = tmp_path_factory.mktemp("tts") / "speech.wav"
    subprocess.run(["espeak-ng", "-w", str(path), TEXT], check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def speech(wav) -> np.ndarray:
    return prepare_audio(str(wav), target_rate=RATE)[0][0]


def _pad(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


# ------------------------------------------------------------------------------------ speech_duration_ratio
def test_duration_ratio_separates_truncation_and_padding(wav, speech):
    data, file_rate = sf.read(str(wav))
    seconds = data.shape[0] / file_rate
    expected = len(TEXT.split()) / 2.5  # 150 words a minute
    truncated = speech[: speech.shape[0] // 3]
    drawn_out = np.concatenate([speech, _pad(seconds * 1.5)])
    reward = SpeechDurationRatio()
    out = reward(audio=[str(wav), truncated, drawn_out], audio_sample_rate=[None, RATE, RATE], prompt=[TEXT] * 3)
    ratios = np.array([seconds, truncated.shape[0] / RATE, drawn_out.shape[0] / RATE]) / expected
    np.testing.assert_allclose(out.extras["ratio"], ratios, rtol=1e-3)  # resampling rounds the lengths
    np.testing.assert_allclose(out.extras["expected_seconds"], expected)
    band = np.minimum(1.0, np.minimum(ratios / 0.7, 1.5 / ratios))
    np.testing.assert_allclose(out.rewards, band, rtol=1e-3)
    assert out.rewards[0] == 1.0 and out.rewards[1] < 0.6 and out.rewards[2] < 0.9


def test_duration_ratio_options_and_errors(speech):
    by_chars = SpeechDurationRatio(unit="character", rate=10.0, band=[0.5, 2.0], text_key="text")
    out = by_chars(audio=[speech], audio_sample_rate=[RATE], metadata=[{"text": "ab, c!"}])
    assert out.extras["expected_seconds"][0] == pytest.approx(0.3)
    assert out.rewards[0] == pytest.approx(2.0 / (speech.shape[0] / RATE / 0.3))
    assert by_chars.inputs.fields == ("audio", "metadata")
    with pytest.raises(InputError, match="no words") as exc:
        SpeechDurationRatio()(audio=[speech, speech], audio_sample_rate=[RATE] * 2, prompt=[TEXT, "  "])
    assert exc.value.samples == (1,) and exc.value.field == "prompt"
    for bad in ({"band": [1.5, 0.7]}, {"band": 3}, {"unit": "syllable"}, {"rate": 0}, {"text_key": ""}):
        with pytest.raises(ConfigError):
            SpeechDurationRatio(**bad)


# ------------------------------------------------------------------------------------------- silence_ratio
@pytest.fixture(scope="module")
def vad_model():
    return silero_vad.load_silero_vad()


def _silences_here(clip: np.ndarray, model) -> tuple[float, float, list[float]]:
    segments = silero_vad.get_speech_timestamps(torch.from_numpy(np.array(clip)), model, sampling_rate=RATE)
    if not segments:
        return clip.shape[0] / RATE, 0.0, []
    pauses = [(b["start"] - a["end"]) / RATE for a, b in zip(segments, segments[1:])]
    return segments[0]["start"] / RATE, (clip.shape[0] - segments[-1]["end"]) / RATE, pauses


def test_silence_ratio_separates_padding_and_pauses_as_the_vad_sees_them(speech, vad_model):
    cut = 3 * RATE
    clips = [
        speech,
        np.concatenate([_pad(2.0), speech, _pad(2.5)]),
        np.concatenate([speech[:cut], _pad(2.0), speech[cut:]]),
        _pad(2.0),
    ]
    out = SilenceRatio()(audio=clips, audio_sample_rate=[RATE] * len(clips))
    for i, clip in enumerate(clips):
        leading, trailing, pauses = _silences_here(clip, vad_model)
        seconds = clip.shape[0] / RATE
        excess = (
            max(0, leading - 0.3) + max(0, trailing - 0.3) + sum(max(0, p - 0.75) for p in pauses)
            if i != 3
            else seconds
        )
        assert out.extras["leading"][i] == pytest.approx(leading, abs=1e-12)
        assert out.extras["trailing"][i] == pytest.approx(trailing, abs=1e-12)
        assert out.extras["internal"][i] == pytest.approx(sum(pauses), abs=1e-12)
        assert out.rewards[i] == pytest.approx(1.0 - excess / seconds, abs=1e-12)
    assert out.rewards[0] == 1.0 and out.rewards[1] < 0.8 and out.rewards[2] < 0.95 and out.rewards[3] == 0.0
    assert out.extras["longest_pause"][2] > 1.5  # the planted pause, less the segments' padding


def test_silence_ratio_allowances_and_errors(speech):
    padded = np.concatenate([_pad(1.0), speech])
    strict, lenient = SilenceRatio(max_edge=0.0), SilenceRatio(max_edge=2.0)
    assert strict([padded], [RATE]).rewards[0] < 0.9 and lenient([padded], [RATE]).rewards[0] == 1.0
    with pytest.raises(ConfigError, match="max_pause"):
        SilenceRatio(max_pause=-1)
    with pytest.raises(InputError, match="512 samples") as exc:
        SilenceRatio()([speech, speech[:100]], [RATE, RATE])
    assert exc.value.samples == (1,)


# ----------------------------------------------------------------------------------------------- repetition
def _repeated_here(clip: np.ndarray, min_lag=15, window=20, threshold=0.8, floor_db=25.0) -> float:
    """The frame self-similarity re-computed: torchaudio's spectrogram and mel filters, NumPy windows."""
    import torchaudio.functional as AF

    spec = (
        torch.stft(
            torch.from_numpy(np.array(clip)),
            n_fft=512,
            hop_length=320,
            window=torch.hann_window(512),
            center=True,
            pad_mode="reflect",
            return_complex=True,
        ).abs()
        ** 2
    )
    fb = AF.melscale_fbanks(257, 0.0, RATE / 2, 64, RATE)
    power = (spec.T @ fb).double().numpy()
    db = 10 * np.log10(power + 1e-10)
    with np.errstate(divide="ignore"):  # all-zero frames of the planted silence: -inf, unvoiced
        energy_db = 10 * np.log10(power.sum(axis=1))
    voiced = energy_db >= energy_db.max() - floor_db
    x = db - db[voiced].mean(axis=0)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    n = x.shape[0]
    later = set()
    for lag in range(min_lag, n - window + 1):
        both = voiced[: n - lag] & voiced[lag:]
        d = np.sum(x[: n - lag] * x[lag:], axis=1) * both
        means = np.lib.stride_tricks.sliding_window_view(d, window).mean(axis=1)
        for t in np.flatnonzero(means >= threshold):
            later.update(range(t + lag, t + lag + window))
    return sum(voiced[f] for f in later) / voiced.sum()


def test_repetition_separates_a_planted_loop(speech):
    a, b = int(1.5 * RATE), int(2.5 * RATE)
    loop = np.concatenate([speech[:b], speech[a:b], speech[a:b], speech[b:]])  # one second said twice more
    rng = np.random.default_rng(0)
    floor = lambda x: x + 0.003 * rng.standard_normal(x.shape[0]).astype(np.float32)  # noqa: E731
    clips = [speech, loop, floor(speech), floor(loop)]
    out = Repetition()(audio=clips, audio_sample_rate=[RATE] * 4)
    for i, clip in enumerate(clips):
        assert out.extras["repeated"][i] == pytest.approx(_repeated_here(clip), abs=1e-9)
    np.testing.assert_allclose(out.rewards, 1.0 - out.extras["repeated"])
    assert out.rewards[0] == 1.0 and out.rewards[2] == 1.0
    # the planted copies are ~2 s of voiced speech in ~10 s: at least half of them found, as repeats at 1 s
    assert out.rewards[1] < 0.9 and out.rewards[3] < 0.9
    assert out.extras["lag"][1] == pytest.approx(1.0, abs=0.05)


def test_repetition_options_and_short_clips(speech):
    assert Repetition()([speech[: RATE // 2]], [RATE]).rewards[0] == 1.0  # shorter than min_lag + window
    for bad in ({"threshold": 1.5}, {"window": 0}, {"min_lag": "x"}, {"model_path": "/x"}):
        with pytest.raises(ConfigError):
            Repetition(**bad)


def test_guards_through_the_processor_from_their_cards(speech):
    specs = [
        spec
        for name in ("speech_duration_ratio", "silence_ratio", "repetition")
        for spec in load_config(example_config(name)).rewards
    ]
    padded = np.concatenate([_pad(12.0), speech])  # espeak-ng speaks ~3.3 words/s: 2.5 words/s needs 13 s
    res = RewardProcessor(specs)(
        [
            Sample(audio=speech, audio_sample_rate=RATE, prompt=TEXT),
            Sample(audio=padded, audio_sample_rate=RATE, prompt=TEXT),
        ]
    )
    for name in ("speech_duration_ratio", "silence_ratio"):
        assert res.rewards[name][0] == 1.0 and res.rewards[name][1] < 1.0
    assert res.rewards["repetition"][0] == 1.0


# ------------------------------------------------------------------------------ repetition over a transcript
def test_repeated_ngrams_counts_what_the_text_does_not_repeat():
    from rewardzoo.rewards.audio.repetition import repeated_ngrams

    looped = "the cat sat the cat sat the cat sat".split()
    # bigrams: 'the cat' x3, 'cat sat' x3, 'sat the' x2 (8); the text has each of the first two once
    assert repeated_ngrams(looped, "the cat sat".split(), 2) == pytest.approx((2 + 2 + 1) / 8)
    assert repeated_ngrams(looped, looped, 2) == 0.0  # a text that repeats itself is said as written
    assert repeated_ngrams("a b c d".split(), "a b c d".split(), 2) == 0.0
    assert repeated_ngrams(["a"], ["a"], 2) == 0.0 and repeated_ngrams([], ["a", "b"], 1) == 0.0
    assert repeated_ngrams("go go go go".split(), ["go"], 1) == pytest.approx(3 / 4)


def test_repetition_over_the_asr_reward_of_a_stream_shares_its_model(tmp_path, speech):
    from rewardzoo.core.loader import RewardLoader
    from rewardzoo.rewards.audio.repetition import repeated_ngrams
    from rewardzoo.testing import tiny_whisper_dir

    path = str(tiny_whisper_dir(tmp_path / "whisper", seed=5))
    loader = RewardLoader()
    asr = loader.load({"name": "asr_wer", "model_path": path, "kwargs": {"max_new_tokens": 6}})
    rep = loader.load(
        {
            "name": "repetition",
            "kwargs": {
                "ngram": 1,
                "asr": {"reward_model": "asr_wer", "model_path": path, "kwargs": {"max_new_tokens": 6}},
            },
        }
    )
    assert rep.asr is asr and loader.constructions == 2 and rep.inputs.fields == ("audio", "prompt")
    clips = [speech[: 2 * RATE], np.zeros(RATE, np.float32)]
    out = rep(audio=clips, audio_sample_rate=[RATE] * 2, prompt=["please call stella", "nothing"])
    heard = [asr.transcribe([clips[0]])[0], ""]  # a silent clip is not transcribed
    assert out.extras["transcript"] == heard
    expected = [
        repeated_ngrams(asr.normalize(h).split(), asr.normalize(t).split(), 1)
        for h, t in zip(heard, ["please call stella", "nothing"])
    ]
    np.testing.assert_allclose(out.rewards, 1.0 - np.asarray(expected))
    with pytest.raises(ConfigError, match="ASR reward"):
        loader.load({"name": "repetition", "kwargs": {"asr": "speech_presence"}})
