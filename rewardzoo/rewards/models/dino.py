"""The DINO backbone (a transformers ViT / DINOv2): the CLS token of the last layer, after its norm.

Used by VBench subject consistency (:mod:`rewardzoo.rewards.video.consistency`) and group diversity
(:mod:`rewardzoo.rewards.group.diversity`). Preprocessing as VBench's DINO: shorter side resized to ``resize``
(bilinear, no antialias), no crop, ImageNet mean/std. ``model_path``: a hub id or local directory of any
transformers ViT/DINOv2 checkpoint. One loaded copy per (path, device, dtype) in the process.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any

import torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as TF

from ...shared.weights import cannot_wake, loading

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_CACHE: dict[tuple[str, str, str], DinoBackbone] = {}
_LOCK = threading.Lock()


class DinoBackbone:
    """A loaded DINO model with its preprocessing; :meth:`features` gives the CLS token of each image."""

    def __init__(self, model_path: str, device: str | torch.device, dtype: torch.dtype) -> None:
        from transformers import AutoModel

        self.model_path, self.device, self.dtype = model_path, torch.device(device), dtype
        with loading(f"a DINO model from '{model_path}'"):
            try:  # ViT's pooler (dense + tanh) is unused: the feature is the normed CLS token
                model = AutoModel.from_pretrained(model_path, dtype=dtype, add_pooling_layer=False)
            except TypeError:  # architectures without that option (DINOv2)
                model = AutoModel.from_pretrained(model_path, dtype=dtype)
        self.model = model.to(self.device).eval()
        # transformers' ViT needs to be told to interpolate position embeddings for non-square inputs;
        # DINOv2 always does.
        params = inspect.signature(self.model.forward).parameters
        self._forward_kwargs: dict[str, Any] = (
            {"interpolate_pos_encoding": True} if "interpolate_pos_encoding" in params else {}
        )
        self._mean = torch.tensor(IMAGENET_MEAN, device=self.device).view(1, 3, 1, 1)
        self._std = torch.tensor(IMAGENET_STD, device=self.device).view(1, 3, 1, 1)

    def preprocess(self, frames: torch.Tensor, resize: int) -> torch.Tensor:
        """(T, 3, H, W) float in [0, 1] or uint8 -> normalised model input, shorter side ``resize``; the
        full-resolution float frames exist a few at a time (:func:`~rewardzoo.shared.video.frame_batches`)."""
        from ...shared.video import float_frames, frame_batches

        parts = []
        for chunk in frame_batches(frames):
            x = float_frames(chunk.to(self.device))
            x = TF.resize(x, resize, interpolation=InterpolationMode.BILINEAR, antialias=False)
            parts.append(((x - self._mean) / self._std).to(self.dtype))
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def features(self, pixels: torch.Tensor) -> torch.Tensor:
        """Preprocessed pixels (T, 3, h, w) -> CLS features (T, D) in the model's dtype."""
        out = self.model(pixel_values=pixels, **self._forward_kwargs)
        return out.last_hidden_state[:, 0]


def load_dino_backbone(model_path: str, device: str | torch.device, dtype: torch.dtype) -> DinoBackbone:
    """The process's copy of the DINO model at ``model_path`` on ``device`` in ``dtype`` (loaded on first use)."""
    key = (str(model_path), str(torch.device(device)), str(dtype))
    with _LOCK:
        found = _CACHE.get(key)
        if found is None or cannot_wake(found):  # a fresh load, not weights that cannot wake
            found = _CACHE[key] = DinoBackbone(str(model_path), device, dtype)
        return found
