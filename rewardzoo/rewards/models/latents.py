"""What the latent rewards share: their checkpoint folders, their seeded noise and the check of the latents they take.

Imports torch at module level (a latent reward imports it only when it is built) and huggingface_hub when a folder is
looked up in the local cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ...errors import InputError


def local_folder(source: str) -> Path | None:
    """``source`` as a local directory, or its hub snapshot already in the local cache (nothing is downloaded)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source, local_files_only=True))
    except Exception:  # not cached, not a repository id, or huggingface_hub missing
        return None


def seeded_noise(shape: torch.Size, seed: int | None) -> torch.Tensor:
    """Standard normal noise of ``shape`` on the CPU, drawn from ``seed`` (None: fresh noise, as the references)."""
    if seed is None:
        return torch.randn(shape)
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def image_latents(latent: Sequence[Any], channels: int, takes: str, reward: str) -> list[torch.Tensor]:
    """Each latent as a float32 (C, H, W) tensor (a leading batch of one dropped); an InputError naming ``reward``,
    ``latent`` and the sample for another shape, other than ``channels`` channels (what ``takes`` takes) or NaN / Inf."""
    out = []
    for i, value in enumerate(latent):
        x = torch.as_tensor(value)
        x = x[0] if x.dim() == 4 and x.shape[0] == 1 else x
        if x.dim() != 3 or x.shape[0] != channels:
            raise InputError(
                f"must be ({channels}, H, W) or (1, {channels}, H, W): {takes} takes {channels} channels, got shape "
                f"{tuple(x.shape)}",
                reward=reward,
                field="latent",
                sample=i,
            )
        if not torch.isfinite(x).all():
            raise InputError("holds NaN or Inf", reward=reward, field="latent", sample=i)
        out.append(x.float())
    return out
