"""Subject and background consistency (VBench): how similar each frame's features stay over time.

With L2-normalised per-frame features ``f_0 .. f_{T-1}``::

    score = mean_{i=1..T-1} (max(0, cos(f_{i-1}, f_i)) + max(0, cos(f_0, f_i))) / 2

Subject consistency uses DINO features (the CLS token of a self-supervised ViT), background
consistency CLIP image features. Identical frames give 1.0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from ...errors import InputError
from ...shared.video import check_temporal
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import ClipOptions, clip_reward_files
from ..models.dino import IMAGENET_MEAN, IMAGENET_STD, load_dino_backbone
from ..options import PositiveInt
from .vbench import CLIP_MEAN, CLIP_STD, VBenchOptions, vbench_transform


def vbench_consistency(features: torch.Tensor) -> float:
    """The VBench consistency score of per-frame features (T, D), T >= 2 (see module docstring)."""
    f = F.normalize(features.detach().to(torch.float64), dim=-1)
    to_prev = (f[1:] * f[:-1]).sum(-1).clamp_min(0.0)
    to_first = (f[1:] * f[:1]).sum(-1).clamp_min(0.0)
    return float(((to_prev + to_first) / 2).mean())


class FrameConsistency(PointwiseReward):
    """Base of the feature-consistency rewards: subclasses implement :meth:`features`.

    Inputs: ``video`` as a tensor (T, 3, H, W) in its native form (uint8 for 8-bit sources, else float in
    [0, 1]; converted to float a few frames at a time, at the model's resolution); options: :class:`Options`.
    Range [0, 1], higher is more consistent.
    A single frame has no temporal signal and raises InputError.
    """

    inputs = Inputs(("video",), frames="native")

    class Options(VBenchOptions):
        num_frames: PositiveInt | None = 16
        """Frames sampled uniformly from each video (null: every frame, as VBench)."""
        frame_batch_size: PositiveInt = 32
        """Frames per forward pass."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.preset = self.options.preset
        self.num_frames = self.options.sampled_frames()
        self.inputs = replace(self.inputs, num_frames=self.num_frames)
        self.frame_batch_size = self.options.frame_batch_size

    def features(self, frames: torch.Tensor) -> torch.Tensor:
        """Per-frame feature vectors (T, D) of a video (T, 3, H, W), uint8 or float in [0, 1]."""
        raise NotImplementedError

    @torch.inference_mode()
    def __call__(self, video: Sequence[torch.Tensor], **_: Any) -> RewardOutput:
        scores = []
        for i, frames in enumerate(video):
            check_temporal(frames, i)
            try:
                feats = torch.cat([self.features(chunk) for chunk in frames.split(self.frame_batch_size)])
            except InputError as exc:  # raised per frame by the image preprocessing: report the video
                raise exc.located(indices=(), sample=i, field="video", renamed={"image": "video"}) from None
            scores.append(vbench_consistency(feats))
        return RewardOutput(scores)


class SubjectConsistency(FrameConsistency):
    """VBench subject consistency on DINO features (CLS token of the last layer, after its norm;
    :mod:`rewardzoo.rewards.models.dino`, shared with ``group_diversity``).

    Preprocessing as VBench: shorter side resized to ``resize`` (224, bilinear, no antialias), no
    crop, ImageNet mean/std. ``model_path``: any transformers ViT/DINOv2 checkpoint (hub id or
    local directory; default ``facebook/dino-vitb16``, VBench's DINO ViT-B/16). Range [0, 1]; options:
    :class:`Options` (``preset: vbench``: every frame and VBench's ``dino_transform`` in its order and value
    range).
    """

    default_model: ClassVar[str] = "facebook/dino-vitb16"

    class Options(FrameConsistency.Options):
        resize: PositiveInt = 224
        """The shorter side (pixels) frames are resized to, as VBench."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        model_path = model_path or self.default_model
        super().__init__(model_path, device, dtype, **options)
        self.resize = self.options.resize
        self.backbone = load_dino_backbone(model_path, self.device, self.dtype)
        self.model = self.backbone.model

    def preprocess(self, frames: torch.Tensor) -> torch.Tensor:
        """(T, 3, H, W), uint8 or float in [0, 1] -> normalised model input, shorter side ``resize``."""
        if self.preset == "vbench":  # dino_transform: float 0-255 resize (bilinear, no antialias), /255, normalise
            x = vbench_transform(
                frames.to(self.device),
                size=self.resize,
                interpolation="bilinear",
                crop=False,
                mean=IMAGENET_MEAN,
                std=IMAGENET_STD,
            )
            return x.to(self.dtype)
        return self.backbone.preprocess(frames, self.resize)

    def features(self, frames: torch.Tensor) -> torch.Tensor:
        return self.backbone.features(self.preprocess(frames))


class BackgroundConsistency(FrameConsistency):
    """VBench background consistency on CLIP image features (same formula as subject consistency).

    Preprocessing is the backbone's own (for OpenAI CLIP: shorter side to 224 bicubic, centre crop,
    CLIP mean/std) through :mod:`rewardzoo.shared.image_ops`. ``preset: vbench``: every frame and VBench's
    ``clip_transform`` (float 0-255 bicubic resize without antialias, centre crop, /255, OpenAI CLIP mean/std). ``model_path``: an open_clip
    architecture (default ``ViT-B-32`` with ``pretrained: openai``, VBench's CLIP ViT-B/32), an
    open_clip hub id or hub-style directory, or a transformers CLIP directory/hub id
    (see :func:`rewardzoo.rewards.models.clip.load_clip_backbone`; the backbone is shared with every other
    reward that loads the same one). Range [0, 1]; options: :class:`Options`.
    """

    default_model: ClassVar[str] = "ViT-B-32"

    class Options(FrameConsistency.Options, ClipOptions):
        pass

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        from ..models.clip import load_clip_backbone

        self.backbone = load_clip_backbone(
            model_path or self.default_model,
            backend=self.options.backend,
            device=device,
            dtype=self.dtype,
            pretrained=self.options.pretrained,
            processor_path=self.options.processor_path,
        )

    weight_files = classmethod(clip_reward_files)  # the CLIP backbone's file

    def features(self, frames: torch.Tensor) -> torch.Tensor:
        if self.preset == "vbench":  # clip_transform(224): float 0-255 bicubic resize, no antialias, crop, /255
            x = vbench_transform(
                frames.to(self.backbone.device),
                size=self.backbone.image_size,
                interpolation="bicubic",
                crop=True,
                mean=CLIP_MEAN,
                std=CLIP_STD,
            )
            return self.backbone.encode_image(x)
        return self.backbone.encode_images(frames, field="video")
