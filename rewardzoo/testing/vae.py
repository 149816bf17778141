"""Tiny random-init diffusers VAEs saved as a diffusers folder (``config.json`` + safetensors), the layout a config's
``decode:`` stage loads (:mod:`rewardzoo.core.decode`): an image ``AutoencoderKL`` and a video ``AutoencoderKLWan``."""

from __future__ import annotations

import importlib
from pathlib import Path

from .common import made_dir

#: The tiny image VAE's latent scaling and shift (as SD3 / Flux configs carry them), and its latent channels.
TINY_VAE_SCALING, TINY_VAE_SHIFT, TINY_VAE_CHANNELS = 1.5, 0.1, 4


def tiny_vae_dir(path: str | Path, seed: int = 0) -> Path:
    """An ``AutoencoderKL`` (4 latent channels, 2x spatial: a (4, 16, 16) latent decodes to 32x32) at ``path``."""
    import torch

    torch.manual_seed(seed)
    vae = importlib.import_module("diffusers").AutoencoderKL(
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        block_out_channels=(8, 16),
        layers_per_block=1,
        latent_channels=TINY_VAE_CHANNELS,
        norm_num_groups=4,
        sample_size=32,
        scaling_factor=TINY_VAE_SCALING,
        shift_factor=TINY_VAE_SHIFT,
    )
    folder = made_dir(path)
    vae.save_pretrained(folder)
    return folder


def tiny_wan_vae_dir(path: str | Path, seed: int = 0) -> Path:
    """An ``AutoencoderKLWan`` (4 latent channels with per-channel ``latents_mean`` / ``latents_std``, 2x spatial
    and temporal: a (4, 3, 8, 8) latent decodes to 5 frames of 16x16) at ``path``."""
    import torch

    torch.manual_seed(seed)
    vae = importlib.import_module("diffusers").AutoencoderKLWan(
        base_dim=8,
        z_dim=TINY_VAE_CHANNELS,
        dim_mult=[1, 2],
        num_res_blocks=1,
        attn_scales=[],
        temperal_downsample=[True],
        latents_mean=[0.1, -0.2, 0.3, 0.0],
        latents_std=[1.5, 2.0, 0.5, 1.0],
    )
    folder = made_dir(path)
    vae.save_pretrained(folder)
    return folder
