"""group_diversity and diversity_weighted against a re-computation with the backbone called directly
(transformers' DINO ViT, open_clip's own model and PIL preprocessing), GARDO's formula re-computed step by
step, batch invariance and bad-input errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
open_clip = pytest.importorskip("open_clip")

from PIL import Image

from rewardzoo import RewardProcessor, Sample, load_reward
from rewardzoo import testing as rzt
from rewardzoo.errors import ConfigError, InputError

SIDE = 64  # the tiny CLIP's input size: no resize, so PIL and tensor preprocessing agree


@pytest.fixture(scope="module")
def dino_dir(tmp_path_factory):
    return rzt.tiny_dino_dirs(tmp_path_factory.mktemp("dino"), seed=0)["vit"]


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    return str(rzt.tiny_open_clip_dir(tmp_path_factory.mktemp("oc") / "tiny-open-clip", seed=0))


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    out = [rng.integers(0, 256, (SIDE, SIDE, 3), dtype=np.uint8) for _ in range(7)]
    out[3] = out[2].copy()  # a duplicate inside the first group
    return out


def as_float(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(image).permute(2, 0, 1).float() / 255.0


def dino_reference(path: str, images: list[np.ndarray]) -> np.ndarray:
    """transformers' ViT called directly: bilinear resize (no antialias) to 224, ImageNet norm, CLS token."""
    model = transformers.ViTModel.from_pretrained(path, add_pooling_layer=False).eval()
    x = torch.stack([as_float(im) for im in images])
    x = torch.nn.functional.interpolate(x, size=(224, 224), mode="bilinear", align_corners=False, antialias=False)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    with torch.no_grad():
        feats = model(pixel_values=(x - mean) / std).last_hidden_state[:, 0].double().numpy()
    return feats / np.linalg.norm(feats, axis=1, keepdims=True)


def clip_reference(path: str, images: list[np.ndarray]) -> np.ndarray:
    """open_clip's own model and PIL preprocessing."""
    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{path}")
    x = torch.stack([preprocess(Image.fromarray(im)) for im in images])
    with torch.no_grad():
        feats = model.eval().encode_image(x).double().numpy()
    return feats / np.linalg.norm(feats, axis=1, keepdims=True)


