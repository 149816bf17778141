"""utmos against utmos-pytorch's own ``UTMOSScoreTorch`` on the same random-init model.

The model is utmos-pytorch's ``UTMOSModel`` with a shrunken wav2vec 2.0 (the package's ``Wav2Vec2Config``
replaced by a smaller one for both sides; the width stays 768, which the package fixes), saved with
``torch.save`` and loaded by both: the reference through ``UTMOSScoreTorch(ckpt_path=...)`` and its
``score`` one clip at a time (batch size 1, as its authors advise), rewardzoo through ``model_path``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rewardzoo import load_reward
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.errors import InputError
from rewardzoo.spec.sample import Sample

utmos_torch = pytest.importorskip("utmos_pytorch.utmos_torch")
from utmos_pytorch.wav2vec2 import Wav2Vec2Config

TINY = {
    "conv_feature_layers": "[(32, 10, 5)] + [(32, 3, 2)] * 4 + [(32, 2, 2)] * 2",
    "encoder_layers": 1,
    "encoder_ffn_embed_dim": 64,
    "conv_pos": 16,
}


@pytest.fixture
def tiny_config(monkeypatch):
    monkeypatch.setattr(utmos_torch, "Wav2Vec2Config", lambda: Wav2Vec2Config(**TINY))


@pytest.fixture
def weights(tiny_config, tmp_path):
    torch.manual_seed(0)
    net = utmos_torch.UTMOSModel()
    path = tmp_path / "utmos_tiny.pt"
    torch.save(net.state_dict(), path)
    return str(path)


def clips(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in lengths]


def test_matches_reference_one_clip_at_a_time(weights):
    ref = utmos_torch.UTMOSScoreTorch(ckpt_path=weights)
    audio = clips([16000, 8000, 16000, 12000, 8000, 4000])
    want = np.array([float(ref.score(torch.from_numpy(a))[0]) for a in audio])
    reward = load_reward({"name": "utmos", "model_path": weights, "kwargs": {"max_batch": 2}})
    got = np.asarray(reward(audio=audio, audio_sample_rate=[16000] * len(audio)).rewards)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.ptp(want) > 1e-4


def test_batched_by_length_equals_one_at_a_time_and_padding_would_not(weights):
    audio = clips([16000, 9600, 16000, 9600, 16000], seed=3)
    reward = load_reward({"name": "utmos", "model_path": weights})
    batched = np.asarray(reward(audio=audio, audio_sample_rate=[16000] * 5).rewards)
    single = np.array([reward(audio=[a], audio_sample_rate=[16000]).rewards[0] for a in audio])
    np.testing.assert_allclose(batched, single, rtol=1e-5, atol=1e-6)
    # why by length: the package's own batch of zero-padded clips shifts the short clips' scores
    ref = utmos_torch.UTMOSScoreTorch(ckpt_path=weights)
    padded = np.stack([np.pad(a, (0, 16000 - len(a))) for a in audio])
    shifted = ref.score(torch.from_numpy(padded)[:, None]).numpy()
    assert abs(shifted[1] - single[1]) > 1e-4
    np.testing.assert_allclose(shifted[[0, 2, 4]], single[[0, 2, 4]], rtol=1e-5, atol=1e-5)


def test_processor_path_and_short_clip_is_an_input_error(weights):
    ref = utmos_torch.UTMOSScoreTorch(ckpt_path=weights)
    audio = clips([16000], seed=5)[0]
    proc = RewardProcessor([{"name": "utmos", "model_path": weights}])
    got = proc([Sample(audio=audio, audio_sample_rate=16000)]).rewards["utmos"][0]
    assert got == pytest.approx(float(ref.score(torch.from_numpy(audio))[0]), rel=1e-5)
    reward = load_reward({"name": "utmos", "model_path": weights})
    with pytest.raises(InputError, match="at least 400 samples") as err:
        reward(audio=clips([16000, 200]), audio_sample_rate=[16000, 16000])
    assert err.value.sample == 1 and err.value.field == "audio"
