"""HPSv2 / HPSv2.1 (Wu et al., 2023): human preference score from a fine-tuned open_clip ViT-H/14.

``score = cos(E_image, E_text)`` (no temperature; the card's ``typical_range`` says what real weights
score). Images are letterboxed as in the HPSv2 repository: longest side to 224 (bicubic, other side
``round(dim * 224 / longest)``), then zero padding to a square (``pad // 2`` left/top), then the
OpenAI CLIP normalisation — not a centre crop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch

from ...shared.checkpoints import Checkpoint, resolve_checkpoint
from ...shared.device import autocast_context, autocast_dtype
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import check_pairs, load_clip_backbone
from ..models.weights import resolve_weights_file
from ..options import Autocast, RewardOptions, WeightPath

#: HPSv2's ``img_score.py`` scores under ``torch.cuda.amp.autocast()`` (float16) with float32 weights.
REFERENCE_AUTOCAST = {"cuda": "float16"}


class HPSv2(PointwiseReward):
    """HPSv2/2.1: ``cos(image, prompt)`` with the HPS checkpoint loaded into open_clip ``ViT-H-14``.

    Inputs: ``image`` and ``prompt``. Range [-1, 1]. The checkpoint comes from ``model_path``: a
    ``.pt``/``.safetensors`` file, a directory or hub repository holding the version's file (default
    ``xswu/HPSv2``); options: :class:`Options`.
    """

    inputs = Inputs(("image", "prompt"), images="uint8")
    default_repo: ClassVar[str] = "xswu/HPSv2"
    files: ClassVar[dict[str, str]] = {"v2.0": "HPS_v2_compressed.pt", "v2.1": "HPS_v2.1_compressed.pt"}

    class Options(RewardOptions):
        version: Literal["v2.0", "v2.1"] = "v2.1"
        """Which checkpoint file: ``v2.1`` (``HPS_v2.1_compressed.pt``) or ``v2.0`` (``HPS_v2_compressed.pt``)."""
        clip_model: WeightPath = "ViT-H-14"
        """The open_clip architecture (or hub-style directory) the checkpoint fits."""
        autocast: Autocast = "auto"
        """``auto``: float16 autocast on CUDA as HPSv2's ``img_score.py``, none on the CPU; null; or ``float16`` /
        ``bfloat16``. The weights stay in ``dtype``."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        version, clip_model = self.options.version, self.options.clip_model
        self.autocast = autocast_dtype(self.options.autocast, device, REFERENCE_AUTOCAST)
        self.version = version
        checkpoint = resolve_weights_file(model_path or self.default_repo, filename=self.files[version])
        self.backbone = load_clip_backbone(
            clip_model, backend="open_clip", device=device, dtype=self.dtype, pretrained=None, checkpoint=checkpoint
        )
        self.preprocess_config = self.backbone.preprocess_config.replace(resize_mode="longest", fill=0)

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """The HPSv2 checkpoint of ``version`` (loaded over the whole open_clip model, built without pretrained
        weights): in ``model_path`` (a file, or a directory holding it), else in the cached ``xswu/HPSv2``."""
        name = cls.files.get(cls.configured(kwargs, "version"), "")
        source = model_path or cls.default_repo
        path = Path(source).expanduser()
        if path.is_file():
            return [resolve_checkpoint(source)]
        return [resolve_checkpoint(str(path / name) if path.is_dir() else f"{source.rstrip('/')}/{name}")]

    def __call__(self, image: Sequence[Any] | torch.Tensor, prompt: Sequence[str], **_: Any) -> RewardOutput:
        check_pairs(image=image, prompt=prompt)
        with autocast_context(self.device, self.autocast):
            text = self.backbone.encode_text(prompt)
            img = self.backbone.encode_images(image, self.preprocess_config)
            return RewardOutput(self.formula(img, text).float().cpu())

    def score_pixels(
        self, pixels: torch.Tensor, prompt: Sequence[str], *, gradient_checkpointing: bool = False, **_: Any
    ) -> torch.Tensor:
        """Differentiable HPSv2 of float pixels (B, 3, H, W) in [0, 1] -> (B,): letterbox in float, then
        the same model and :meth:`formula` as a call."""
        check_pairs(image=pixels, prompt=prompt)
        with autocast_context(self.device, self.autocast):
            text = self.backbone.encode_text(prompt)
            img = self.backbone.encode_pixels(
                pixels, self.preprocess_config, gradient_checkpointing=gradient_checkpointing
            )
            return self.formula(img, text)

    @staticmethod
    def formula(img: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """The score from L2-normalised features: ``cos(image, text)``."""
        return (img * text).sum(dim=-1)
