"""Tiny video backbones on disk: a DINO-style ViT and a DINOv2, as transformers ``save_pretrained`` directories.

They are what the subject-consistency reward (:mod:`rewardzoo.rewards.video.consistency`) loads as
``model_path``. Imports: the standard library at module level; torch and transformers inside the builder.
"""

from __future__ import annotations

from pathlib import Path


def tiny_dino_dirs(
    root, *, seed: int = 0, vit_config: dict | None = None, dinov2_config: dict | None = None
) -> dict[str, str]:
    """Save a tiny random-init DINO-style ViT (patch 16) and DINOv2 (patch 14); return ``{"vit", "dinov2"}`` paths.

    Both are transformers ``save_pretrained`` directories (``ViTModel`` without pooler,
    ``Dinov2Model``) under ``root``, which is what the subject-consistency reward loads as
    ``model_path``. Defaults: width 32, 2 layers, 2 heads, 224 pixels, and ``initializer_range=0.5`` so
    random features are far apart and consistency scores are not all about 1. ``vit_config`` /
    ``dinov2_config`` are keyword overrides of those configs (e.g. ViT-B/16 sizes for a benchmark).
    ``torch.manual_seed(seed)`` is called once, then the ViT and the DINOv2 are built in that order.
    """
    import torch
    from transformers import Dinov2Config, Dinov2Model, ViTConfig, ViTModel

    root = Path(root)
    vit_kw = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=224,
        patch_size=16,
        initializer_range=0.5,
    )
    vit_kw.update(vit_config or {})
    dinov2_kw = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        mlp_ratio=2,
        image_size=224,
        patch_size=14,
        initializer_range=0.5,
    )
    dinov2_kw.update(dinov2_config or {})
    torch.manual_seed(seed)
    ViTModel(ViTConfig(**vit_kw), add_pooling_layer=False).save_pretrained(root / "vit")
    Dinov2Model(Dinov2Config(**dinov2_kw)).save_pretrained(root / "dinov2")
    return {"vit": str(root / "vit"), "dinov2": str(root / "dinov2")}
