"""JPEG (in)compressibility: the model-free rewards of DDPO and flow_grpo.

``kB = len(JPEG(image, quality=95)) / 1000``; incompressibility = ``kB``, compressibility =
``-kB / 500`` (flow_grpo's scaling; DDPO used ``-kB``). Float inputs are quantised with
``round(x * 255)`` before encoding, as flow_grpo does.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any, ClassVar

from PIL import Image

from ...errors import InputError
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import Field, PositiveNumber, RewardOptions

#: The JPEG format's largest width or height.
JPEG_MAX_SIDE = 65_535


def jpeg_kilobytes(image: Image.Image, quality: int = 95) -> float:
    """Size in kB (1000 bytes) of ``image`` saved as JPEG at ``quality``."""
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=quality)
    return buf.tell() / 1000.0


class JpegIncompressibility(PointwiseReward):
    """Score = ``scale * kB`` with kB the JPEG size at quality 95 (default scale 1).

    Inputs: ``image`` (RGB PIL). Range [0, inf) kB; higher means more detail / harder to compress.
    """

    inputs = Inputs(("image",))
    sign: ClassVar[float] = 1.0

    class Options(RewardOptions):
        quality: int = Field(95, ge=1, le=100)
        """The JPEG quality the image is encoded at (95 as DDPO and flow_grpo)."""
        scale: PositiveNumber = 1.0
        """Multiplies the size in kB (positive: a sign flip would turn the reward's direction and range around)."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        self.quality = self.options.quality
        self.scale = self.options.scale

    def __call__(self, image: Sequence[Image.Image], **_: object) -> RewardOutput:
        for i, img in enumerate(image):
            if max(img.size) > JPEG_MAX_SIDE:
                raise InputError(
                    f"the image is {img.size[0]}x{img.size[1]}; JPEG encodes at most {JPEG_MAX_SIDE} pixels per side",
                    field="image",
                    sample=i,
                )
        kb = [jpeg_kilobytes(img, self.quality) for img in image]
        return RewardOutput([self.sign * self.scale * k for k in kb], extras={"jpeg_kb": kb})


class JpegCompressibility(JpegIncompressibility):
    """Score = ``-kB / 500`` (flow_grpo; set ``scale: 1`` for DDPO's ``-kB``).

    Inputs: ``image`` (RGB PIL). Range (-inf, 0]; higher means smaller files.
    """

    sign: ClassVar[float] = -1.0

    class Options(JpegIncompressibility.Options):
        scale: PositiveNumber = 1 / 500
        """Multiplies ``-kB``: ``1/500`` as flow_grpo; ``1`` gives DDPO's ``-kB``."""
