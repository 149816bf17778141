"""A tiny random-init ImageBind (``imagebind_score``) on disk in the layout its loader reads: ``config.json``
(``ImageBindModel`` keyword arguments) and ``model.safetensors``. Imports: the standard library and :mod:`.common`
at module level; torch and ImageBind's model code (through the reward's importer) inside the builder.
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import made_dir, save_safetensors

#: ``ImageBindModel`` keyword arguments of the tiny build: every trunk one block wide 16-32, a 16-d joint space.
TINY_IMAGEBIND = {
    "vision_embed_dim": 32,
    "vision_num_blocks": 1,
    "vision_num_heads": 2,
    "text_embed_dim": 32,
    "text_num_blocks": 1,
    "text_num_heads": 2,
    "audio_embed_dim": 32,
    "audio_num_blocks": 1,
    "audio_num_heads": 2,
    "out_embed_dim": 16,
    "depth_embed_dim": 16,
    "depth_num_blocks": 1,
    "depth_num_heads": 2,
    "thermal_embed_dim": 16,
    "thermal_num_blocks": 1,
    "thermal_num_heads": 2,
    "imu_embed_dim": 16,
    "imu_num_blocks": 1,
    "imu_num_heads": 2,
}


def tiny_imagebind_dir(path, *, seed: int = 0, config: dict | None = None) -> Path:
    """Save a tiny random-init ``ImageBindModel`` (``config``, default :data:`TINY_IMAGEBIND`) as ``config.json`` +
    ``model.safetensors`` under ``path``; return the directory."""
    import torch

    from ..rewards.video.imagebind import imagebind_modules

    ib, _ = imagebind_modules()
    config = dict(TINY_IMAGEBIND if config is None else config)
    torch.manual_seed(seed)
    model = ib.ImageBindModel(**config)
    out = made_dir(path)
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    save_safetensors(model.state_dict(), out / "model.safetensors")
    return out
