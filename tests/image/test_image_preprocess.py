"""Tensor-native preprocessing against open_clip's PIL transforms and the HPSv2 letterbox."""

from __future__ import annotations

import numpy as np
import open_clip
import pytest
import torch
import torchvision.transforms.functional as TF
from PIL import Image

from rewardzoo.errors import InputError
from rewardzoo.shared.image_ops import (
    OPENAI_CLIP_MEAN,
    OPENAI_CLIP_STD,
    PreprocessConfig,
    preprocess_images,
    to_uint8_tensor,
)

from .media import make_images

SIZES = [(96, 80), (80, 96), (64, 64), (100, 57), (33, 130), (512, 512)]
ONE_LEVEL = 1 / 255 / min(OPENAI_CLIP_STD)  # one 8-bit level after normalisation


@pytest.mark.parametrize("resize_mode", ["shortest", "squash"])
@pytest.mark.parametrize("interpolation", ["bicubic", "bilinear"])
def test_matches_open_clip_pil_transform(resize_mode, interpolation):
    imgs = make_images(len(SIZES), size=SIZES, seed=1)
    cfg = PreprocessConfig(size=64, resize_mode=resize_mode, interpolation=interpolation)
    ref_tf = open_clip.image_transform(
        64,
        is_train=False,
        mean=OPENAI_CLIP_MEAN,
        std=OPENAI_CLIP_STD,
        resize_mode=resize_mode,
        interpolation=interpolation,
        fill_color=0,
    )
    ref = torch.stack([ref_tf(im) for im in imgs])
    ours = preprocess_images(imgs, cfg)
    assert ours.shape == ref.shape == (len(imgs), 3, 64, 64)
    diff = (ours - ref).abs()
    assert diff.max() <= 3 * ONE_LEVEL + 1e-5  # at most a few 8-bit levels (kernel rounding)
    assert diff.mean() < 0.1 * ONE_LEVEL


def _hpsv2_letterbox(img: Image.Image, size: int) -> torch.Tensor:
    """The HPSv2 repository's rule, written from its description with torchvision's PIL functions."""
    w, h = img.size
    scale = size / float(max(h, w))
    new_h, new_w = round(h * scale), round(w * scale)
    img = TF.resize(img, [new_h, new_w], TF.InterpolationMode.BICUBIC)
    pad_h, pad_w = size - new_h, size - new_w
    img = TF.pad(img, [pad_w // 2, pad_h // 2, pad_w - pad_w // 2, pad_h - pad_h // 2], fill=0)
    return TF.normalize(TF.to_tensor(img), OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)


def test_letterbox_matches_hpsv2_rule():
    imgs = make_images(len(SIZES), size=SIZES, seed=2)
    ref = torch.stack([_hpsv2_letterbox(im, 64) for im in imgs])
    ours = preprocess_images(imgs, PreprocessConfig(size=64, resize_mode="longest"))
    assert (ours - ref).abs().max() <= 3 * ONE_LEVEL + 1e-5
    # the padding really is black (0 before normalisation), not a crop
    tall = preprocess_images(make_images(1, size=(32, 128)), PreprocessConfig(size=64, resize_mode="longest"))
    black = (-torch.tensor(OPENAI_CLIP_MEAN) / torch.tensor(OPENAI_CLIP_STD)).view(3, 1)
    assert torch.allclose(tall[0, :, :, :24].reshape(3, -1), black.expand(3, 64 * 24), atol=1e-5)


@pytest.mark.parametrize("kind", ["float", "uint8", "numpy", "batched"])
def test_tensor_and_array_inputs_equal_pil_path(kind):
    imgs = make_images(4, size=(90, 70), seed=3)
    cfg = PreprocessConfig(size=48)
    ref = preprocess_images(imgs, cfg)
    arrays = [np.array(im) for im in imgs]
    if kind == "float":
        inputs = [torch.from_numpy(a).permute(2, 0, 1).float() / 255 for a in arrays]
    elif kind == "uint8":
        inputs = [torch.from_numpy(a.copy()).permute(2, 0, 1) for a in arrays]
    elif kind == "numpy":
        inputs = arrays
    else:
        inputs = torch.stack([torch.from_numpy(a).permute(2, 0, 1).float() / 255 for a in arrays])
    assert torch.equal(preprocess_images(inputs, cfg), ref)


@pytest.mark.parametrize("mode", ["L", "RGBA", "LA", "P"])
def test_grayscale_and_alpha_inputs_become_rgb(mode):
    rgb = make_images(1, size=(50, 40), seed=4)[0]
    img = rgb.convert("L").convert(mode) if mode in ("L", "LA") else rgb.convert(mode)
    out = preprocess_images([img], PreprocessConfig(size=32))
    assert torch.equal(out, preprocess_images([img.convert("RGB")], PreprocessConfig(size=32)))


def test_grayscale_and_rgba_tensors():
    gray = torch.rand(1, 40, 30)
    rgba = torch.rand(4, 40, 30)
    cfg = PreprocessConfig(size=24)
    assert torch.equal(preprocess_images([gray], cfg), preprocess_images([gray.expand(3, -1, -1)], cfg))
    assert torch.equal(preprocess_images([gray[0]], cfg), preprocess_images([gray.expand(3, -1, -1)], cfg))
    assert torch.equal(preprocess_images([rgba], cfg), preprocess_images([rgba[:3]], cfg))


def test_mixed_sizes_keep_order():
    imgs = make_images(5, size=[(60, 40), (40, 60), (60, 40), (30, 30), (40, 60)], seed=5)
    cfg = PreprocessConfig(size=32)
    batch = preprocess_images(imgs, cfg)
    for i, im in enumerate(imgs):
        assert torch.equal(batch[i], preprocess_images([im], cfg)[0])


@pytest.mark.parametrize(
    "bad, msg",
    [
        (torch.rand(3, 8, 8) * 2 - 1, "in \\[0, 1\\]"),
        (torch.full((3, 8, 8), float("nan")), "NaN"),
        (torch.rand(8, 8, 3), "channels last"),
        (torch.rand(3, 0, 8), "empty"),
        (torch.randint(0, 1000, (3, 8, 8)), "\\[0, 255\\]"),
        ("not/a/file.png", "not found"),
        (object(), "unsupported image type"),
    ],
)
def test_bad_images_name_field_and_sample(bad, msg):
    good = torch.rand(3, 8, 8)
    with pytest.raises(InputError, match=msg) as info:
        preprocess_images([good, bad], PreprocessConfig(size=8), field="image")
    assert info.value.sample == 1 and info.value.field == "image"


def test_to_uint8_rounds_like_media():
    x = torch.tensor([0.0, 0.5 / 255, 1.5 / 255, 1.0]).view(1, 1, 4)
    assert to_uint8_tensor(x)[0, 0].tolist() == [0, round(0.5), 2, 255]


def test_bad_frame_in_a_batched_tensor_is_located():
    frames = torch.rand(4, 3, 8, 8)
    frames[2, 0, 0, 0] = 1.5
    with pytest.raises(InputError, match=r"\[0, 1\]") as info:
        preprocess_images(frames, PreprocessConfig(size=8), field="video")
    assert (info.value.field, info.value.sample) == ("video", 2)
