"""A timm image backbone: the model timm builds, timm's own eval transform for it, and its pooled output.

GARDO's diversity embedding (:mod:`rewardzoo.rewards.group.diversity`, ``preset: gardo``) is this with
``vit_large_patch16_dinov3.lvd1689m``: ``timm.create_model(name, pretrained=True)``, then
``timm.data.create_transform(**timm.data.resolve_model_data_config(model), is_training=False)`` applied to a
float batch in [0, 1] (for DINOv3: shorter side to 256, bicubic with antialias, centre crop 256, ImageNet
mean/std), then the model's pooled features, ``forward_head(forward_features(x), pre_logits=True)``: the
model's output when it has no classifier (``num_classes`` 0, as timm's DINOv3 configurations); for timm's
DINOv3 (``Eva`` with ``global_pool='avg'``, ``use_fc_norm=False``) the mean of the patch tokens after the final
LayerNorm, the CLS and register tokens left out.

``model_path``: a local directory holding timm's ``config.json`` and ``model.safetensors`` (what
``timm.models.save_for_hf`` or a hub snapshot of a timm model holds), loaded by timm as ``local-dir:PATH``; or a
timm model name / ``hf-hub:`` id, which timm fetches from the hub. One loaded copy per (path, device, dtype).
Needs ``timm`` (>= 1.0.20 for DINOv3), imported when a backbone is loaded.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ...errors import ConfigError, MissingExtraError
from ...shared.weights import cannot_wake, loading

_CACHE: dict[tuple[str, str, str], TimmBackbone] = {}
_LOCK = threading.Lock()


def timm_model_name(model_path: str) -> str:
    """The name timm's ``create_model`` takes: ``local-dir:PATH`` for a directory (which must hold timm's
    ``config.json`` and ``model.safetensors``), else ``model_path`` as given (a timm name or ``hf-hub:`` id)."""
    path = Path(model_path)
    if not path.is_dir():
        return model_path
    missing = [name for name in ("config.json", "model.safetensors") if not (path / name).is_file()]
    if missing:
        raise ConfigError(
            f"'{model_path}' is not a timm model directory: it lacks {' and '.join(missing)} "
            "(save one with timm.models.save_for_hf(model, dir, safe_serialization=True))",
            field="model_path",
        )
    return f"local-dir:{path}"


class TimmBackbone:
    """A loaded timm model with timm's eval transform for it; :meth:`features` gives its pooled output."""

    def __init__(self, model_path: str, device: Any, dtype: Any, *, reward: str = "a timm embedding") -> None:
        import torch

        try:
            import timm
            import timm.data
        except ImportError as exc:
            raise MissingExtraError(reward, "timm", "image") from exc
        name = timm_model_name(model_path)
        self.model_path, self.device, self.dtype = model_path, torch.device(device), dtype
        with loading(f"the timm model '{model_path}'"):
            model = timm.create_model(name, pretrained=True)
        self.model = model.to(self.device, dtype).eval()
        self.data_config = timm.data.resolve_model_data_config(self.model)
        self.transform = timm.data.create_transform(**self.data_config, is_training=False)

    def preprocess(self, images: Any) -> Any:
        """(N, 3, H, W) floats in [0, 1] -> timm's eval transform of the batch, in the model's dtype."""
        import torch

        return self.transform(images.to(self.device, torch.float32)).to(self.dtype)

    def features(self, pixels: Any) -> Any:
        """Transformed pixels -> the pooled features (N, D), without the classifier."""
        return self.model.forward_head(self.model.forward_features(pixels), pre_logits=True)


def load_timm_backbone(model_path: str, device: Any, dtype: Any, *, reward: str = "a timm embedding") -> TimmBackbone:
    """The process's copy of the timm model at ``model_path`` on ``device`` in ``dtype`` (loaded on first use);
    ``reward`` names the reward in the error raised when timm is not installed."""
    import torch

    key = (str(model_path), str(torch.device(device)), str(dtype))
    with _LOCK:
        found = _CACHE.get(key)
        if found is None or cannot_wake(found):  # a fresh load, not weights that cannot wake
            found = _CACHE[key] = TimmBackbone(str(model_path), device, dtype, reward=reward)
        return found
