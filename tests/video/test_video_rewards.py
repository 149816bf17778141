"""Video rewards against independent references.

- flickering: a NumPy transcription of VBench's per-pair MAE on 8-bit frames, and analytic cases;
- subject consistency: the transformers model called directly on torchvision's VBench-style transform,
  then VBench's frame loop with ``F.cosine_similarity``; the formula alone against a NumPy loop;
- background consistency / video CLIP score / video aesthetic: open_clip's own model and PIL transform
  (``create_model_and_transforms``), with the aesthetic head applied by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from rewardzoo.core.loader import RewardLoader
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.errors import InputError
from rewardzoo.rewards.video.consistency import BackgroundConsistency, SubjectConsistency, vbench_consistency
from rewardzoo.rewards.video.flickering import TemporalFlickering
from rewardzoo.shared.video import read_video, sample_indices
from rewardzoo.spec.sample import Sample

from .media import textured_frames


def as_tensor(arr: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(arr)).permute(0, 3, 1, 2).float() / 255


def forms(arr: np.ndarray, path) -> dict:
    t = torch.from_numpy(arr).permute(0, 3, 1, 2)
    return {
        "file": str(path),
        "pil": [Image.fromarray(f) for f in arr],
        "numpy": arr,
        "tensor": t.float() / 255,
        "tensor_uint8": t,
    }


def score(spec: dict, videos: list, prompts=None) -> np.ndarray:
    proc = RewardProcessor([{**spec, "device": "cpu"}])
    samples = [Sample(video=v, prompt=None if prompts is None else prompts[i]) for i, v in enumerate(videos)]
    return proc(samples).rewards[spec["name"]].astype(np.float64)


# ----------------------------------------------------------------------------------- flickering


def vbench_flicker(frames: np.ndarray) -> float:
    """VBench: mean over consecutive pairs of mean |a - b| (float32 pixels), then (255 - m) / 255."""
    maes = [
        np.mean(np.abs(frames[i].astype(np.float32) - frames[i + 1].astype(np.float32))) for i in range(len(frames) - 1)
    ]
    return (255.0 - float(np.mean(maes))) / 255.0


@pytest.mark.parametrize("t", [2, 3, 7])
def test_flicker_analytic(t):
    frame = np.random.default_rng(t).integers(0, 256, (1, 16, 16, 3), dtype=np.uint8)
    black_white = np.zeros((t, 16, 16, 3), np.uint8)
    black_white[1::2] = 255
    out = TemporalFlickering()(video=[as_tensor(np.repeat(frame, t, 0)), as_tensor(black_white)]).rewards
    assert out == [1.0, 0.0]


@pytest.mark.parametrize("t,seed", [(2, 0), (3, 1), (12, 2), (30, 3)])
def test_flicker_matches_vbench(t, seed):
    frames = textured_frames(t=t, seed=seed)
    got = TemporalFlickering()(video=[as_tensor(frames)]).rewards[0]
    assert got == pytest.approx(vbench_flicker(frames), abs=1e-6)


def test_flicker_input_forms_give_the_same_score(media_dir):
    path = media_dir / "textured.mp4"
    decoded = read_video(path, backend="pyav")
    scores = {
        name: score({"name": "video_temporal_flickering"}, [value])[0] for name, value in forms(decoded, path).items()
    }
    for name, value in scores.items():
        assert value == pytest.approx(vbench_flicker(decoded), abs=1e-6), name


def test_flicker_num_frames_samples_uniformly(media_dir):
    from .media import ramp_frames  # frame i is the gray level 8 * i

    frames = ramp_frames()  # 30 frames; 4 uniform picks are round(linspace(0, 29, 4)) = 0, 10, 19, 29
    got = score({"name": "video_temporal_flickering", "kwargs": {"num_frames": 4}}, [frames])[0]
    assert got == pytest.approx(vbench_flicker(frames[[0, 10, 19, 29]]), abs=1e-6)
    got_all = score({"name": "video_temporal_flickering"}, [frames])[0]
    assert got_all == pytest.approx(1 - 8 / 255, abs=1e-6)


@pytest.mark.parametrize("name", ["video_temporal_flickering", "video_subject_consistency"])
def test_single_frame_is_an_input_error_naming_reward_field_sample(name, dino_dirs):
    spec = {"name": name, "model_path": dino_dirs["vit"] if "consistency" in name else None}
    spec = {k: v for k, v in spec.items() if v is not None}
    one = np.zeros((1, 16, 16, 3), np.uint8)
    two = np.zeros((2, 16, 16, 3), np.uint8)
    with pytest.raises(InputError, match="at least 2 frames") as info:
        score(spec, [two, one])
    assert (info.value.reward, info.value.field, info.value.sample) == (name, "video", 1)


def test_bad_video_through_the_processor_is_located(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"nope" * 100)
    ok = np.zeros((3, 16, 16, 3), np.uint8)
    mixed = [np.zeros((16, 16, 3), np.uint8), np.zeros((16, 18, 3), np.uint8)]
    for video, message in [(str(bad), "cannot read"), (mixed, "differ in size"), ([], "no frames")]:
        with pytest.raises(InputError, match=message) as info:
            score({"name": "video_temporal_flickering"}, [ok, video])
        assert (info.value.reward, info.value.field, info.value.sample) == ("video_temporal_flickering", "video", 1)


# ------------------------------------------------------------------------------ consistency


def numpy_vbench_consistency(features: np.ndarray) -> float:
    f = features / np.linalg.norm(features, axis=1, keepdims=True)
    total = 0.0
    for i in range(1, len(f)):
        total += (max(0.0, float(f[i - 1] @ f[i])) + max(0.0, float(f[0] @ f[i]))) / 2
    return total / (len(f) - 1)


@pytest.mark.parametrize("t", [2, 3, 10])
@pytest.mark.parametrize("seed", [0, 1])
def test_consistency_formula_matches_numpy_loop(t, seed):
    feats = np.random.default_rng(seed).normal(size=(t, 16))  # random directions: some cosines negative
    feats[1] = -feats[0]  # force a clamped pair
    assert vbench_consistency(torch.from_numpy(feats)) == pytest.approx(numpy_vbench_consistency(feats), abs=1e-12)


def _dino_reference(model_dir: str, frames: np.ndarray) -> float:
    """VBench's computation with the model called directly: transform, CLS feature, per-frame loop."""
    from torchvision import transforms as T
    from transformers import AutoModel

    model = AutoModel.from_pretrained(model_dir).eval()
    tf = T.Compose([T.Resize(224, antialias=False), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    x = tf(as_tensor(frames))
    kwargs = {"interpolate_pos_encoding": True} if model.config.model_type == "vit" else {}
    with torch.no_grad():
        feats = [
            F.normalize(model(pixel_values=x[i : i + 1], **kwargs).last_hidden_state[:, 0], dim=-1)
            for i in range(len(x))
        ]
    total = 0.0
    for i in range(1, len(feats)):
        total += (
            max(0.0, F.cosine_similarity(feats[i - 1], feats[i]).item())
            + max(0.0, F.cosine_similarity(feats[0], feats[i]).item())
        ) / 2
    return total / (len(feats) - 1)


@pytest.mark.parametrize("arch", ["vit", "dinov2"])
@pytest.mark.parametrize("t", [2, 3, 9])
def test_subject_consistency_matches_direct_model(dino_dirs, arch, t):
    frames = textured_frames(t=t, seed=t)
    reward = SubjectConsistency(dino_dirs[arch], num_frames=None, frame_batch_size=4)
    got = reward(video=[as_tensor(frames)]).rewards[0]
    assert got == pytest.approx(_dino_reference(dino_dirs[arch], frames), abs=1e-5)
    assert 0.0 <= got < 0.999  # the tiny models separate these frames (else the check is vacuous)


@pytest.mark.parametrize("arch", ["vit", "dinov2"])
def test_subject_consistency_identical_frames_is_one(dino_dirs, arch):
    frame = textured_frames(t=1, seed=5)
    out = SubjectConsistency(dino_dirs[arch])(video=[as_tensor(np.repeat(frame, 4, 0))]).rewards
    assert out[0] == pytest.approx(1.0, abs=1e-6)


def test_consistency_input_forms_and_frame_counts(media_dir, dino_dirs):
    path = media_dir / "textured.mp4"  # 12 frames
    decoded = read_video(path, backend="pyav")
    spec = {"name": "video_subject_consistency", "model_path": dino_dirs["vit"], "kwargs": {"num_frames": 5}}
    by_form = score(spec, list(forms(decoded, path).values()))
    np.testing.assert_allclose(by_form, by_form[0], atol=1e-5)
    expected = _dino_reference(dino_dirs["vit"], decoded[sample_indices(12, 5)])
    assert by_form[0] == pytest.approx(expected, abs=1e-5)
    # frame counts 2 and many in one call, with an all-frames reward
    spec_all = {"name": "video_subject_consistency", "model_path": dino_dirs["vit"], "kwargs": {"num_frames": None}}
    got = score(spec_all, [decoded[:2], decoded])
    assert got[0] == pytest.approx(_dino_reference(dino_dirs["vit"], decoded[:2]), abs=1e-5)
    assert got[1] == pytest.approx(_dino_reference(dino_dirs["vit"], decoded), abs=1e-5)


def _open_clip_reference(clip_dir: str):
    import open_clip

    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{clip_dir}")
    return model.eval(), preprocess, open_clip.get_tokenizer(f"local-dir:{clip_dir}")


def _open_clip_frame_features(clip_dir: str, frames: np.ndarray) -> torch.Tensor:
    model, preprocess, _ = _open_clip_reference(clip_dir)
    with torch.no_grad():
        x = torch.stack([preprocess(Image.fromarray(f)) for f in frames])
        return F.normalize(model.encode_image(x), dim=-1)


@pytest.mark.parametrize("t", [2, 6])
def test_background_consistency_matches_open_clip(clip_dir, t):
    # unrelated textures, so the tiny random model's score is clearly below 1 (about 0.98)
    frames = np.concatenate([textured_frames(t=1, height=80, width=96, seed=10 * t + k) for k in range(t)])
    feats = _open_clip_frame_features(clip_dir, frames).numpy().astype(np.float64)
    got = BackgroundConsistency(clip_dir, num_frames=None)(video=[as_tensor(frames)]).rewards[0]
    # our tensor resize and open_clip's PIL resize agree to rounding (~1e-5 here), not bit for bit
    assert got == pytest.approx(numpy_vbench_consistency(feats), abs=1e-4)
    assert got < 0.999
    same = BackgroundConsistency(clip_dir)(video=[as_tensor(np.repeat(frames[:1], 3, 0))]).rewards[0]
    assert same == pytest.approx(1.0, abs=1e-6)


# --------------------------------------------------------------------------- frame averages


def test_video_clip_score_matches_open_clip_and_shares_the_image_model(clip_dir):
    model, preprocess, tokenizer = _open_clip_reference(clip_dir)
    videos = [textured_frames(t=3, seed=1), textured_frames(t=5, height=64, width=64, seed=2)]
    prompts = ["a red fox", "an empty street at night"]
    expected = []
    for frames, prompt in zip(videos, prompts):
        with torch.no_grad():
            img = F.normalize(model.encode_image(torch.stack([preprocess(Image.fromarray(f)) for f in frames])), dim=-1)
            txt = F.normalize(model.encode_text(tokenizer(["A photo depicts " + prompt])), dim=-1)
        expected.append(float((2.5 * (img @ txt.T).clamp(min=0)).mean()))

    loader = RewardLoader()
    image_reward = loader.load({"name": "clip_score", "model_path": clip_dir, "device": "cpu"})
    proc = RewardProcessor(
        [
            {
                "name": "video_clip_score",
                "model_path": clip_dir,
                "device": "cpu",
                "kwargs": {"num_frames": None, "frame_batch_size": 4},
            }
        ],  # chunks cross videos
        loader,
    )
    result = proc([Sample(video=v, prompt=p) for v, p in zip(videos, prompts)])
    np.testing.assert_allclose(result.rewards["video_clip_score"], expected, rtol=1e-3)
    assert loader.constructions == 2  # the video reward reuses the clip_score instance
    assert proc.rewards["video_clip_score"].image_reward is image_reward


def test_video_aesthetic_matches_head_on_open_clip_features(clip_dir, aesthetic_head):
    from safetensors.torch import load_file

    state = load_file(aesthetic_head)
    frames = textured_frames(t=10, seed=3)
    picked = frames[[0, 3, 6, 9]]  # round(linspace(0, 9, 4))
    emb = _open_clip_frame_features(clip_dir, picked)
    x = emb
    for i in (0, 2, 4, 6, 7):  # the v2 head: linear layers only (dropout is a no-op in eval)
        x = x @ state[f"layers.{i}.weight"].T + state[f"layers.{i}.bias"]
    spec = {
        "name": "video_aesthetic",
        "model_path": aesthetic_head,
        "kwargs": {"num_frames": 4, "clip_model": clip_dir, "clip_pretrained": None},
    }
    got = score(spec, [frames])[0]
    assert got == pytest.approx(float(x.mean()), rel=1e-3)


def test_frame_average_reports_bad_frames_and_options(clip_dir):
    from rewardzoo import load_reward
    from rewardzoo.errors import ConfigError

    entry = {"name": "video_clip_score", "model_path": clip_dir, "device": "cpu"}
    with pytest.raises(ConfigError, match="no option 'colour'"):
        load_reward(entry, colour=1)
    reward = load_reward(entry)
    with pytest.raises(InputError, match="1 video but 0 prompt") as info:
        reward(video=[torch.rand(2, 3, 32, 32)], prompt=[])
    assert info.value.field == "prompt"
    with pytest.raises(InputError, match=r"frame 1: .*\[0, 1\]") as info:
        reward(
            video=[torch.rand(2, 3, 32, 32), torch.stack([torch.rand(3, 32, 32), torch.full((3, 32, 32), 2.0)])],
            prompt=["a", "b"],
        )
    assert (info.value.field, info.value.sample) == ("video", 1)
