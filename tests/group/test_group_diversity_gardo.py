"""``preset: gardo`` of group_diversity and diversity_weighted: GARDO's embedding (timm DINOv3, timm's eval
transform, the pooled output) on a tiny DINOv3-shaped timm model, against timm's own model, data config,
transform and forward called here as GARDO calls them, and against a hand re-computation (bicubic resize with
antialias, centre crop, ImageNet normalisation, mean of the final-normed patch tokens); GARDO's advantage
re-computed from those embeddings; options that contradict the preset are ConfigErrors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm", reason="timm (rewardzoo[image]) is not installed: the gardo preset needs it")

import timm.data
import torchvision.transforms.functional as TF
from safetensors.torch import load_file
from torchvision.transforms import InterpolationMode

from rewardzoo import load_reward
from rewardzoo import testing as rzt
from rewardzoo.errors import ConfigError

GROUPS = ["a", "a", "a", "a", "b", "b", "b"]
SIZES = [(280, 320), (280, 320), (280, 320), (280, 320), (256, 256), (256, 256), (300, 260)]
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


@pytest.fixture(scope="module")
def dinov3_dir(tmp_path_factory):
    return rzt.tiny_timm_dinov3_dir(tmp_path_factory.mktemp("dinov3") / "tiny", seed=0)


@pytest.fixture(scope="module")
def images():
    gen = torch.Generator().manual_seed(0)
    out = [torch.rand(3, h, w, generator=gen) for h, w in SIZES]
    out[3] = out[2].clone()  # a duplicate inside the first group
    return out


def timm_model(path: str):
    """The saved weights in a model timm builds here from the registry name (not through local-dir)."""
    args = json.loads((Path(path) / "config.json").read_text())["model_args"]
    model = timm.create_model("vit_large_patch16_dinov3.lvd1689m", pretrained=False, **args)
    model.load_state_dict(load_file(str(Path(path) / "model.safetensors")))
    return model.eval()


def gardo_embeddings(path: str, images: list) -> np.ndarray:
    """GARDO's lines: ``resolve_model_data_config`` + ``create_transform(is_training=False)`` on the float batch,
    then ``dinov3(transforms(images).to(torch.float32))``; per same-sized batch, L2-normalised."""
    model = timm_model(path)
    transforms = timm.data.create_transform(**timm.data.resolve_model_data_config(model), is_training=False)
    with torch.no_grad():
        feats = torch.cat([model(transforms(im[None]).to(torch.float32)) for im in images])
    feats = feats.double().numpy()
    return feats / np.linalg.norm(feats, axis=1, keepdims=True)


def by_hand(path: str, images: list, *, pool: str = "patch_mean") -> np.ndarray:
    """The same written out: shorter side 256 (bicubic, antialias), centre crop 256, ImageNet mean/std, the final
    LayerNorm's tokens, then the mean of the patch tokens (after 1 CLS + 4 registers), or the CLS token."""
    model = timm_model(path)
    out = []
    for im in images:
        x = TF.resize(im[None], 256, interpolation=InterpolationMode.BICUBIC, antialias=True)
        x = (TF.center_crop(x, [256, 256]) - MEAN) / STD
        with torch.no_grad():
            tokens = model.forward_features(x)
        assert tokens.shape[1] == 5 + 16 * 16
        out.append(tokens[:, 5:].mean(dim=1) if pool == "patch_mean" else tokens[:, 0])
    feats = torch.cat(out).double().numpy()
    return feats / np.linalg.norm(feats, axis=1, keepdims=True)


