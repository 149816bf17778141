"""Fixtures for the video tests: tiny generated clips and tiny random-init models on disk (rewardzoo.testing)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("av")
pytest.importorskip("transformers")

from rewardzoo import testing as rzt
from rewardzoo.shared.video import write_video

from .media import CLIP_PREPROCESS, TINY_CLIP, ramp_frames, textured_frames


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory):
    """Ramp clips encoded with the default GOP (one keyframe) and with a keyframe every 12 frames."""
    d = tmp_path_factory.mktemp("clips")
    frames = ramp_frames()
    write_video(d / "ramp_longgop.mp4", frames, fps=24)
    write_video(d / "ramp_gop12.mp4", frames, fps=24, gop=12)
    write_video(d / "ramp_gop12.mkv", frames, fps=24, gop=12)
    write_video(d / "textured.mp4", textured_frames(), fps=24)
    return d


@pytest.fixture(scope="session")
def dino_dirs(tmp_path_factory):
    """Tiny random-init DINO-style (ViT, patch 16) and DINOv2 (patch 14) models saved with save_pretrained."""
    return rzt.tiny_dino_dirs(tmp_path_factory.mktemp("dino"), seed=0)


@pytest.fixture(scope="session")
def clip_dir(tmp_path_factory):
    """A tiny random-init open_clip model in hub layout (open_clip_config.json + safetensors)."""
    path = tmp_path_factory.mktemp("clip") / "tiny-open-clip"
    return str(rzt.tiny_open_clip_dir(path, seed=0, model_cfg=TINY_CLIP, preprocess_cfg=CLIP_PREPROCESS))


@pytest.fixture(scope="session")
def aesthetic_head(tmp_path_factory):
    """A random-init LAION aesthetic v2 head (reference parameter names) as .safetensors."""
    return str(rzt.aesthetic_head_file(tmp_path_factory.mktemp("aesthetic") / "head.safetensors", seed=1))
