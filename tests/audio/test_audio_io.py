"""Audio reading and conversion (rewardzoo.shared.audio.prepare_audio): forms, layouts, rates, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
import torchaudio.functional as taf

from rewardzoo.errors import InputError
from rewardzoo.shared.audio import prepare_audio, prepare_clips

from .signals import noise, speech_like, tone

RATES = (8000, 16000, 44100, 48000)


def _int16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x * 32768), -32768, 32767).astype(np.int16)


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("channels", [1, 2])
def test_int16_forms_agree_with_soundfile(tmp_path, rate, channels):
    """wav/flac (16-bit), int16 NumPy in both layouts and int16 tensors give soundfile's float samples."""
    x = _int16(noise(rate, 0.7, amp=0.2, channels=channels))  # (time,) or (channels, time)
    layout = x.T if channels > 1 else x  # soundfile wants (time, channels)
    forms = {"array": x, "tensor": torch.from_numpy(x.copy()), "time_channels": layout}
    for fmt in ("wav", "flac"):
        path = tmp_path / f"clip.{fmt}"
        sf.write(path, layout, rate, subtype="PCM_16")
        forms[fmt] = path if fmt == "wav" else str(path)
    expected, file_rate = sf.read(tmp_path / "clip.wav", dtype="float32", always_2d=True)
    assert file_rate == rate
    for name, value in forms.items():
        audio, out_rate = prepare_audio(value, None if name in ("wav", "flac") else rate, mono=False)
        assert out_rate == rate, name
        assert audio.dtype == np.float32 and audio.shape == (channels, expected.shape[0]), name
        np.testing.assert_array_equal(audio, expected.T, err_msg=name)


def test_float_forms_and_int32(tmp_path):
    rate = 16000
    x = (0.5 * speech_like(rate, 0.5)).astype(np.float32)
    sf.write(tmp_path / "f.wav", x, rate, subtype="FLOAT")
    x32 = np.round(x.astype(np.float64) * 2**31).astype(np.int32)
    sf.write(tmp_path / "i.wav", x32, rate, subtype="PCM_32")
    ref32, _ = sf.read(tmp_path / "i.wav", dtype="float64")
    for value in (
        x,
        x.astype(np.float64),
        torch.from_numpy(x),
        torch.from_numpy(x).to(torch.float16).float(),
        tmp_path / "f.wav",
        x[None, :],
    ):
        audio, _ = prepare_audio(value, None if not isinstance(value, (np.ndarray, torch.Tensor)) else rate)
        np.testing.assert_allclose(audio[0], x, atol=0 if not isinstance(value, torch.Tensor) else 1e-3)
    audio, _ = prepare_audio(x32, rate)
    np.testing.assert_allclose(audio[0], ref32, atol=1e-7)  # int32 / 2**31, like soundfile
    audio, _ = prepare_audio(torch.from_numpy(x32), rate)
    np.testing.assert_allclose(audio[0], ref32, atol=1e-7)


def test_ogg_is_read_through_soundfile(tmp_path):
    rate = 44100
    sf.write(tmp_path / "c.ogg", tone(rate, 1.0, channels=2).T, rate, format="OGG", subtype="VORBIS")
    expected, _ = sf.read(tmp_path / "c.ogg", dtype="float32", always_2d=True)
    audio, out_rate = prepare_audio(tmp_path / "c.ogg", mono=False)
    assert out_rate == rate
    np.testing.assert_array_equal(audio, expected.T)


@pytest.mark.parametrize("as_tensor", [False, True])
def test_mono_mixdown_and_resampling_match_torchaudio(as_tensor):
    src, dst = 44100, 16000
    x = noise(src, 0.5, amp=0.2, channels=2).astype(np.float32)
    audio, rate = prepare_audio(x, src, target_rate=dst, mono=True, as_tensor=as_tensor)
    expected = taf.resample(torch.from_numpy(x.mean(axis=0, keepdims=True)), src, dst)
    assert rate == dst
    got = audio.numpy() if as_tensor else audio
    assert isinstance(audio, torch.Tensor) is as_tensor and got.shape == tuple(expected.shape)
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-6)


