"""hpsv2's precision: HPSv2's img_score.py keeps float32 weights and scores under torch.cuda.amp.autocast()
(float16 on CUDA, nothing on the CPU). ``autocast: auto`` does the same; an explicit dtype autocasts on any device."""

from __future__ import annotations

import numpy as np
import open_clip
import pytest
import torch
import torch.nn.functional as F

from rewardzoo.errors import ConfigError
from rewardzoo.rewards.image.hpsv2 import REFERENCE_AUTOCAST, HPSv2
from rewardzoo.shared.device import autocast_dtype

from .media import PROMPTS, make_images
from .test_image_hpsv2 import _hps_preprocess


def test_auto_is_the_reference_autocast_per_device_type():
    assert autocast_dtype("auto", "cpu", REFERENCE_AUTOCAST) is None
    assert autocast_dtype("auto", "cuda:1", REFERENCE_AUTOCAST) == "float16"  # torch.cuda.amp.autocast()'s dtype
    assert autocast_dtype("bf16", "cpu") == "bfloat16"
    assert autocast_dtype(None, "cuda:0", REFERENCE_AUTOCAST) is None
    for bad in ("float32", 3, "int8"):
        with pytest.raises(ValueError):
            autocast_dtype(bad, "cpu")


def test_explicit_autocast_matches_the_reference_under_the_same_autocast(oc_dir, hps_ckpt):
    path, _ = hps_ckpt
    model = open_clip.create_model(f"local-dir:{oc_dir}")
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True)["state_dict"])
    model.eval()
    tokenizer = open_clip.get_tokenizer(f"local-dir:{oc_dir}")
    images = make_images(len(PROMPTS), size=(96, 80), seed=3)
    pixels = torch.stack([_hps_preprocess(im) for im in images])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # the reference's pattern, bf16 on the CPU
        img = F.normalize(model.encode_image(pixels), dim=-1)
        txt = F.normalize(model.encode_text(tokenizer(PROMPTS)), dim=-1)
        expected = (img @ txt.T).diagonal().float().numpy()
    with torch.no_grad():
        exact = (
            (
                F.normalize(model.encode_image(pixels), dim=-1)
                * F.normalize(model.encode_text(tokenizer(PROMPTS)), dim=-1)
            )
            .sum(-1)
            .numpy()
        )
    reward = HPSv2(model_path=str(path), clip_model=str(oc_dir), autocast="bfloat16")
    got = np.asarray(reward(image=images, prompt=PROMPTS).rewards)
    default = np.asarray(HPSv2(model_path=str(path), clip_model=str(oc_dir))(image=images, prompt=PROMPTS).rewards)
    np.testing.assert_allclose(default, exact, atol=1e-3)  # auto on the CPU: no autocast, float32
    np.testing.assert_allclose(got, expected, atol=6e-4)  # bf16 rounding: 3e-4 here, vs 9e-4 from float32
    assert np.abs(got - exact).max() > 1e-4  # the autocast really ran
    with pytest.raises(ConfigError, match="autocast"):
        HPSv2(model_path=str(path), clip_model=str(oc_dir), autocast="float32")
