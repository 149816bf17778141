"""DNSMOS with the real speechmos weights, against speechmos's own implementation (librosa front end).

Clip lengths are chosen to keep the number of 9.01 s windows small (each costs one ONNX pass): a clip is
tiled by doubling, so 2.3 s and 4.6 s become 9.2 s (one window) while 4.0 s becomes 16 s (seven).
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
import torchaudio.functional as taf

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.audio.dnsmos import DNSMOS, PersonalizedDNSMOS, slaney_mel_filterbank

from .signals import noise, speech_like, tone

KEYS = ("ovrl", "sig", "bak", "p808")
TOL = 1e-3


def _assert_matches(ours, i: int, ref: dict) -> None:
    for key in KEYS:
        assert abs(ours.extras[key][i] - ref[key]) < TOL, (key, ours.extras[key][i], ref[key])


def test_filterbank_and_features_equal_librosa(dnsmos):
    librosa = pytest.importorskip("librosa")
    np.testing.assert_allclose(
        slaney_mel_filterbank(16000, 321, 120),
        librosa.filters.mel(sr=16000, n_fft=321, n_mels=120),
        rtol=1e-5,
        atol=1e-9,
    )
    segs = np.stack([speech_like(16000, 9.0, seed=3), noise(16000, 9.0, amp=0.05)]).astype(np.float32)
    ours = dnsmos.p808_features(torch.from_numpy(segs)).numpy()
    for seg, feat in zip(segs, ours):
        mel = librosa.feature.melspectrogram(y=seg, sr=16000, n_fft=321, hop_length=160, n_mels=120)
        ref = ((librosa.power_to_db(mel, ref=np.max) + 40) / 40).T
        assert feat.shape == ref.shape == (900, 120)
        np.testing.assert_allclose(feat, ref, atol=2e-4)


SIGNALS_16K = {
    "speech_10s": lambda: speech_like(16000, 10.0, seed=1),
    "tone_9s": lambda: tone(16000, 9.6, freq=330.0, amp=0.25),
    "noise_5s_tiled": lambda: noise(16000, 5.0, amp=0.08, seed=2),
    # 17 s: 8 one-second hops, the last of which the reference skips (its end rounds one sample short)
    "speech_plus_noise_17s": lambda: speech_like(16000, 17.0, seed=4) + noise(16000, 17.0, amp=0.02, seed=5),
    "short_1s_tiled": lambda: speech_like(16000, 1.3, seed=6),
}


def test_matches_speechmos_at_16k(dnsmos, speechmos_run):
    clips = [np.asarray(make(), dtype=np.float32) for make in SIGNALS_16K.values()]
    ours = dnsmos(audio=clips, audio_sample_rate=[16000] * len(clips))
    for i, clip in enumerate(clips):
        _assert_matches(ours, i, speechmos_run(clip))
    np.testing.assert_array_equal(ours.rewards, ours.extras["ovrl"])


@pytest.mark.parametrize("rate", [8000, 44100, 48000])
def test_matches_speechmos_after_resampling(dnsmos, speechmos_run, rate):
    x = speech_like(rate, 9.5, seed=rate % 7).astype(np.float32) + noise(rate, 9.5, amp=0.01).astype(np.float32)
    ours = dnsmos(audio=[x], audio_sample_rate=[rate])
    resampled = taf.resample(torch.from_numpy(x), rate, 16000).numpy()
    _assert_matches(ours, 0, speechmos_run(resampled))


def test_personalized_matches_speechmos(dnsmos_personalized, speechmos_run):
    x = speech_like(16000, 10.0, seed=8).astype(np.float32)
    ours = dnsmos_personalized(audio=[x], audio_sample_rate=[16000])
    _assert_matches(ours, 0, speechmos_run(x, personalized=True))
    assert PersonalizedDNSMOS.personalized and not DNSMOS.personalized


def test_stereo_is_mixed_down(dnsmos, speechmos_run):
    x = np.stack([speech_like(16000, 9.2, seed=9), tone(16000, 9.2, amp=0.1)]).astype(np.float32)
    ours = dnsmos(audio=[x], audio_sample_rate=[16000])
    _assert_matches(ours, 0, speechmos_run(x.mean(axis=0)))


def test_every_input_form_gives_the_same_score(dnsmos, tmp_path):
    x = np.clip(np.round(speech_like(16000, 2.3, seed=10) * 32768), -32768, 32767).astype(np.int16)
    sf.write(tmp_path / "c.wav", x, 16000, subtype="PCM_16")
    sf.write(tmp_path / "c.flac", np.stack([x, x], axis=1), 16000, subtype="PCM_16")
    forms = [
        x,
        torch.from_numpy(x.copy()),
        (x / 32768.0).astype(np.float32),
        str(tmp_path / "c.wav"),
        tmp_path / "c.flac",
    ]
    rates = [16000, 16000, 16000, None, None]
    out = dnsmos(audio=forms, audio_sample_rate=rates)
    for key in KEYS:
        np.testing.assert_allclose(out.extras[key], out.extras[key][0], atol=1e-6)


def test_targets_and_out_of_range_samples(dnsmos):
    louder = 2.0 * tone(16000, 4.6)  # beyond full scale: clipped to [-1, 1] first
    base = dnsmos(audio=[louder, np.clip(louder, -1.0, 1.0)], audio_sample_rate=[16000, 16000])
    assert base.rewards[0] == base.rewards[1]
    x = np.clip(louder, -1.0, 1.0)
    for target in ("bak", "p808"):
        other = DNSMOS(target=target)
        np.testing.assert_allclose(other(audio=[x], audio_sample_rate=[16000]).rewards, base.extras[target][:1])


def test_bad_input_and_options(dnsmos):
    with pytest.raises(InputError, match="empty") as info:
        dnsmos(audio=[np.zeros(16000, np.float32), np.zeros(0, np.float32)], audio_sample_rate=[16000, 16000])
    assert info.value.sample == 1
    with pytest.raises(InputError, match="NaN"):
        dnsmos(audio=[np.full(100, np.nan, np.float32)], audio_sample_rate=[16000])
    with pytest.raises(InputError, match="needs audio_sample_rate"):
        dnsmos(audio=[np.zeros(100, np.float32)])
    with pytest.raises(ConfigError, match="target"):
        DNSMOS(target="mos")
    with pytest.raises(ConfigError, match="float32"):
        DNSMOS(dtype="float16")
    with pytest.raises(ConfigError, match="sig_bak_ovr.onnx"):
        DNSMOS(model_path="/nonexistent")


def test_model_path_directory_loads_the_same_weights(dnsmos, tmp_path):
    import shutil

    from rewardzoo.rewards.audio.dnsmos import speechmos_model_dir

    for name in ("sig_bak_ovr.onnx", "model_v8.onnx"):
        shutil.copy(speechmos_model_dir() / "dnsmos_models" / name, tmp_path / name)
    x = noise(16000, 2.3, amp=0.05).astype(np.float32)
    local = DNSMOS(model_path=str(tmp_path))
    np.testing.assert_array_equal(
        local(audio=[x], audio_sample_rate=[16000]).rewards, dnsmos(audio=[x], audio_sample_rate=[16000]).rewards
    )
