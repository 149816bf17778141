"""av_sync against MMAudio's evaluation (hkchengrex/av-benchmark@050a5cd), its steps computed here independently.

av-benchmark is not on PyPI and CI has no GitHub access, so this test recomputes each step of the reference from
its own description (file:line of av-benchmark@050a5cd below) with torchvision / torchaudio calls of its own,
feeding the tiny Synchformer's parts as the reference calls them; the network itself was compared with
av-benchmark's ``av_bench/synchformer`` at real size (random weights: features within 7e-6,
logits within 6e-8, see ``benchmarks/bench_av_sync.py`` and the card).

- video: 25 fps (``av_bench/data/video_dataset.py`` 20, 41, 103), ``Resize(224, BICUBIC)``, ``CenterCrop(224)``,
  ``ToDtype(float32, scale=True)``, ``Normalize(0.5, 0.5)`` (51-57); segments of 16 frames every 8
  (``extract_video.py`` 45-50);
- audio: channel mean, ``Resample(sr, 16000)``, first ``16000 * duration`` samples (``audio_dataset.py`` 209-216);
  segments of 10240 every 5120, ``MelSpectrogram(16000, win 400, hop 160, n_fft 1024, 128 mels)``,
  ``log(x + 1e-6)``, pad to 66, ``(x + 4.2677393) / (2 * 4.5689974)`` (``extract.py`` 23-37;
  ``extraction_models.py`` 57-63);
- score: grid ``np.linspace(-2, 2, 21)`` as float32 (``synchformer.py`` 21), logits of the first and the last 14
  segments, argmax, ``|grid[argmax]|``, mean (``evaluate.py`` 176-191).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torchaudio")
pytest.importorskip("torchvision")

import torchaudio
from torchvision.transforms import v2

from rewardzoo import load_reward
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.models.synchformer import WEIGHTS_FILE, build_synchformer
from rewardzoo.rewards.video.av_sync import AVSync
from rewardzoo.testing import tiny_synchformer_dir

SECONDS = 5.0  # 125 frames, 80000 samples: 14 segments, the two windows overlap but differ


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(tiny_synchformer_dir(tmp_path_factory.mktemp("synchformer"), seed=0))


@pytest.fixture(scope="module")
def media():
    g = torch.Generator().manual_seed(0)
    t = int(25 * 5.6)
    videos = [
        torch.randint(0, 256, (t, 3, 48, 64), dtype=torch.uint8, generator=g),
        (torch.arange(t).view(t, 1, 1, 1) * 7 + torch.arange(64).view(1, 1, 1, 64) * 4)
        .expand(t, 3, 48, 64)
        .remainder(256)
        .to(torch.uint8),
        torch.randint(0, 256, (t, 3, 72, 40), dtype=torch.uint8, generator=g),
    ]
    x = torch.arange(int(5.6 * 22050)) / 22050  # 22.05 kHz stereo: the reward and the reference resample
    audio = [
        torch.stack([0.1 * torch.randn(len(x), generator=g), 0.2 * torch.sin(2 * np.pi * 300 * x)]),
        torch.stack(
            [0.5 * torch.sin(2 * np.pi * 440 * x) * (x % 1 < 0.3) + 0.01 * torch.randn(len(x), generator=g)] * 2
        ),
        torch.stack([0.3 * torch.sin(2 * np.pi * 100 * x * x), 0.05 * torch.randn(len(x), generator=g)]),
    ]
    return videos, audio


def reference_video(frames: torch.Tensor, size: int) -> torch.Tensor:
    transform = v2.Compose(
        [
            v2.Resize(size, interpolation=v2.InterpolationMode.BICUBIC),
            v2.CenterCrop(size),
            v2.ToImage(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5]),
        ]
    )
    x = transform(frames[: int(25.0 * SECONDS)])
    count = (x.shape[0] - 16) // 8 + 1
    return torch.stack([x[i * 8 : i * 8 + 16] for i in range(count)])


def reference_wave(stereo: torch.Tensor, rate: int) -> torch.Tensor:
    return torchaudio.transforms.Resample(rate, 16000)(stereo.mean(dim=0))[: int(16000 * SECONDS)]


def reference_audio(stereo: torch.Tensor, rate: int) -> torch.Tensor:
    wave = reference_wave(stereo, rate)
    count = (wave.shape[0] - 10240) // 5120 + 1
    x = torch.stack([wave[i * 5120 : i * 5120 + 10240] for i in range(count)])
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=16000, win_length=400, hop_length=160, n_fft=1024, n_mels=128
    )
    x = torch.log(mel(x) + 1e-6)
    x = torch.nn.functional.pad(x, (0, 66 - x.shape[-1]))
    return (x - -4.2677393) / (2 * 4.5689974)


def reference_offsets(model, video: torch.Tensor, audio: torch.Tensor) -> tuple[float, float]:
    grid = torch.from_numpy(np.linspace(-2, 2, 21)).float()
    v, a = model.video_features(video), model.audio_features(audio)
    first = model.offset_logits(v[None, :14], a[None, :14]).argmax(-1)
    last = model.offset_logits(v[None, -14:], a[None, -14:]).argmax(-1)
    return grid[first].item(), grid[last].item()


def test_matches_the_reference_steps(model_dir, media):
    videos, audio = media
    reward = AVSync(model_dir, duration=SECONDS)
    got = reward(video=videos, audio=[a.numpy() for a in audio], audio_sample_rate=[22050] * 3)
    model = build_synchformer(model_dir)
    want = []
    with torch.inference_mode():
        for frames, stereo in zip(videos, audio):
            video, spec = reference_video(frames, 64), reference_audio(stereo, 22050)
            want.append(reference_offsets(model, video, spec))
    want = np.array(want, dtype=np.float32)
    np.testing.assert_array_equal(got.extras["offset_first"], want[:, 0])
    np.testing.assert_array_equal(got.extras["offset_last"], want[:, 1])
    desync = np.abs(want).mean(axis=1)
    np.testing.assert_allclose(got.extras["desync"], desync, atol=1e-7)
    np.testing.assert_allclose(got.rewards, -desync, atol=1e-7)
    assert len(set(want.ravel().tolist())) > 1  # the tiny model's offsets vary: the comparison can fail
    assert got.rewards.min() >= -2.0 and got.rewards.max() <= 0.0


def test_preprocessing_is_the_references(model_dir, media):
    from rewardzoo.rewards.video.av_sync import audio_segments, video_segments
    from rewardzoo.shared.audio import prepare_clips

    videos, audio = media
    for frames in videos:
        got = video_segments(frames, 25.0, SECONDS, "cpu", 64)
        torch.testing.assert_close(got, reference_video(frames, 64), atol=0, rtol=0)
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=16000, win_length=400, hop_length=160, n_fft=1024, n_mels=128
    )
    clips, _ = prepare_clips([a.numpy() for a in audio], [22050] * 3, target_rate=16000, mono=True)
    for clip, stereo in zip(clips, audio):
        wave = reference_wave(stereo, 22050)
        # the engine mixes down, then resamples in blocks: the same samples to float32 rounding
        torch.testing.assert_close(torch.tensor(clip).reshape(-1)[: wave.shape[0]], wave, atol=1e-5, rtol=0)
        torch.testing.assert_close(audio_segments(wave, mel), reference_audio(stereo, 22050), atol=1e-5, rtol=0)


def test_other_frame_rates_pick_the_nearest_frame():
    from rewardzoo.rewards.video.av_sync import frames_at_25

    assert frames_at_25(10, 25.0) == list(range(10))
    assert frames_at_25(10, 50.0) == [0, 2, 4, 6, 8]
    assert frames_at_25(6, 30.0) == [0, 1, 2, 4, 5]  # 0, 1.2, 2.4, 3.6, 4.8 -> nearest


def test_loader_processor_and_errors(model_dir, media, tmp_path):
    videos, audio = media
    reward = load_reward({"name": "av_sync", "model_path": model_dir, "device": "cpu"}, duration=SECONDS)
    assert isinstance(reward, AVSync)
    with pytest.raises(InputError, match="4.8 s"):
        reward(video=[videos[0][:100]], audio=[audio[0].numpy()], audio_sample_rate=[22050])
    with pytest.raises(ConfigError, match="duration"):
        load_reward({"name": "av_sync", "model_path": model_dir, "device": "cpu"}, duration=3.0)
    with pytest.raises(ConfigError, match=WEIGHTS_FILE):
        AVSync(str(tmp_path))


def test_processor_matches_a_direct_call(model_dir, media):
    from rewardzoo.core.processor import RewardProcessor
    from rewardzoo.spec.sample import Sample

    videos, audio = media
    entry = {
        "name": "av_sync",
        "model_path": model_dir,
        "device": "cpu",
        "batch_size": 2,
        "kwargs": {"duration": SECONDS},
    }
    proc = RewardProcessor([entry])
    samples = [Sample(video=v, audio=a.numpy(), audio_sample_rate=22050) for v, a in zip(videos, audio)]
    got = proc(samples).rewards["av_sync"]
    want = AVSync(model_dir, duration=SECONDS)(
        video=videos, audio=[a.numpy() for a in audio], audio_sample_rate=[22050] * 3
    )
    np.testing.assert_array_equal(got, want.rewards)
