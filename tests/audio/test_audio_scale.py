"""Audio at its real size (issue 47, item 2): one 60 s, 48 kHz stereo clip through the processor's conversion keeps
the peak memory within 1.5x the clip decoded as float32 (the form every audio reward reads, 2x its 16-bit file),
measured in a fresh process; before, reading, mixing down (a float64 copy) and torchaudio's resampling (its
unfolded input) took 4x (16 kHz mono) to 10x (24 kHz stereo). The converted samples are the reference's:
soundfile's float32 read, the float64 channel mean, torchaudio's resample."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sf = pytest.importorskip("soundfile")
torchaudio_functional = pytest.importorskip("torchaudio.functional")

from rewardzoo.shared.audio import prepare_audio, resample

RATE, SECONDS = 48000, 60
FLOAT32 = RATE * SECONDS * 2 * 4  # 22 MiB
ROOT = Path(__file__).resolve().parents[2]
#: The converters' block buffers (64 Ki frames read, ~1 MiB of unfolded convolution input): the "working set"
BLOCKS = 4 * 2**20


@pytest.fixture(scope="module")
def long_wav(tmp_path_factory):
    t = np.arange(RATE * SECONDS) / RATE
    rng = np.random.default_rng(0)
    left = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.02 * rng.standard_normal(len(t))
    right = 0.3 * np.sin(2 * np.pi * 330 * t) + 0.02 * rng.standard_normal(len(t))
    path = tmp_path_factory.mktemp("long") / "long.wav"
    sf.write(path, (np.stack([left, right], 1) * 32767).astype(np.int16), RATE, subtype="PCM_16")
    return str(path)


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux /proc only")
@pytest.mark.parametrize(
    "reward, form",
    [("FirstSample", "file"), ("FirstSampleStereo", "file"), ("FirstSample", "array"), ("loudness", "file")],
)
def test_a_60_s_48_khz_stereo_clip_converts_within_1_5x_its_float32_size(reward, form, long_wav):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("scale_child.py")), reward, long_wav, form],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    growth = json.loads(out.stdout.strip().splitlines()[-1])["growth"]
    assert growth <= 1.5 * FLOAT32 + BLOCKS, f"{reward} ({form}): peak grew {growth / FLOAT32:.2f}x the float32 clip"


def _reference(data: np.ndarray, rate: int, target: int | None, mono: bool) -> np.ndarray:
    """The conversion as the reference libraries do it on the whole clip: float64 mean, torchaudio's resample."""
    x = data.T.astype(np.float32)
    if mono:
        x = x.mean(axis=0, keepdims=True, dtype=np.float64).astype(np.float32)
    if target is not None and target != rate:
        x = torchaudio_functional.resample(torch.from_numpy(np.ascontiguousarray(x)), rate, target).numpy()
    return x


@pytest.mark.parametrize("target, mono", [(None, True), (None, False), (16000, True), (24000, False), (44100, True)])
def test_the_converted_samples_are_the_references(long_wav, target, mono):
    data, rate = sf.read(long_wav, dtype="float32")
    want = _reference(data, rate, target, mono)
    got, got_rate = prepare_audio(long_wav, target_rate=target, mono=mono)
    assert got_rate == (target or rate) and got.shape == want.shape and got.dtype == np.float32
    if target is None:  # read and mixed down in blocks: bit for bit
        np.testing.assert_array_equal(got, want)
    else:  # torchaudio's convolution rounds a few float32 ulps apart by block length
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "dtype, scale, offset", [(np.int16, 2.0**15, 0), (np.int32, 2.0**31, 0), (np.uint8, 128.0, 128)]
)
def test_integer_arrays_convert_in_float32_bit_for_bit_as_float64_division(dtype, scale, offset):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    arr = rng.integers(info.min, info.max, (RATE * 3, 2), dtype=dtype, endpoint=True)  # (time, channels)
    got, _ = prepare_audio(arr, RATE, mono=False)
    want = ((arr.astype(np.float64) - offset) / scale).astype(np.float32).T
    np.testing.assert_array_equal(got, want)


def test_resampling_in_blocks_matches_torchaudio_at_every_length():
    rng = np.random.default_rng(2)
    for rate, target in [(48000, 16000), (16000, 48000), (44100, 16000), (22050, 24000)]:
        for n in (1, 2, 100, 65536 * 3 + 5):
            for channels in (1, 2):
                x = rng.standard_normal((channels, n)).astype(np.float32)
                want = torchaudio_functional.resample(torch.from_numpy(x), rate, target).numpy()
                got = resample(x, rate, target)
                assert got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_loudness_filtered_a_chunk_at_a_time_equals_the_whole_clip_filtered_at_once(long_wav):
    """The K-weighting over the whole clip in float64 (what BS.1770 / pyloudnorm compute), bit for bit."""
    from scipy.signal import lfilter

    from rewardzoo.rewards.audio import loudness

    clip = np.ascontiguousarray(sf.read(long_wav, dtype="float32")[0].T)[:, : RATE * 7 + 1234]
    lower, upper = loudness.block_bounds(clip.shape[1], RATE)
    edges = np.unique(np.concatenate([lower, upper]))
    whole = np.asarray(clip, dtype=np.float64)
    for b, a in loudness.k_weighting(RATE):
        whole = lfilter(b, a, whole, axis=1)
    want = np.add.reduceat(np.square(whole[:, : edges[-1]]), edges[:-1], axis=1)
    got = loudness.hop_energies(clip, RATE, edges)
    assert got.shape == want.shape and np.array_equal(got, want)
