"""JPEG rewards against a direct computation of the flow_grpo formula with Pillow."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from rewardzoo import RewardProcessor, Sample

from ..optional import torch


def _reference_kb(float_chw: np.ndarray) -> float:
    """flow_grpo: float [0,1] (C,H,W) -> round(x*255) uint8 HWC -> PIL -> JPEG q95 -> bytes / 1000."""
    arr = (float_chw * 255).round().clip(0, 255).astype(np.uint8).transpose(1, 2, 0)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=95)
    return len(buf.getvalue()) / 1000


@pytest.mark.parametrize("as_input", [np.asarray, *([torch.from_numpy] if torch else [])], ids=lambda f: f.__module__)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jpeg_rewards_match_flow_grpo(seed, as_input):
    rng = np.random.default_rng(seed)
    images = [rng.random((3, 40 + 8 * k, 48)).astype(np.float32) ** (k + 1) for k in range(4)]
    proc = RewardProcessor(
        [
            "jpeg_compressibility",
            "jpeg_incompressibility",
            {"name": "ddpo", "reward_model": "jpeg_compressibility", "kwargs": {"scale": 1.0}},
        ]
    )
    res = proc([Sample(image=as_input(img)) for img in images])
    kb = np.array([_reference_kb(img) for img in images])
    np.testing.assert_allclose(res.rewards["jpeg_incompressibility"], kb, rtol=1e-6)
    np.testing.assert_allclose(res.rewards["jpeg_compressibility"], -kb / 500, rtol=1e-6)
    np.testing.assert_allclose(res.rewards["ddpo"], -kb, rtol=1e-6)
    np.testing.assert_allclose(res.extras["jpeg_incompressibility"]["jpeg_kb"], kb, rtol=1e-6)


def test_quality_option_is_validated():
    from rewardzoo.rewards.image.jpeg import JpegCompressibility

    with pytest.raises(ValueError, match="quality"):
        JpegCompressibility(quality=0)
