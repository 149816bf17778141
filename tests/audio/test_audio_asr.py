"""asr_wer / asr_cer: the scoring formula against jiwer, and a tiny random Whisper built offline."""

from __future__ import annotations

import numpy as np
import pytest
from transformers.models.whisper.english_normalizer import (
    BasicTextNormalizer,
    EnglishTextNormalizer,
)

from rewardzoo import RewardProcessor
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.audio.asr import ASRAccuracy, ASRCharAccuracy, ASRWordAccuracy, accuracy
from rewardzoo.spec.config import RewardSpec
from rewardzoo.spec.sample import Sample
from rewardzoo.testing import tiny_whisper_dir

from .signals import noise, speech_like

jiwer = pytest.importorskip("jiwer")

RATE = 16000
#: (reference, hypothesis) pairs, normalised texts; empty strings on either side.
PAIRS = [
    ("the cat sat on the mat", "the cat sat on the mat"),
    ("the cat sat on the mat", "the cat sat on a mat"),
    ("the cat sat", "a dog ran fast and far away"),
    ("hello world", ""),
    ("", ""),
    ("", "some words"),
    ("one two three four", "one three four five"),
    ("a", "b"),
]


@pytest.mark.parametrize("metric", ["wer", "cer"])
def test_accuracy_is_one_minus_clipped_jiwer(metric):
    for ref, hyp in PAIRS:
        rate = jiwer.wer(ref, hyp) if metric == "wer" else jiwer.cer(ref, hyp)
        assert accuracy(ref, hyp, metric) == pytest.approx(1.0 - min(rate, 1.0))
    # empty reference: jiwer counts every hypothesised word/character, so 1 for an empty hypothesis, else 0
    assert accuracy("", "", metric) == 1.0 and accuracy("", "x y", metric) == 0.0
    assert accuracy("hello world", "", metric) == 0.0


@pytest.fixture(scope="module")
def whisper_dir(tmp_path_factory):
    return tiny_whisper_dir(tmp_path_factory.mktemp("whisper"), seed=5)  # seed 5 emits byte tokens, not just EOS


@pytest.fixture(scope="module")
def wer(whisper_dir):
    return ASRWordAccuracy(model_path=str(whisper_dir), max_new_tokens=6)


def _clips(n: int, seconds: float = 1.5) -> list[np.ndarray]:
    return [
        (speech_like(RATE, seconds + 0.1 * i, seed=i) + noise(RATE, seconds + 0.1 * i, amp=0.02 * i, seed=i)).astype(
            np.float32
        )
        for i in range(n)
    ]


def test_tiny_whisper_batched_equals_per_clip(wer):
    clips = _clips(4)
    out = wer(audio=clips, audio_sample_rate=[RATE] * 4, prompt=["the cat"] * 4)
    batched = list(out.extras["transcript"])
    assert out.rewards.shape == (4,) and out.extras["error_rate"].shape == (4,)
    assert any(batched), "the tiny model should emit some text"
    single = [wer.transcribe([c])[0] for c in clips]
    assert batched == single
    norm = EnglishTextNormalizer({})
    for i, text in enumerate(batched):
        assert out.rewards[i] == pytest.approx(1 - min(jiwer.wer(norm("the cat"), norm(text)), 1.0))


def test_resampling_and_processor(whisper_dir, wer):
    from rewardzoo.shared.audio import prepare_audio

    clip = _clips(1)[0]
    clip44 = prepare_audio(clip, RATE, target_rate=44100)[0][0]
    proc = RewardProcessor(
        [RewardSpec(name="asr_wer", reward_model="asr_wer", model_path=str(whisper_dir), kwargs={"max_new_tokens": 6})]
    )
    res = proc([Sample(audio=clip44, audio_sample_rate=44100, prompt="the cat")])
    assert 0.0 <= res.rewards["asr_wer"][0] <= 1.0 and "error_rate" in res.extras["asr_wer"]


