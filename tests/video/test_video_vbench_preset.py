"""``preset: vbench`` against re-computations that follow VBench's own pipeline step by step.

VBench (vbench/utils.py ``load_video``): 8-bit frames -> ``torch.Tensor`` (float32 holding 0-255) ->
(T, C, H, W); ``dino_transform(224)`` = Resize(224, antialias=False) -> x.float() / 255 -> ImageNet
Normalize; ``clip_transform(224)`` = Resize(224, BICUBIC, antialias=False) -> CenterCrop(224) -> / 255
-> CLIP Normalize. The consistency loop sums (max(0, cos(prev, f_i)) + max(0, cos(first, f_i))) / 2 over
i >= 1 and divides by len - 1. Tiny random-init models (rewardzoo.testing).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms as T

from rewardzoo.errors import ConfigError
from rewardzoo.rewards.video.consistency import BackgroundConsistency, SubjectConsistency
from rewardzoo.rewards.video.vbench import middle_indices

from .media import textured_frames

BICUBIC = T.InterpolationMode.BICUBIC


def as_tensor(arr: np.ndarray) -> torch.Tensor:  # rewardzoo's float frames in [0, 1]
    return torch.from_numpy(np.ascontiguousarray(arr)).permute(0, 3, 1, 2).float() / 255


def vbench_load(arr: np.ndarray) -> torch.Tensor:  # load_video: float32 0-255, (T, C, H, W)
    return torch.Tensor(arr.astype(np.uint8)).permute(0, 3, 1, 2)


def dino_transform(n_px: int):
    return T.Compose(
        [
            T.Resize(size=n_px, antialias=False),
            T.Lambda(lambda x: x.float().div(255.0)),
            T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ]
    )


def clip_transform(n_px: int):
    return T.Compose(
        [
            T.Resize(n_px, interpolation=BICUBIC, antialias=False),
            T.CenterCrop(n_px),
            T.Lambda(lambda x: x.float().div(255.0)),
            T.Normalize((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
        ]
    )


def vbench_loop(features: list[torch.Tensor]) -> float:
    video_sim = 0.0
    first = former = None
    for i, feat in enumerate(features):
        if i == 0:
            first = feat
        else:
            sim_pre = max(0.0, F.cosine_similarity(former, feat).item())
            sim_fir = max(0.0, F.cosine_similarity(first, feat).item())
            video_sim += (sim_pre + sim_fir) / 2
        former = feat
    return video_sim / (len(features) - 1)


def frames_of(t: int, seed: int) -> np.ndarray:  # non-square, so the resize and the crop both act
    return np.concatenate([textured_frames(t=1, height=72, width=100, seed=seed + k) for k in range(t)])


@pytest.mark.parametrize("arch", ["vit", "dinov2"])
@pytest.mark.parametrize("t", [2, 7])
def test_subject_preset_matches_vbench(dino_dirs, arch, t):
    from transformers import AutoModel

    frames = frames_of(t, 3 * t)
    model = AutoModel.from_pretrained(dino_dirs[arch]).eval()
    kwargs = {"interpolate_pos_encoding": True} if model.config.model_type == "vit" else {}
    images = dino_transform(224)(vbench_load(frames))
    with torch.no_grad():
        feats = [
            F.normalize(model(pixel_values=images[i : i + 1], **kwargs).last_hidden_state[:, 0], dim=-1, p=2)
            for i in range(len(images))
        ]
    expected = vbench_loop(feats)
    got = SubjectConsistency(dino_dirs[arch], preset="vbench", frame_batch_size=3)(video=[as_tensor(frames)])
    assert got.rewards[0] == pytest.approx(expected, abs=1e-6)
    assert got.rewards[0] < 0.999


@pytest.mark.parametrize("t", [2, 6])
def test_background_preset_matches_vbench(clip_dir, t):
    import open_clip

    frames = frames_of(t, 50 + t)
    model = open_clip.create_model_and_transforms(f"local-dir:{clip_dir}")[0].eval()
    size = model.visual.image_size[0] if isinstance(model.visual.image_size, tuple) else model.visual.image_size
    images = clip_transform(size)(vbench_load(frames))
    with torch.no_grad():
        feats = F.normalize(model.encode_image(images), dim=-1, p=2)
    expected = vbench_loop([feats[i : i + 1] for i in range(len(feats))])
    preset = BackgroundConsistency(clip_dir, preset="vbench")
    got = preset(video=[as_tensor(frames)]).rewards[0]
    assert got == pytest.approx(expected, abs=1e-6)
    default = BackgroundConsistency(clip_dir, num_frames=None)(video=[as_tensor(frames)]).rewards[0]
    assert abs(default - expected) > 1e-7  # the antialiased default is a different number


def test_preset_scores_every_frame_and_checks_options(dino_dirs, clip_dir):
    assert SubjectConsistency(dino_dirs["vit"], preset="vbench").num_frames is None
    assert SubjectConsistency(dino_dirs["vit"], preset="vbench", num_frames=None).num_frames is None
    with pytest.raises(ConfigError, match="num_frames"):
        SubjectConsistency(dino_dirs["vit"], preset="vbench", num_frames=4)
    with pytest.raises(ConfigError, match="preset"):
        BackgroundConsistency(clip_dir, preset="VBench-2")


def test_middle_indices_follow_vbench():
    def reference(num_frames, vlen):  # get_frame_indices(sample="middle"), reimplemented
        acc = min(num_frames, vlen)
        intervals = np.linspace(start=0, stop=vlen, num=acc + 1).astype(int)
        ranges = [(v, intervals[i + 1] - 1) for i, v in enumerate(intervals[:-1])]
        idx = [(a + b) // 2 for a, b in ranges]
        if len(idx) < num_frames:
            idx = idx + [idx[-1]] * (num_frames - len(idx))
        return [int(i) for i in idx]

    for vlen in (1, 3, 8, 9, 16, 17, 49, 100):
        assert middle_indices(8, vlen) == reference(8, vlen)


# ------------------------------------------------------------------------- CLIP-T and aesthetic quality


def vbench_read_middle(arr: np.ndarray, num_frames: int = 8) -> torch.Tensor:
    """read_frames_decord_by_fps(num_frames=8, sample="middle"): uint8 (T, C, H, W) at the interval midpoints."""
    vlen = len(arr)
    acc = min(num_frames, vlen)
    intervals = np.linspace(start=0, stop=vlen, num=acc + 1).astype(int)
    ranges = [(v, intervals[i + 1] - 1) for i, v in enumerate(intervals[:-1])]
    idx = [(a + b) // 2 for a, b in ranges]
    if len(idx) < num_frames:
        idx = idx + [idx[-1]] * (num_frames - len(idx))
    return torch.from_numpy(arr[idx]).permute(0, 3, 1, 2)


def _open_clip(clip_dir):
    import open_clip

    model = open_clip.create_model_and_transforms(f"local-dir:{clip_dir}")[0].eval()
    size = model.visual.image_size[0] if isinstance(model.visual.image_size, tuple) else model.visual.image_size
    return model, size, open_clip.get_tokenizer(f"local-dir:{clip_dir}")


@pytest.mark.parametrize("t", [5, 19])
def test_clip_t_preset_matches_vbench(clip_dir, t):
    from rewardzoo.core.loader import RewardLoader

    model, size, tokenizer = _open_clip(clip_dir)
    videos = [frames_of(t, 70 + t), frames_of(3, 90)]
    prompts = ["a red fox", "an empty street at night"]
    expected = []
    for arr, prompt in zip(videos, prompts):
        with torch.no_grad():
            text_feature = F.normalize(model.encode_text(tokenizer([prompt])), dim=-1)
            images = clip_transform(size)(vbench_read_middle(arr))
            image_features = F.normalize(model.encode_image(images), dim=-1, p=2)
            expected.append(float(np.mean((image_features @ text_feature.T).tolist())))
    reward = RewardLoader().load(
        {
            "name": "video_clip_score",
            "model_path": clip_dir,
            "device": "cpu",
            "kwargs": {"preset": "vbench", "frame_batch_size": 3},
        }
    )
    assert reward.num_frames is None  # the preset samples VBench's 8 midpoints itself
    out = reward(video=[as_tensor(v) for v in videos], prompt=prompts)
    np.testing.assert_allclose(out.extras["cosine"], expected, atol=1e-6)
    default = RewardLoader().load({"name": "video_clip_score", "model_path": clip_dir, "device": "cpu"})
    base = default(video=[as_tensor(v) for v in videos], prompt=prompts)
    assert not np.allclose(base.extras["cosine"], expected, atol=1e-6)  # prefix, frames and antialias differ


def test_aesthetic_preset_matches_vbench_with_v1_linear_head(clip_dir, aesthetic_head, tmp_path):
    from rewardzoo import testing as rzt
    from rewardzoo.core.loader import RewardLoader

    model, size, _ = _open_clip(clip_dir)
    dim = int(model.text_projection.shape[1]) if hasattr(model, "text_projection") else None
    head_path = rzt.linear_aesthetic_head_file(tmp_path / "sa_0_4_vit_l_14_linear.pth", seed=3, input_size=dim)
    state = torch.load(head_path, weights_only=True)
    assert set(state) == {"weight", "bias"}  # the published key names
    m = torch.nn.Linear(dim, 1)
    m.load_state_dict(state)
    m.eval()
    arr = frames_of(7, 120)
    images = vbench_load(arr)
    scores_list = []
    for i in range(0, len(images), 4):  # VBench batches frames; the batch size does not change the result
        image_batch = clip_transform(size)(images[i : i + 4])
        with torch.no_grad():
            image_feats = F.normalize(model.encode_image(image_batch).to(torch.float32), dim=-1, p=2)
            scores_list.append(m(image_feats).squeeze(dim=-1))
    expected = float(torch.mean(torch.cat(scores_list) / 10))
    reward = RewardLoader().load(
        {
            "name": "video_aesthetic",
            "model_path": aesthetic_head,
            "device": "cpu",
            "kwargs": {
                "preset": "vbench",
                "linear_head_path": str(head_path),
                "clip_model": clip_dir,
                "clip_pretrained": None,
                "frame_batch_size": 3,
            },
        }
    )
    assert reward.num_frames is None
    got = reward(video=[as_tensor(arr)]).rewards[0]
    assert got == pytest.approx(expected, abs=1e-6)


def test_linear_head_loader_rejects_other_files(aesthetic_head, clip_dir, tmp_path):
    from rewardzoo.core.loader import RewardLoader
    from rewardzoo.rewards.video.frame_scores import load_linear_aesthetic_head

    with pytest.raises(ConfigError, match="v1 linear head"):
        load_linear_aesthetic_head(aesthetic_head)  # a v2 MLP head
    with pytest.raises(ConfigError, match="linear_head_path"):
        RewardLoader().load(
            {
                "name": "video_aesthetic",
                "model_path": aesthetic_head,
                "device": "cpu",
                "kwargs": {"linear_head_path": aesthetic_head, "clip_model": clip_dir, "clip_pretrained": None},
            }
        )
