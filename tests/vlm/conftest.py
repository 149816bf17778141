"""Tiny random-init Qwen-VL models with their real processors, saved like hub checkpoints and loaded by model_path.

The builders live in :mod:`rewardzoo.testing` (``tiny_vlm_dir``); these fixtures choose paths and seeds:

- ``vlm_dirs``: ``{family: directory}`` for ``qwen2_vl``, ``qwen2_5_vl`` and ``qwen3_vl`` (session-scoped);
- ``vlm_dir``: the Qwen2-VL one (most tests); ``short_vlm_dir``: Qwen2-VL with a 64-token context;
- ``images`` / ``video_frames``: small random RGB PIL images of mixed sizes, and two 4-frame videos.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from PIL import Image

from rewardzoo.testing import VLM_FAMILIES, tiny_vlm_dir


@pytest.fixture(scope="session")
def vlm_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm")
    return {family: str(tiny_vlm_dir(root / family, family, seed=i)) for i, family in enumerate(VLM_FAMILIES)}


@pytest.fixture(scope="session")
def vlm_dir(vlm_dirs):
    return vlm_dirs["qwen2_vl"]


@pytest.fixture(scope="session")
def short_vlm_dir(tmp_path_factory):
    return str(
        tiny_vlm_dir(tmp_path_factory.mktemp("vlm_short") / "qwen2_vl", "qwen2_vl", seed=5, max_position_embeddings=64)
    )


def random_image(rng, h, w):
    return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))


@pytest.fixture(scope="session")
def images():
    """Five RGB images of different sizes (mixed sizes in one batch)."""
    rng = np.random.default_rng(0)
    return [random_image(rng, h, w) for h, w in [(64, 80), (100, 60), (56, 56), (90, 120), (70, 70)]]


@pytest.fixture(scope="session")
def video_frames():
    """Two videos of 4 RGB frames each (64x96 and 56x84)."""
    rng = np.random.default_rng(1)
    return [[random_image(rng, 64, 96) for _ in range(4)], [random_image(rng, 56, 84) for _ in range(4)]]


PROMPTS = ["a cat on a mat", "a photo of a dog", "two cats", "a red car", "a dog on a mat"]


@pytest.fixture(scope="session")
def prompts():
    return list(PROMPTS)