def test_same_rate_is_untouched_and_stereo_kept():
    x = noise(48000, 0.2, channels=2).astype(np.float32)
    audio, rate = prepare_audio(x, 48000, target_rate=48000, mono=False)
    assert rate == 48000
    np.testing.assert_array_equal(audio, x)


def test_file_rate_is_used_and_resampled(tmp_path):
    sf.write(tmp_path / "a.wav", tone(8000, 0.5), 8000, subtype="FLOAT")
    audio, rate = prepare_audio(str(tmp_path / "a.wav"), target_rate=16000)
    expected = taf.resample(torch.from_numpy(tone(8000, 0.5).astype(np.float32))[None], 8000, 16000)
    assert rate == 16000
    np.testing.assert_allclose(audio, expected.numpy(), atol=1e-6)


def test_uint8_pcm():
    x = np.array([0, 64, 128, 192, 255], dtype=np.uint8)
    audio, _ = prepare_audio(x, 8000)
    np.testing.assert_allclose(audio[0], (x.astype(np.float64) - 128) / 128)


@pytest.mark.parametrize(
    "value, rate, match",
    [
        (np.zeros(0, np.float32), 16000, "empty"),
        (np.zeros((2, 0), np.float32), 16000, "empty"),
        (np.array([0.1, np.nan, 0.2], np.float32), 16000, "NaN"),
        (torch.tensor([0.0, float("inf")]), 16000, "NaN or infinite"),
        (np.zeros(100, np.float32), None, "needs audio_sample_rate"),
        (np.zeros(100, np.float32), 0, "positive integer"),
        (np.zeros(100, np.float32), 16000.5, "positive integer"),
        (np.zeros(100, np.float32), "16k", "positive integer"),
        (np.zeros((2, 3, 100), np.float32), 16000, "shape"),
        (np.zeros((20, 100), np.float32), 16000, "ambiguous"),
        (np.zeros(100, np.int64), 16000, "sample type"),
        ([0.0, 0.1], 16000, "unsupported audio type"),
    ],
)
def test_bad_arrays_raise_input_error(value, rate, match):
    with pytest.raises(InputError, match=match):
        prepare_audio(value, rate)


def test_time_channels_rule():
    x = noise(16000, 0.1, channels=2).astype(np.float32)
    np.testing.assert_array_equal(prepare_audio(x.T, 16000, mono=False)[0], x)  # (time, 2) -> (2, time)
    tiny = np.arange(6, dtype=np.float32).reshape(2, 3) / 10  # both axes small: (channels, time)
    assert prepare_audio(tiny, 16000, mono=False)[0].shape == (2, 3)


def test_bad_files_raise_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        prepare_audio(tmp_path / "missing.wav")
    (tmp_path / "junk.wav").write_bytes(b"this is not audio" * 10)
    with pytest.raises(InputError, match="cannot read audio file"):
        prepare_audio(str(tmp_path / "junk.wav"))
    sf.write(tmp_path / "empty.wav", np.zeros(0, np.float32), 16000)
    with pytest.raises(InputError, match="empty"):
        prepare_audio(tmp_path / "empty.wav")
    sf.write(tmp_path / "ok.wav", np.zeros(160, np.float32), 16000)
    with pytest.raises(InputError, match="contradicts"):
        prepare_audio(tmp_path / "ok.wav", sample_rate=44100)
    assert prepare_audio(tmp_path / "ok.wav", sample_rate=16000)[1] == 16000


def test_prepare_clips_locates_the_bad_clip():
    good = np.zeros(100, np.float32)
    with pytest.raises(InputError) as info:
        prepare_clips([good, np.array([np.nan], np.float32)], [16000, 16000])
    assert info.value.sample == 1 and info.value.field == "audio"
    with pytest.raises(InputError, match="one clip per input"):
        prepare_clips(good, [16000])
