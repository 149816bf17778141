"""hpsv2: the HPS checkpoint loaded into open_clip, letterbox preprocessing, cos(image, text)."""

from __future__ import annotations

import numpy as np
import open_clip
import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.functional as TF

from rewardzoo.errors import ConfigError
from rewardzoo.rewards.image.hpsv2 import HPSv2
from rewardzoo.shared.image_ops import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

from .media import PROMPTS, make_images

SIZES = [(96, 80), (80, 96), (64, 64), (120, 70), (50, 130), (200, 150)]


def _hps_preprocess(img, size=64):
    """HPSv2's ResizeMaxSize rule (longest side to size, round(), zero pad pad//2 left/top) + normalise."""
    w, h = img.size
    scale = size / float(max(h, w))
    nh, nw = round(h * scale), round(w * scale)
    img = TF.resize(img, [nh, nw], TF.InterpolationMode.BICUBIC)
    ph, pw = size - nh, size - nw
    img = TF.pad(img, [pw // 2, ph // 2, pw - pw // 2, ph - ph // 2], fill=0)
    return TF.normalize(TF.to_tensor(img), OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)


@pytest.fixture(scope="module")
def hps_reference(oc_dir, hps_ckpt):
    """open_clip model of the same architecture with the checkpoint loaded the way HPSv2 does."""
    path, _ = hps_ckpt
    model = open_clip.create_model(f"local-dir:{oc_dir}")
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True)["state_dict"])
    return model.eval(), open_clip.get_tokenizer(f"local-dir:{oc_dir}")


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_open_clip_with_hps_checkpoint(oc_dir, hps_ckpt, hps_reference, seed):
    path, _ = hps_ckpt
    model, tokenizer = hps_reference
    images = make_images(len(PROMPTS), size=SIZES, seed=seed)
    reward = HPSv2(model_path=str(path), clip_model=str(oc_dir))
    out = np.asarray(reward(image=images, prompt=PROMPTS).rewards)
    with torch.no_grad():
        img = F.normalize(model.encode_image(torch.stack([_hps_preprocess(im) for im in images])), dim=-1)
        txt = F.normalize(model.encode_text(tokenizer(PROMPTS)), dim=-1)
    np.testing.assert_allclose(out, (img * txt).sum(-1).numpy(), atol=1e-3)


def test_checkpoint_really_replaces_the_backbone_weights(oc_dir, hps_ckpt, oc_reference):
    """Scores differ from the same architecture without the HPS checkpoint (so it was loaded)."""
    path, _ = hps_ckpt
    base, _, tokenizer = oc_reference
    images = make_images(3, seed=5)
    ours = np.asarray(HPSv2(model_path=str(path), clip_model=str(oc_dir))(image=images, prompt=PROMPTS[:3]).rewards)
    with torch.no_grad():
        img = F.normalize(base.encode_image(torch.stack([_hps_preprocess(im) for im in images])), dim=-1)
        txt = F.normalize(base.encode_text(tokenizer(PROMPTS[:3])), dim=-1)
    assert np.abs(ours - (img * txt).sum(-1).numpy()).max() > 1e-2


def test_directory_with_version_file_and_safetensors(oc_dir, hps_ckpt, tmp_path):
    from safetensors.torch import save_file

    path, model = hps_ckpt
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "hps.safetensors"))
    images = make_images(2, seed=6)
    a = HPSv2(model_path=str(path.parent), clip_model=str(oc_dir))(image=images, prompt=PROMPTS[:2])
    b = HPSv2(model_path=str(tmp_path / "hps.safetensors"), clip_model=str(oc_dir))(image=images, prompt=PROMPTS[:2])
    np.testing.assert_allclose(np.asarray(a.rewards), np.asarray(b.rewards), atol=1e-6)
    with pytest.raises(ConfigError, match="HPS_v2_compressed.pt"):
        HPSv2(model_path=str(path.parent), clip_model=str(oc_dir), version="v2.0")
    with pytest.raises(ConfigError, match="version"):
        HPSv2(model_path=str(path), clip_model=str(oc_dir), version="v3")


def test_wrong_checkpoint_is_a_config_error(oc_dir, aesthetic_head_file):
    with pytest.raises(ConfigError, match="does not fit"):
        HPSv2(model_path=str(aesthetic_head_file), clip_model=str(oc_dir))


def test_the_reference_wrapper_names_the_same_checkpoints():
    """The hpsv2 package's wrapper (references family) keeps its own table of checkpoint files (a family does not
    import another); it must name what rewardzoo's hpsv2 loads."""
    from rewardzoo.rewards.references import hpsv2 as reference

    assert HPSv2.files == reference.FILES and HPSv2.default_repo == reference.DEFAULT_REPO