def test_normalisers_and_target_from_metadata(whisper_dir, monkeypatch):
    cer = ASRCharAccuracy(model_path=str(whisper_dir), text_key="text")
    assert cer.metric == "cer" and cer.inputs.fields == ("audio", "metadata") and cer.is_whisper
    monkeypatch.setattr(cer, "transcribe", lambda clips: ["Hello, World!"] * len(clips))
    clips = _clips(2)
    out = cer(audio=clips, audio_sample_rate=[RATE] * 2, metadata=['{"text": "hello world"}', '{"text": "hello word"}'])
    assert out.rewards[0] == 1.0
    assert out.rewards[1] == pytest.approx(1 - jiwer.cer("hello word", "hello world"))
    with pytest.raises(InputError, match="'text'") as exc:
        cer(audio=clips, audio_sample_rate=[RATE] * 2, metadata=['{"text": "a"}', '{"other": "b"}'])
    assert (exc.value.field, exc.value.sample) == ("metadata", 1)
    basic = ASRAccuracy(model_path=str(whisper_dir), metric="wer", normalizer="basic")
    monkeypatch.setattr(basic, "transcribe", lambda clips: ["Hello,   WORLD (laughs)"] * len(clips))
    assert basic(audio=clips[:1], audio_sample_rate=[RATE], prompt=["hello world"]).rewards[0] == 1.0
    assert BasicTextNormalizer()("Hello,   WORLD (laughs)").split() == ["hello", "world"]
    with pytest.raises(ConfigError):
        ASRAccuracy(model_path=str(whisper_dir), metric="bleu")


def test_silence_is_an_empty_transcript_and_bad_input_is_typed(wer):
    ok = _clips(1)[0]
    out = wer(audio=[ok, np.zeros(RATE, np.float32)], audio_sample_rate=[RATE] * 2, prompt=["the cat", "the cat"])
    assert out.extras["transcript"][1] == "" and out.rewards[1] == 0.0
    nan = ok.copy()
    nan[1] = np.nan
    for clips, rates in (
        ([ok, ok[:800]], [RATE] * 2),
        ([ok, nan], [RATE] * 2),
        ([ok, ok], [RATE, 0]),
        ([ok, np.zeros(31 * RATE, np.float32) + 0.1], [RATE] * 2),
    ):
        with pytest.raises(InputError) as exc:
            wer(audio=clips, audio_sample_rate=rates, prompt=["a", "b"])
        assert (exc.value.field, exc.value.sample) == ("audio", 1)


def test_tiny_ctc_checkpoint_batched_equals_per_clip(tmp_path):
    from rewardzoo.testing import tiny_wav2vec2_ctc_dir

    reward = ASRCharAccuracy(model_path=str(tiny_wav2vec2_ctc_dir(tmp_path / "ctc", seed=1)))
    assert reward.ctc and not reward.is_whisper and reward.inputs.max_seconds == 600.0
    clips = [c[: int(RATE * (0.2 + 0.1 * i))] for i, c in enumerate(_clips(3))]
    out = reward(audio=clips, audio_sample_rate=[RATE] * 3, prompt=["the cat sat"] * 3)
    batched = list(out.extras["transcript"])
    assert all(batched) and batched == [reward.transcribe([c])[0] for c in clips]
    norm = BasicTextNormalizer()
    for i, text in enumerate(batched):
        assert out.rewards[i] == pytest.approx(1 - min(jiwer.cer(norm("the cat sat"), norm(text)), 1.0))


def test_the_transcript_reaches_the_result_as_a_text_extra(whisper_dir):
    from rewardzoo import RewardProcessor, Sample

    proc = RewardProcessor(
        [
            {
                "name": "wer",
                "reward_model": "asr_wer",
                "model_path": str(whisper_dir),
                "device": "cpu",
                "applicable_datasets": ["speech"],
                "batch_size": 2,
                "kwargs": {"max_new_tokens": 6},
            }
        ]
    )
    clips = _clips(3)
    samples = [
        Sample(audio=c, audio_sample_rate=RATE, prompt="the cat", dataset=d)
        for c, d in zip(clips, ["speech", "other", "speech"])
    ]
    result = proc(samples)
    texts = result.extras["wer"]["transcript"]
    assert texts.dtype == object and texts[1] is None and all(isinstance(texts[i], str) for i in (0, 2))
    assert list(texts[[0, 2]]) == proc.rewards["wer"].transcribe([clips[0], clips[2]])
    assert result.extras["wer"]["error_rate"].dtype == np.float32
