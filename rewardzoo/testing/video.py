"""Tiny DINO backbones on disk: a DINO-style ViT and a DINOv2, as transformers ``save_pretrained`` directories,
and a timm DINOv3 as a ``timm.models.save_for_hf`` directory.

The first two are what the subject-consistency reward (:mod:`rewardzoo.rewards.video.consistency`) loads as
``model_path``; the timm one is what :mod:`rewardzoo.rewards.models.timm_backbone` loads (the diversity rewards'
``preset: gardo``). Imports: the standard library at module level; torch, transformers and timm inside the
builders.
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


#: The tiny timm DINOv3's sizes (``timm.create_model`` keywords, saved as the directory's ``model_args``); the
#: layer-scale starts at 0.5 (not 1e-5) so that random blocks change the tokens.
TINY_TIMM_DINOV3 = {"embed_dim": 32, "depth": 2, "num_heads": 2, "init_values": 0.5}


def tiny_timm_dinov3_dir(root, *, seed: int = 0, model_args: dict | None = None) -> str:
    """Save a tiny random-init timm ``vit_large_patch16_dinov3.lvd1689m``; return the directory's path.

    The same architecture (timm's ``Eva`` with DINOv3's RoPE, 1 CLS + 4 register tokens, ``global_pool='avg'``,
    no fc-norm) and pretrained configuration (256 pixels, bicubic, ``crop_pct`` 1.0, ImageNet mean/std) as the
    real model, at the sizes of :data:`TINY_TIMM_DINOV3` updated with ``model_args``, written by
    ``timm.models.save_for_hf`` as ``config.json`` + ``model.safetensors`` under ``root``: what
    ``timm.create_model("local-dir:" + root, pretrained=True)`` loads. ``torch.manual_seed(seed)`` is called
    right before the model is built.
    """
    import timm
    import timm.models
    import torch

    kwargs = {**TINY_TIMM_DINOV3, **(model_args or {})}
    torch.manual_seed(seed)
    model = timm.create_model("vit_large_patch16_dinov3.lvd1689m", pretrained=False, **kwargs)
    timm.models.save_for_hf(model, str(root), model_args=kwargs, safe_serialization=True)
    return str(Path(root))