def mean_distance(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: mean and min of 1 - cos to the other members, by explicit loops."""
    n = len(e)
    mean, nearest = np.zeros(n), np.zeros(n)
    for i in range(n):
        d = [1 - float(np.clip(e[i] @ e[j], -1, 1)) for j in range(n) if j != i]
        mean[i], nearest[i] = np.mean(d), np.min(d)
    return mean, nearest


GROUPS = ["a", "a", "a", "a", "b", "b", "c"]


@pytest.mark.parametrize("embedding", ["dino", "clip"])
def test_group_diversity_equals_the_backbone_called_directly(embedding, dino_dir, clip_dir, images):
    path = dino_dir if embedding == "dino" else clip_dir
    reward = load_reward({"name": "group_diversity", "model_path": path}, embedding=embedding)
    out = reward(image=[as_float(im) for im in images], group_id=GROUPS)
    ref = (dino_reference if embedding == "dino" else clip_reference)(path, images)
    expected, nearest = np.zeros(7), np.zeros(7)
    for g in ("a", "b"):
        idx = [i for i, k in enumerate(GROUPS) if k == g]
        expected[idx], nearest[idx] = mean_distance(ref[idx])
    np.testing.assert_allclose(out.rewards, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.extras["nearest_distance"], nearest, rtol=1e-5, atol=1e-6)
    assert out.extras["nearest_distance"][2] == pytest.approx(0.0, abs=1e-6)  # the duplicate
    assert out.rewards[6] == 0.0  # a group of one
    assert expected[:4].min() > 1e-3  # distinct random images are apart: the test can fail


def test_videos_average_their_frame_embeddings(dino_dir, images):
    reward = load_reward({"name": "group_diversity", "model_path": dino_dir}, media="video", num_frames=None)
    videos = [torch.stack([as_float(images[i]), as_float(images[i + 1])]) for i in range(3)]
    out = reward(video=videos, group_id=[0, 0, 0])
    frames = dino_reference(dino_dir, images[:4])
    means = np.stack([(frames[i] + frames[i + 1]) / 2 for i in range(3)])
    np.testing.assert_allclose(
        out.rewards, mean_distance(means / np.linalg.norm(means, axis=1, keepdims=True))[0], rtol=1e-5, atol=1e-6
    )


def test_scores_do_not_depend_on_the_other_groups_or_the_order(dino_dir, images):
    reward = load_reward({"name": "group_diversity", "model_path": dino_dir})
    floats = [as_float(im) for im in images]
    alone = reward(image=floats[:4], group_id=GROUPS[:4]).rewards
    together = reward(image=floats, group_id=GROUPS).rewards
    order = [6, 3, 5, 0, 4, 2, 1]
    shuffled = reward(image=[floats[i] for i in order], group_id=[GROUPS[i] for i in order]).rewards
    np.testing.assert_allclose(together[:4], alone, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(shuffled, together[order], rtol=1e-6, atol=1e-7)
    batched = load_reward({"name": "group_diversity", "model_path": dino_dir}, embed_batch_size=2)
    np.testing.assert_allclose(batched(image=floats, group_id=GROUPS).rewards, together, rtol=1e-6, atol=1e-7)


def test_through_the_processor_with_files_and_groups(dino_dir, images, tmp_path):
    paths = []
    for i, im in enumerate(images):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(im).save(paths[-1])
    proc = RewardProcessor([{"name": "div", "reward_model": "group_diversity", "model_path": dino_dir}])
    res = proc([Sample(image=str(p), group_id=g) for p, g in zip(paths, GROUPS)])
    ref = dino_reference(dino_dir, images)
    np.testing.assert_allclose(res.rewards["div"][:4], mean_distance(ref[:4])[0], rtol=1e-5, atol=1e-6)


def test_diversity_weighted_is_gardos_advantage(dino_dir, images):
    scores = [0.1, 0.9, 0.5, 0.7, 0.2, 0.4, 0.3]
    reward = load_reward({"name": "diversity_weighted", "model_path": dino_dir}, base="group_test_meta")
    meta = [json.dumps({"score": s}) for s in scores]
    out = reward(image=[as_float(im) for im in images], metadata=meta, group_id=GROUPS)
    ref = dino_reference(dino_dir, images)
    expected = np.zeros(7)
    for g in ("a", "b", "c"):
        idx = [i for i, k in enumerate(GROUPS) if k == g]
        s = np.array(scores)[idx]
        adv = s - s.mean()
        if len(idx) == 1:
            expected[idx] = adv
            continue
        e = ref[idx]
        sim = np.clip(e @ e.T, -1, 1)
        dist = 1 - sim
        nearest = np.array([np.min(np.delete(dist[i], i)) for i in range(len(idx))])  # GARDO: min over others
        weight = np.where(adv < 0, 1.0, nearest / nearest.mean())
        expected[idx] = adv * weight
    np.testing.assert_allclose(out.rewards, expected, rtol=1e-5, atol=1e-7)
    assert not np.allclose(out.rewards[:4], np.array(scores[:4]) - np.mean(scores[:4]))  # the weight acts
    np.testing.assert_allclose(out.extras["base_score"], scores)
    # below-mean samples keep their plain advantage
    below = [i for i in range(4) if scores[i] < np.mean(scores[:4])]
    assert all(out.extras["diversity_weight"][i] == 1.0 for i in below)


def test_diversity_weighted_over_a_lower_is_better_base_and_identical_members(dino_dir, images):
    reward = load_reward(
        {"name": "diversity_weighted", "model_path": dino_dir}, base="group_test_meta_lower", distance="mean"
    )
    same = [as_float(images[0])] * 3
    meta = [json.dumps({"score": s}) for s in (1.0, 2.0, 3.0)]
    out = reward(image=same, metadata=meta, group_id=[0, 0, 0])
    np.testing.assert_allclose(out.rewards, [1.0, 0.0, -1.0], atol=1e-9)  # mean(d) = 0: weight 1


def test_bad_inputs_and_options_are_typed_errors(dino_dir, images):
    reward = load_reward({"name": "group_diversity", "model_path": dino_dir})
    good = as_float(images[0])
    with pytest.raises(InputError) as exc:
        reward(image=[good, good], group_id=["a", None])
    assert exc.value.field == "group_id" and exc.value.sample == 1
    with pytest.raises(InputError) as exc:
        reward(image=[good, torch.zeros(1, 2, 8, 8)], group_id=["a", "a"])
    assert exc.value.field == "image" and exc.value.sample == 1
    bad = good.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(InputError, match="NaN") as exc:
        reward(image=[good, bad, good], group_id=[1, 1, 1])
    assert exc.value.sample == 1
    video = load_reward({"name": "group_diversity", "model_path": dino_dir}, media="video")
    with pytest.raises(InputError, match="no frames") as exc:
        video(video=[torch.zeros(2, 3, 8, 8), torch.zeros(0, 3, 8, 8)], group_id=[0, 0])
    assert exc.value.field == "video" and exc.value.sample == 1
    with pytest.raises(ConfigError, match="embedding"):
        load_reward({"name": "group_diversity", "model_path": dino_dir}, embedding="siglip")
    with pytest.raises(ConfigError, match="media"):
        load_reward({"name": "group_diversity", "model_path": dino_dir}, media="audio")
    with pytest.raises(ConfigError, match="distance"):
        load_reward({"name": "diversity_weighted", "model_path": dino_dir}, base="group_test_meta", distance="max")
    with pytest.raises(ConfigError, match="base"):
        load_reward({"name": "diversity_weighted", "model_path": dino_dir})
    proc = RewardProcessor([{"name": "div", "reward_model": "group_diversity", "model_path": dino_dir}])
    with pytest.raises(InputError) as exc:
        proc([Sample(image=images[0], group_id=0), Sample(image=images[1])])
    assert "group_id" in str(exc.value)
