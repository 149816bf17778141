"""speaker_similarity on a tiny random WavLMForXVector, against embeddings computed with transformers directly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import Wav2Vec2FeatureExtractor, WavLMForXVector

from rewardzoo import RewardProcessor
from rewardzoo.errors import InputError
from rewardzoo.rewards.audio.speaker import SpeakerSimilarity
from rewardzoo.spec.config import RewardSpec
from rewardzoo.spec.sample import Sample
from rewardzoo.testing import tiny_wavlm_xvector_dir

from .signals import noise, speech_like, tone

RATE = 16000


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_wavlm_xvector_dir(tmp_path_factory.mktemp("wavlm"))


@pytest.fixture(scope="module")
def reward(model_dir):
    return SpeakerSimilarity(model_path=str(model_dir))


def _direct(model_dir, x: np.ndarray) -> torch.Tensor:
    fe = Wav2Vec2FeatureExtractor.from_pretrained(model_dir)
    model = WavLMForXVector.from_pretrained(model_dir).eval()
    with torch.no_grad():
        return model(**fe(x, sampling_rate=RATE, return_tensors="pt")).embeddings[0]


def test_scores_match_transformers_embeddings(reward, model_dir):
    a, b = speech_like(RATE, 1.2, seed=1).astype(np.float32), speech_like(RATE, 0.9, seed=2).astype(np.float32)
    c = (noise(RATE, 1.2, amp=0.2, seed=3) + tone(RATE, 1.2, freq=180)).astype(np.float32)
    outs, refs = [a, a, c, b], [b, c, a, b]
    got = reward(
        audio=outs, audio_sample_rate=[RATE] * 4, condition_audio=refs, condition_audio_sample_rate=[RATE] * 4
    ).rewards
    for i, (x, y) in enumerate(zip(outs, refs)):
        want = torch.nn.functional.cosine_similarity(_direct(model_dir, x), _direct(model_dir, y), dim=0)
        assert got[i] == pytest.approx(float(want), abs=1e-5)
    assert got[3] == pytest.approx(1.0, abs=1e-5)  # identical clips
    assert np.all((got >= -1.0) & (got <= 1.0))


def test_identical_clips_score_one_through_the_processor_at_other_rates(reward, model_dir):
    x = speech_like(22050, 1.0, seed=4).astype(np.float32)
    proc = RewardProcessor(
        [RewardSpec(name="speaker_similarity", reward_model="speaker_similarity", model_path=str(model_dir))]
    )
    res = proc([Sample(audio=x, audio_sample_rate=22050, condition_audio=x.copy(), condition_audio_sample_rate=22050)])
    assert res.rewards["speaker_similarity"][0] == pytest.approx(1.0, abs=1e-5)


def test_bad_input(reward):
    ok = speech_like(RATE, 1.0).astype(np.float32)
    nan = ok.copy()
    nan[0] = np.nan
    cases = [
        ([ok, ok[:100]], [ok, ok], "audio"),
        ([ok, ok], [ok, np.zeros_like(ok)], "condition_audio"),
        ([ok, np.zeros_like(ok)], [ok, ok], "audio"),
        ([ok, nan], [ok, ok], "audio"),
        ([ok, ok], [ok, None], "condition_audio"),
    ]
    for outs, refs, fld in cases:
        with pytest.raises(InputError) as exc:
            reward(
                audio=outs, audio_sample_rate=[RATE] * 2, condition_audio=refs, condition_audio_sample_rate=[RATE] * 2
            )
        assert (exc.value.field, exc.value.sample) == (fld, 1)
    with pytest.raises(InputError) as exc:
        reward(audio=[ok], audio_sample_rate=[0], condition_audio=[ok], condition_audio_sample_rate=[RATE])
    assert exc.value.field == "audio"
