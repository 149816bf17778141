"""Media for the verifier tests, made by the tests: Pillow-rendered text and benign photos.

- :func:`render_text`: text in Pillow's own scalable font (``ImageFont.load_default(size=...)``,
  Pillow >= 10.1) centred on a plain background, optionally rotated a few degrees;
- :func:`benign_photos`: crops, resizes, flips and rotations of matplotlib's sample portrait
  (``grace_hopper.jpg``, a public-domain U.S. Navy photo), the one photograph of a person that ships
  in a package of the dev extra; a detector needs a real face to detect anything.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont


def render_text(
    text: str,
    size: int = 48,
    *,
    background=(255, 255, 255),
    ink=(0, 0, 0),
    angle: float = 0.0,
    width: int = 512,
    height: int = 512,
) -> Image.Image:
    """``text`` drawn in Pillow's default scalable font, centred, rotated by ``angle`` degrees."""
    img = Image.new("RGB", (width, height), background)
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=size)
    left, top, right, bottom = draw.multiline_textbbox((0, 0), text, font=font)
    draw.multiline_text(
        ((width - (right - left)) / 2 - left, (height - (bottom - top)) / 2 - top), text, font=font, fill=ink
    )
    if angle:
        img = img.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=background)
    return img


def benign_photos() -> list[Image.Image]:
    """Variants of a benign portrait photo (skips the test when matplotlib's sample data is missing)."""
    matplotlib = pytest.importorskip("matplotlib")
    path = os.path.join(matplotlib.get_data_path(), "sample_data", "grace_hopper.jpg")
    if not os.path.isfile(path):
        pytest.skip("matplotlib's sample photo grace_hopper.jpg is not installed")
    photo = Image.open(path).convert("RGB")
    width = photo.width
    return [
        photo,
        photo.resize((300, 380)),
        photo.crop((100, 0, width, 300)),
        photo.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
        photo.rotate(10),
        Image.fromarray(np.clip(np.asarray(photo, dtype=np.int16) + 40, 0, 255).astype(np.uint8)),
        photo.resize((160, 200)).crop((0, 0, 160, 120)),
    ]


def synthetic_images(seed: int = 0) -> list[Image.Image]:
    """Plain generated images: a gradient, noise, shapes, rendered text."""
    rng = np.random.default_rng(seed)
    gradient = (np.linspace(0, 255, 400)[None, :, None] * np.ones((200, 1, 3))).astype(np.uint8)
    shapes = Image.new("RGB", (320, 256), (40, 90, 160))
    draw = ImageDraw.Draw(shapes)
    draw.ellipse((40, 30, 200, 190), fill=(230, 180, 150))
    draw.rectangle((210, 60, 300, 240), fill=(250, 220, 40))
    return [
        Image.fromarray(gradient),
        Image.fromarray(rng.integers(0, 256, (240, 300, 3), dtype=np.uint8)),
        shapes,
        render_text("Hello", 40, width=256, height=256),
    ]
