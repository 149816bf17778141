"""laion_aesthetic: the reference head's parameter names load; score = mlp(normalised CLIP embedding)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rewardzoo.errors import ConfigError
from rewardzoo.rewards.image.aesthetic import LaionAesthetic

from .media import make_images

SIZES = [(96, 80), (80, 96), (64, 64), (120, 70), (200, 150)]


def _reference_scores(oc_reference, head, images):
    """simple_inference.py's recipe: CLIP image features, L2-normalise, MLP."""
    model, preprocess, _ = oc_reference
    with torch.no_grad():
        emb = model.encode_image(torch.stack([preprocess(im) for im in images]))
        return head(emb / emb.norm(dim=-1, keepdim=True)).squeeze(-1).numpy()


@pytest.mark.parametrize("fmt", ["pth", "safetensors", "pth-wrapped"])
def test_reference_state_dict_loads_and_scores_match(
    oc_dir, oc_reference, aesthetic_reference, aesthetic_head_file, tmp_path, fmt
):
    state = aesthetic_reference.state_dict()
    assert sorted(state) == sorted(f"layers.{i}.{p}" for i in (0, 2, 4, 6, 7) for p in ("weight", "bias"))
    if fmt == "pth":
        path = aesthetic_head_file
    elif fmt == "safetensors":
        from safetensors.torch import save_file

        path = tmp_path / "head.safetensors"
        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        path = tmp_path / "head.pth"
        torch.save({"state_dict": state}, path)
    reward = LaionAesthetic(model_path=str(path), clip_model=str(oc_dir))
    images = make_images(len(SIZES), size=SIZES, seed=31)
    out = np.asarray(reward(image=images).rewards)
    np.testing.assert_allclose(out, _reference_scores(oc_reference, aesthetic_reference, images), atol=2e-3)


def test_exact_on_identical_pixels(oc_dir, oc_reference, aesthetic_reference, aesthetic_head_file):
    model, _, _ = oc_reference
    reward = LaionAesthetic(model_path=str(aesthetic_head_file), clip_model=str(oc_dir))
    images = make_images(4, seed=32)
    with torch.no_grad():
        ref = aesthetic_reference(F.normalize(model.encode_image(reward.backbone.preprocess(images)), dim=-1))
    np.testing.assert_allclose(np.asarray(reward(image=images).rewards), ref.squeeze(-1).numpy(), atol=1e-5)


def test_pickled_objects_are_refused(oc_dir, tmp_path, aesthetic_reference):
    path = tmp_path / "evil.pth"
    torch.save(aesthetic_reference.layers, path)  # a whole (torch.nn) module, not a state dict
    with pytest.raises(ConfigError, match="refusing to unpickle"):
        LaionAesthetic(model_path=str(path), clip_model=str(oc_dir))


def test_wrong_checkpoint_and_embedding_size(oc_dir, hps_ckpt, tmp_path):
    with pytest.raises(ConfigError, match="not a LAION aesthetic"):
        LaionAesthetic(model_path=str(hps_ckpt[0]), clip_model=str(oc_dir))
    small = torch.nn.Sequential(
        torch.nn.Linear(512, 1024),
        torch.nn.Dropout(),
        torch.nn.Linear(1024, 128),
        torch.nn.Dropout(),
        torch.nn.Linear(128, 64),
        torch.nn.Dropout(),
        torch.nn.Linear(64, 16),
        torch.nn.Linear(16, 1),
    )
    torch.save({f"layers.{k}": v for k, v in small.state_dict().items()}, tmp_path / "h512.pth")
    with pytest.raises(ConfigError, match="512-d embeddings"):
        LaionAesthetic(model_path=str(tmp_path / "h512.pth"), clip_model=str(oc_dir))


def test_frames_as_one_tensor(oc_dir, aesthetic_head_file):
    """The video rewards pass many frames at once as one (T, 3, H, W) tensor."""
    reward = LaionAesthetic(model_path=str(aesthetic_head_file), clip_model=str(oc_dir))
    frames = torch.rand(5, 3, 40, 60)
    np.testing.assert_allclose(
        np.asarray(reward(image=frames).rewards), np.asarray(reward(image=list(frames)).rewards), atol=1e-6
    )
