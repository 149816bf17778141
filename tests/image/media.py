"""Generated test media for tests/image (no files committed)."""

from __future__ import annotations

import numpy as np
from PIL import Image


def make_images(n: int, size=(96, 80), seed: int = 0) -> list[Image.Image]:
    """Smooth random RGB images (upsampled noise) of (width, height) `size` (or a list of sizes)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        w, h = size if not isinstance(size, list) else size[i % len(size)]
        low = rng.integers(0, 256, (max(2, h // 8), max(2, w // 8), 3), dtype=np.uint8)
        img = Image.fromarray(low).resize((w, h), Image.BICUBIC)
        out.append(img)
    return out


PROMPTS = ["a photo of a cat", "a red car on a street", "an astronaut riding a horse", "a bowl of soup",
           "two dogs playing in the snow at night", "a cat"]