def distances(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: the mean and the min of 1 - cos to the other members, by explicit loops."""
    n = len(e)
    mean, nearest = np.zeros(n), np.zeros(n)
    for i in range(n):
        d = [1 - float(np.clip(e[i] @ e[j], -1, 1)) for j in range(n) if j != i]
        mean[i], nearest[i] = np.mean(d), np.min(d)
    return mean, nearest


def per_group(emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, nearest = np.zeros(len(GROUPS)), np.zeros(len(GROUPS))
    for g in set(GROUPS):
        idx = [i for i, k in enumerate(GROUPS) if k == g]
        mean[idx], nearest[idx] = distances(emb[idx])
    return mean, nearest


def test_the_tiny_model_is_dinov3_shaped(dinov3_dir):
    model = timm.create_model(f"local-dir:{dinov3_dir}", pretrained=True)
    assert type(model).__name__ == "Eva" and model.num_prefix_tokens == 5 and model.global_pool == "avg"
    assert isinstance(model.fc_norm, torch.nn.Identity) and not isinstance(model.norm, torch.nn.Identity)
    cfg = timm.data.resolve_model_data_config(model)
    assert cfg["input_size"] == (3, 256, 256) and cfg["interpolation"] == "bicubic" and cfg["crop_pct"] == 1.0


def test_the_references_agree_and_the_pool_matters(dinov3_dir, images):
    gardo = gardo_embeddings(dinov3_dir, images)
    np.testing.assert_allclose(gardo, by_hand(dinov3_dir, images), rtol=1e-5, atol=1e-6)
    # the CLS token (rewardzoo's `dino`) gives other distances: a wrong pool would fail the tests below
    cls_mean, _ = per_group(by_hand(dinov3_dir, images, pool="cls"))
    mean, _ = per_group(gardo)
    assert np.abs(cls_mean - mean).max() > 1e-3


def test_group_diversity_gardo_is_gardos_embedding(dinov3_dir, images):
    reward = load_reward({"name": "group_diversity", "model_path": dinov3_dir}, preset="gardo")
    out = reward(image=images, group_id=GROUPS)
    mean, nearest = per_group(gardo_embeddings(dinov3_dir, images))
    np.testing.assert_allclose(out.rewards, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.extras["nearest_distance"], nearest, rtol=1e-5, atol=1e-6)
    assert out.extras["nearest_distance"][2] == pytest.approx(0.0, abs=1e-6)  # the duplicate
    assert mean.min() > 1e-4  # distinct random images are apart: the test can fail
    # the same through `embedding: timm` and in batches of 2
    same = load_reward({"name": "group_diversity", "model_path": dinov3_dir}, embedding="timm", embed_batch_size=2)
    np.testing.assert_allclose(same(image=images, group_id=GROUPS).rewards, out.rewards, rtol=1e-6, atol=1e-7)


def test_diversity_weighted_gardo_is_gardos_advantage(dinov3_dir, images):
    scores = [0.1, 0.9, 0.5, 0.7, 0.2, 0.4, 0.3]
    reward = load_reward(
        {"name": "diversity_weighted", "model_path": dinov3_dir}, base="group_test_meta", preset="gardo"
    )
    out = reward(image=images, metadata=[json.dumps({"score": s}) for s in scores], group_id=GROUPS)
    emb = gardo_embeddings(dinov3_dir, images)
    expected, plain = np.zeros(len(scores)), np.zeros(len(scores))
    for g in set(GROUPS):  # PerPromptStatTracker.update(type='gardo'), re-computed
        idx = [i for i, k in enumerate(GROUPS) if k == g]
        s, e = np.array(scores)[idx], emb[idx]
        dist = 1 - np.clip(e @ e.T, -1, 1)
        nearest = np.array([np.min(np.delete(dist[i], i)) for i in range(len(idx))])
        plain[idx] = adv = s - s.mean()
        expected[idx] = adv * np.where(adv < 0, 1.0, nearest / nearest.mean())
    np.testing.assert_allclose(out.rewards, expected, rtol=1e-5, atol=1e-7)
    assert not np.allclose(out.rewards, plain, atol=1e-3)  # the weight acts


def test_options_that_contradict_the_preset_are_config_errors(dinov3_dir):
    entry = {"name": "group_diversity", "model_path": dinov3_dir}
    for kwargs, field in (
        ({"embedding": "dino"}, "embedding"),
        ({"media": "video"}, "media"),
        ({"resize": 224}, "resize"),
    ):
        with pytest.raises(ConfigError, match="preset: gardo") as exc:
            load_reward(entry, preset="gardo", **kwargs)
        assert field in str(exc.value)
    with pytest.raises(ConfigError, match="distance"):
        load_reward(
            {"name": "diversity_weighted", "model_path": dinov3_dir},
            base="group_test_meta",
            preset="gardo",
            distance="mean",
        )
    with pytest.raises(ConfigError, match="preset"):
        load_reward(entry, preset="vbench")
    with pytest.raises(ConfigError, match="resize"):
        load_reward(entry, embedding="timm", resize=224)


def test_a_directory_without_timm_files_is_a_config_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="model.safetensors"):
        load_reward({"name": "group_diversity", "model_path": str(tmp_path)}, preset="gardo")


def test_without_timm_the_preset_names_the_package_and_the_extra(tmp_path, monkeypatch):
    from rewardzoo.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "timm", None)  # `import timm` raises ImportError
    with pytest.raises(MissingExtraError, match=r"'timm'.*rewardzoo\[image\]") as exc:
        load_reward({"name": "diversity_weighted", "model_path": str(tmp_path)}, base="group_test_meta", preset="gardo")
    assert exc.value.reward == "diversity_weighted"
