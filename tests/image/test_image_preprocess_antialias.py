"""``PreprocessConfig.antialias``: True (default) keeps the antialiased resize; False is torch's plain kernel."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rewardzoo.shared.image_ops import PreprocessConfig, preprocess_images, preprocess_pixels


def _images(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (3, 3, 90, 130), generator=g, dtype=torch.uint8)


def _by_hand(u8: torch.Tensor, cfg: PreprocessConfig, antialias: bool, quantise: bool) -> torch.Tensor:
    h, w = u8.shape[-2:]
    rh, rw = cfg.size, int(cfg.size * w / h)  # shorter side (h) to size
    x = F.interpolate(u8.float(), size=(rh, rw), mode=cfg.interpolation, antialias=antialias, align_corners=False)
    if quantise:
        x = x.round().clamp(0, 255)
    left = int(round((rw - cfg.size) / 2.0))
    x = x[..., :, left : left + cfg.size] / 255.0
    mean = torch.tensor(cfg.mean).view(1, 3, 1, 1)
    std = torch.tensor(cfg.std).view(1, 3, 1, 1)
    return (x - mean) / std


@pytest.mark.parametrize("interpolation", ["bicubic", "bilinear"])
def test_no_antialias_matches_plain_interpolate(interpolation):
    u8 = _images()
    cfg = PreprocessConfig(size=32, interpolation=interpolation, antialias=False)
    got = preprocess_images(u8, cfg)
    torch.testing.assert_close(got, _by_hand(u8, cfg, False, True), atol=1e-5, rtol=0)
    pixels = preprocess_pixels(u8.float() / 255, cfg)
    torch.testing.assert_close(pixels, _by_hand(u8, cfg, False, False), atol=1e-5, rtol=0)


def test_default_is_antialiased_and_unchanged():
    u8 = _images(1)
    cfg = PreprocessConfig(size=32)
    assert cfg.antialias is True
    got = preprocess_images(u8, cfg)
    one_level = 1 / 255 / min(cfg.std) + 1e-5  # the CPU uint8 kernel rounds in integer arithmetic
    torch.testing.assert_close(got, _by_hand(u8, cfg, True, True), atol=one_level, rtol=0)
    off = preprocess_images(u8, cfg.replace(antialias=False))
    assert (got - off).abs().max() > 0.05  # downscaling by ~3x: the two kernels really differ


def test_antialias_must_be_bool():
    with pytest.raises(ValueError, match="antialias"):
        PreprocessConfig(antialias="no")
