"""A tiny random-init SongEval (``song_eval``) on disk in the layouts its loaders read: MuQ as the ``muq`` package
saves it (``config.json`` + ``model.safetensors``) and SongEval's head as its repository holds it (``config.yaml`` +
``ckpt/model.safetensors``). Imports: the standard library and :mod:`.common` at module level; torch, transformers
and muq inside the builders.
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import made_dir, save_safetensors

#: MuQ keyword arguments of the tiny build: 32-wide, 6 conformer layers (SongEval reads the 6th), a 16-entry
#: codebook; the mel statistics are round numbers, not MuQ's.
TINY_MUQ = {"encoder_dim": 32, "encoder_depth": 6, "conv_dim": 8, "codebook_size": 16}
#: SongEval's ``generator`` block of the tiny head (the released one: 1024, 4096, 5, 4).
TINY_SONGEVAL_HEAD = {"in_features": 32, "ffd_hidden_size": 64, "num_classes": 5, "attn_layer_num": 2}


def tiny_muq_dir(path, *, seed: int = 0) -> Path:
    """Save a tiny random MuQ (``muq.MuQ``) under ``path``: ``config.json`` and ``model.safetensors``."""
    import torch
    from muq import MuQ
    from transformers import Wav2Vec2ConformerConfig

    conformer = Wav2Vec2ConformerConfig(
        hidden_size=32, num_attention_heads=2, intermediate_size=64, num_hidden_layers=6, conv_depthwise_kernel_size=3
    ).to_dict()
    conformer = {k: v for k, v in conformer.items() if not isinstance(v, dict)}  # MuQ reads it as an EasyDict
    config = {**TINY_MUQ, "stat": {"melspec_2048_mean": 6.0, "melspec_2048_std": 20.0}, "w2v2_config": conformer}
    torch.manual_seed(seed)
    model = MuQ(dict(config, w2v2_config={**conformer, "_attn_implementation": "eager"}))
    out = made_dir(path)
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    save_safetensors(model.state_dict(), out / "model.safetensors")
    return out


def tiny_songeval_dir(path, *, seed: int = 0) -> Path:
    """Save a tiny random SongEval head under ``path``: ``config.yaml`` and ``ckpt/model.safetensors``."""
    import torch

    from ..rewards.audio.song_eval import SongEvalHead

    torch.manual_seed(seed)
    head = SongEvalHead(**TINY_SONGEVAL_HEAD)
    out = made_dir(path)
    lines = ["generator:", "  _target_: model.Generator"] + [f"  {k}: {v}" for k, v in TINY_SONGEVAL_HEAD.items()]
    (out / "config.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    made_dir(out / "ckpt")
    save_safetensors(head.state_dict(), out / "ckpt" / "model.safetensors")
    return out
