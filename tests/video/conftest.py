"""Fixtures for the video tests: tiny generated clips and tiny random-init DINO models on disk."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("av")
pytest.importorskip("transformers")

from rewardzoo.shared.video import write_video  # noqa: E402
from video_media import CLIP_PREPROCESS, TINY_CLIP, ramp_frames, textured_frames  # noqa: E402


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
    from transformers import Dinov2Config, Dinov2Model, ViTConfig, ViTModel

    root = tmp_path_factory.mktemp("dino")
    torch.manual_seed(0)
    # A large initializer_range keeps random features far apart, so consistency scores are not all ~1.
    vit = ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                             image_size=224, patch_size=16, initializer_range=0.5), add_pooling_layer=False)
    vit.save_pretrained(root / "vit")
    dinov2 = Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
                                      image_size=224, patch_size=14, initializer_range=0.5))
    dinov2.save_pretrained(root / "dinov2")
    return {"vit": str(root / "vit"), "dinov2": str(root / "dinov2")}


@pytest.fixture(scope="session")
def clip_dir(tmp_path_factory):
    """A tiny random-init open_clip model in hub layout (open_clip_config.json + safetensors)."""
    import json

    import open_clip
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CLIP)
    path = tmp_path_factory.mktemp("clip") / "tiny-open-clip"
    path.mkdir()
    (path / "open_clip_config.json").write_text(json.dumps({"model_cfg": TINY_CLIP,
                                                            "preprocess_cfg": CLIP_PREPROCESS}))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path / "open_clip_model.safetensors"))
    return str(path)


@pytest.fixture(scope="session")
def aesthetic_head(tmp_path_factory):
    """A random-init LAION aesthetic v2 head (reference parameter names) as .safetensors."""
    from safetensors.torch import save_file

    from rewardzoo.rewards.image.aesthetic import AestheticHead

    torch.manual_seed(1)
    head = AestheticHead(768)
    path = tmp_path_factory.mktemp("aesthetic") / "head.safetensors"
    save_file({k: v.contiguous() for k, v in head.state_dict().items()}, str(path))
    return str(path)
