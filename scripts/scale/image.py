"""Image flagships at their real size (cases for ``scripts/scale_check.py``; interface in ``common.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scale.common import Case

PROMPT = "a photograph of an astronaut riding a horse on the moon, highly detailed, golden hour"
OPEN_CLIP_IMPORTS = ("torch", "open_clip", "safetensors.torch")


def image_sample(size: int = 1024, seed: int = 0) -> dict[str, Any]:
    """One generated image at the size text-to-image RL trains at (1024x1024 RGB uint8: SD3.5 / FLUX) and its
    prompt."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return {"image": rng.integers(0, 256, (size, size, 3), dtype=np.uint8), "prompt": PROMPT}


def _open_clip_dir(folder: Path, arch: str) -> None:
    """open_clip's hub layout (``open_clip_config.json`` + ``open_clip_model.safetensors``, as
    timm/vit_base_patch32_clip_224.openai ships it) of ``arch`` with random weights."""
    import open_clip

    from rewardzoo.testing.clip import CLIP_PREPROCESS, tiny_open_clip_dir

    tiny_open_clip_dir(folder, model_cfg=open_clip.get_model_config(arch), preprocess_cfg=CLIP_PREPROCESS)


def _open_clip_reference(arch: str, file: str):
    def load(folder: Path):
        import open_clip

        model, _, _ = open_clip.create_model_and_transforms(arch, pretrained=str(folder / file))
        return model.eval()

    return load


CASES = [
    Case(
        name="clip_score",
        reward="clip_score",
        build=lambda folder: _open_clip_dir(folder, "ViT-B-32"),
        entry=lambda folder: {"model_path": str(folder)},
        reference=_open_clip_reference("ViT-B-32", "open_clip_model.safetensors"),
        samples=lambda: [image_sample()],
        imports=OPEN_CLIP_IMPORTS,
        layout="open_clip hub directory: open_clip_config.json + open_clip_model.safetensors "
        "(timm/vit_base_patch32_clip_224.openai)",
    ),
]
