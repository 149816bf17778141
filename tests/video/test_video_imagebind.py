"""imagebind_score against Flow-Factory a0b2bc5's own ImageBind reward on a tiny ImageBind.

The model is ImageBind's own ``ImageBindModel`` (the ``imagebind-unofficial`` release of Meta's code), built
tiny and random (``rewardzoo.testing.tiny_imagebind_dir``: ``config.json`` + ``model.safetensors``) and loaded
through ``model_path``. The reference is Flow-Factory's ``ImageBindRewardModel.__call__`` itself (its
preprocessing, tokenizer and similarity), run on a second copy of the same weights built by ImageBind's own
classes; its constructor downloads the huge checkpoint, so the instance is made without it and given the
attributes its ``__init__`` sets (model, mode, weights, device). Its snapshot imports ``imagebind.data``, which
needs a pytorchvideo that imports with our torchvision (``jj-pytorchvideo``, installed by ``scripts/test``);
without it those tests skip and say why.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

if importlib.util.find_spec("imagebind") is None:
    pytest.skip("ImageBind's code is not installed (the imagebind extra)", allow_module_level=True)

from rewardzoo import load_reward
from rewardzoo.catalog.extras import requirements
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.registry import builtin
from rewardzoo.rewards.video.imagebind import DEFAULT_WEIGHTS, ImageBindScore, imagebind_modules
from rewardzoo.shared.weights import load_state_dict
from rewardzoo.spec.sample import Sample
from rewardzoo.testing import tiny_imagebind_dir
from tests.clients import client_module

PROMPTS = ["a dog barking in a park", "rain on a tin roof", "a violin solo", "a dog barking in a park"]
#: (frames, height, width): landscape, portrait, a single frame, a square video of 30 frames.
SHAPES = [(16, 64, 96), (9, 80, 48), (1, 40, 40), (30, 50, 50)]
SECONDS = [3.0, 2.0, 6.5, 2.4]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(tiny_imagebind_dir(tmp_path_factory.mktemp("imagebind"), seed=3))


@pytest.fixture(scope="module")
def media():
    g = torch.Generator().manual_seed(0)
    videos = [torch.randint(0, 256, (t, 3, h, w), dtype=torch.uint8, generator=g) for t, h, w in SHAPES]
    t = [torch.arange(int(s * 48000)) / 48000 for s in SECONDS]
    audio = [  # stereo 48 kHz: the reward and the reference mix down and resample to 16 kHz
        torch.stack([0.3 * torch.sin(2 * np.pi * (200 + 150 * i) * x), 0.1 * torch.randn(len(x), generator=g)])
        for i, x in enumerate(t)
    ]
    return videos, audio


def flow_factory(model_dir: str, mode: str, weights: dict | None = None):
    """Flow-Factory's reward object with the tiny weights, built by ImageBind's own classes."""
    module = client_module("flow_factory", "flow_factory.rewards.imagebind_reward")
    import json
    from pathlib import Path

    ib, _ = imagebind_modules()
    model = ib.ImageBindModel(**json.loads((Path(model_dir) / "config.json").read_text()))
    model.load_state_dict(load_state_dict(Path(model_dir) / "model.safetensors"))
    ref = object.__new__(module.ImageBindRewardModel)  # its __init__ downloads imagebind_huge
    ref.model, ref.mode, ref.device = model.eval(), mode, "cpu"
    ref.weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
    return ref


@pytest.mark.parametrize("mode", ["audio_video", "text_audio", "text_video", "all"])
def test_matches_flow_factory(model_dir, media, mode):
    videos, audio = media
    ref = flow_factory(model_dir, mode)
    want = ref(prompt=PROMPTS, audio=audio, video=videos, audio_sample_rate=[48000] * 4).rewards.numpy()
    reward = ImageBindScore(model_dir, mode=mode)
    got = reward(
        prompt=PROMPTS,
        video=[v.float() / 255 for v in videos],  # the engine's float frames
        audio=[a.numpy() for a in audio],
        audio_sample_rate=[48000] * 4,
    )
    np.testing.assert_allclose(got.rewards, want, atol=2e-6)
    assert np.ptp(got.rewards) > 1e-3  # the samples make a difference
    pairs = list(DEFAULT_WEIGHTS) if mode == "all" else [mode]
    assert sorted(got.extras) == sorted(f"{p}_similarity" for p in pairs)
    if mode == "all":
        total = sum(w * got.extras[f"{p}_similarity"] for p, w in DEFAULT_WEIGHTS.items())
        np.testing.assert_allclose(got.rewards, total, atol=1e-6)


def test_configured_weights_match_flow_factory(model_dir, media):
    videos, audio = media
    weights = {"audio_video": 1.0, "text_audio": -0.5, "text_video": 2.0}
    want = flow_factory(model_dir, "all", weights)(
        prompt=PROMPTS, audio=audio, video=videos, audio_sample_rate=[48000] * 4
    ).rewards.numpy()
    got = ImageBindScore(model_dir, mode="all", weights=weights)(
        prompt=PROMPTS, video=list(videos), audio=list(audio), audio_sample_rate=[48000] * 4
    )
    np.testing.assert_allclose(got.rewards, want, atol=2e-6)


def test_a_subset_of_pairs_needs_only_their_fields(model_dir, media):
    videos, _ = media
    reward = ImageBindScore(model_dir, mode="all", weights={"text_video": 1.0})
    assert reward.inputs.fields == ("prompt", "video")
    got = reward(prompt=PROMPTS, video=list(videos))
    alone = ImageBindScore(model_dir, mode="text_video")(prompt=PROMPTS, video=list(videos))
    np.testing.assert_allclose(got.rewards, alone.rewards, atol=1e-7)
    assert list(got.extras) == ["text_video_similarity"]


def test_processor_scores_video_and_audio_in_one_call(model_dir, media):
    videos, audio = media
    entry = {"name": "imagebind_score", "model_path": model_dir, "device": "cpu", "batch_size": 8}
    proc = RewardProcessor([{**entry, "kwargs": {"mode": "all"}}])
    (reward,) = proc.rewards.values()
    samples = [
        Sample(prompt=p, video=v, audio=a.numpy(), audio_sample_rate=48000) for p, v, a in zip(PROMPTS, videos, audio)
    ]
    calls = []
    original = reward.model.forward

    def forward(inputs):
        calls.append(sorted(inputs))
        return original(inputs)

    reward.model.forward = forward
    given = []
    video_clips = reward._video
    reward._video = lambda video: given.extend(v.dtype for v in video) or video_clips(video)
    result = proc(samples)
    assert calls == [["audio", "text", "vision"]]  # one forward, the three modalities of every sample
    assert given == [torch.uint8] * 4  # the engine's native form: only the frames the clips use are converted
    want = ImageBindScore(model_dir, mode="all")(
        prompt=PROMPTS, video=[v.float() / 255 for v in videos], audio=list(audio), audio_sample_rate=[48000] * 4
    )
    np.testing.assert_allclose(result.rewards["imagebind_score"], want.rewards, atol=1e-6)
    for pair in DEFAULT_WEIGHTS:
        np.testing.assert_allclose(
            result.extras["imagebind_score"][f"{pair}_similarity"], want.extras[f"{pair}_similarity"], atol=1e-6
        )


def test_missing_audio_names_reward_field_and_sample(model_dir, media):
    videos, audio = media
    proc = RewardProcessor([{"name": "imagebind_score", "model_path": model_dir, "device": "cpu"}])
    samples = [Sample(prompt="x", video=videos[0], audio=audio[0].numpy(), audio_sample_rate=48000),
               Sample(prompt="y", video=videos[1])]  # fmt: skip
    with pytest.raises(InputError) as info:
        proc(samples)
    assert (info.value.reward, info.value.field, info.value.sample) == ("imagebind_score", "audio", 1)
    reward = ImageBindScore(model_dir)
    with pytest.raises(InputError, match="audio_video needs the sample's audio") as info:
        reward(video=list(videos[:2]), audio=[audio[0].numpy(), None], audio_sample_rate=[48000, 48000])
    assert (info.value.field, info.value.sample) == ("audio", 1)


def test_audio_shorter_than_a_clip_is_an_input_error(model_dir, media):
    videos, audio = media
    short = audio[0][:, : int(1.5 * 48000)].numpy()
    proc = RewardProcessor([{"name": "imagebind_score", "model_path": model_dir, "device": "cpu"}])
    samples = [Sample(video=videos[0], audio=audio[0].numpy(), audio_sample_rate=48000),
               Sample(video=videos[1], audio=short, audio_sample_rate=48000)]  # fmt: skip
    with pytest.raises(InputError, match="shorter than ImageBind's clip length") as info:
        proc(samples)
    assert (info.value.reward, info.value.field, info.value.sample) == ("imagebind_score", "audio", 1)
    # a lower floor accepts it, and the clip is zero-padded as the references pad it
    ref = flow_factory(model_dir, "audio_video")
    want = ref(prompt=["x"], audio=[torch.from_numpy(short)], video=[videos[1]], audio_sample_rate=[48000])
    got = ImageBindScore(model_dir, min_audio_seconds=1.0)(video=[videos[1]], audio=[short], audio_sample_rate=[48000])
    np.testing.assert_allclose(got.rewards, want.rewards.numpy(), atol=2e-6)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"mode": "audio_text"}, "kwargs.mode"),
        ({"weights": {"audio_video": 1.0}}, "kwargs.weights"),
        ({"mode": "all", "weights": {"video_audio": 1.0}}, "kwargs.weights"),
        ({"mode": "all", "weights": {"audio_video": float("nan")}}, "kwargs.weights"),
        ({"mode": "all", "weights": {}}, "kwargs.weights"),
        ({"min_audio_seconds": 0}, "kwargs.min_audio_seconds"),
    ],
)
def test_bad_options_are_config_errors(model_dir, kwargs, field):
    with pytest.raises(ConfigError) as info:
        load_reward({"name": "imagebind_score", "model_path": model_dir, "device": "cpu", "kwargs": kwargs})
    assert info.value.field == field


def test_weights_load_from_a_pth_file_with_a_config_beside_nothing(model_dir, tmp_path):
    """A bare weights file is the huge architecture: a tiny state dict in it does not fit, and says so."""
    state = load_state_dict(f"{model_dir}/model.safetensors")
    torch.save(state, tmp_path / "imagebind_huge.pth")
    with pytest.raises(ConfigError, match="cannot load the ImageBind model"):
        ImageBindScore(str(tmp_path / "imagebind_huge.pth"))
    (tmp_path / "config.json").write_text((__import__("pathlib").Path(model_dir) / "config.json").read_text())
    a = ImageBindScore(str(tmp_path), mode="text_video")  # a directory: config.json + imagebind_huge.pth
    b = ImageBindScore(model_dir, mode="text_video")
    video = [torch.rand(4, 3, 32, 48)]
    np.testing.assert_array_equal(a(prompt=["x"], video=video).rewards, b(prompt=["x"], video=video).rewards)


def test_card_says_non_commercial_and_the_extra_is_not_in_all():
    info = builtin()["imagebind_score"]
    assert info.extra == "imagebind" and info.dtype_source and info.download
    assert "NON-COMMERCIAL" in info.summary and "CC-BY-NC-SA 4.0" in (info.license or "")
    assert "imagebind-unofficial" in requirements()["imagebind"]
    assert "imagebind-unofficial" not in requirements()["all"]
