"""A tiny random-init Synchformer (``av_sync``) on disk in the layout its loader reads: ``config.json`` (the
:class:`~rewardzoo.rewards.models.synchformer.SynchformerConfig` fields that differ from the released model's)
and ``synchformer_state_dict.pth`` (a plain state dict saved by ``torch.save``, as MMAudio's release is). Imports:
the standard library and :mod:`.common` at module level; torch and the model inside the builder.
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import made_dir

#: The tiny build: the released model's segment geometry (16-frame segments, 128x66 spectrograms, 14 segments a
#: window, 21 classes) on 64x64 crops (4x4 patches; the released model's are 224), every transformer one layer
#: of width 32.
TINY_SYNCHFORMER = {
    "image_size": 64,
    "video_dim": 32,
    "video_depth": 1,
    "video_heads": 2,
    "audio_dim": 32,
    "audio_depth": 1,
    "audio_heads": 2,
    "audio_intermediate": 64,
    "head_layers": 1,
    "head_heads": 2,
}


def tiny_synchformer_dir(path, *, seed: int = 0, config: dict | None = None, scale: float = 0.5) -> Path:
    """Save a tiny random Synchformer (``config``, default :data:`TINY_SYNCHFORMER`) under ``path``; every
    parameter is drawn ``N(0, scale^2)`` (layer-norm weights around 1) so that the offsets vary between inputs."""
    import torch

    from ..rewards.models.synchformer import WEIGHTS_FILE, Synchformer, SynchformerConfig

    config = dict(TINY_SYNCHFORMER if config is None else config)
    torch.manual_seed(seed)
    model = Synchformer(SynchformerConfig(**config))
    g = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in model.state_dict().items():
        noise = torch.randn(value.shape, generator=g) * scale
        state[name] = noise + 1.0 if "norm" in name and name.endswith("weight") else noise
    out = made_dir(path)
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    torch.save(state, out / WEIGHTS_FILE)
    return out
