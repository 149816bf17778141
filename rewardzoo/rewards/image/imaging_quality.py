"""Imaging quality: MUSIQ (Ke et al., ICCV 2021) through pyiqa's own architecture, as VBench scores a frame.

``score = MUSIQ(resize(x)) / 100``: the image's 8-bit values as a float 0-255 tensor, resized
(``resize: longer``, VBench's default: the longer side to 512 when it is longer, bilinear,
``antialias=False``; ``shorter`` / ``shorter_centercrop`` / null are VBench's other modes), divided
by 255, then pyiqa's MUSIQ (its own ``[-1, 1]`` scaling and multi-scale patches, 224 and 384 plus the
native resolution). The network is ``pyiqa.archs.musiq_arch.MUSIQ`` built with ``pretrained=False``;
the weights are loaded here (``weights_only=True`` or safetensors), never through pyiqa's unpickling loader.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import torch
from torchvision.transforms import functional as TF

from ...errors import ConfigError, InputError, MissingExtraError
from ...shared.image_ops import CHUNK_BYTES, bilinear_plane, float_batches
from ...shared.weights import load_state_dict, strip_prefix
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.weights import resolve_weights_file
from ..options import RewardOptions, field_validator

#: pyiqa metric names -> the checkpoint of ``pyiqa.archs.musiq_arch.default_model_urls`` (0-100 MOS heads).
PYIQA_CHECKPOINTS = {"musiq-spaq": "spaq", "musiq": "koniq10k", "musiq-koniq": "koniq10k", "musiq-paq2piq": "paq2piq"}
DEFAULT_CHECKPOINT = "musiq-spaq"  # VBench's imaging quality (musiq_spaq_ckpt-358bb6af.pth)
VBENCH_SIDE = 512


def musiq_class():
    try:
        from pyiqa.archs.musiq_arch import MUSIQ
    except ImportError as exc:  # pyiqa itself, or cv2, which pyiqa imports at import time
        missing = getattr(exc, "name", None) or "pyiqa"
        module = "opencv-python-headless" if missing == "cv2" else "pyiqa" if missing.startswith("pyiqa") else missing
        raise MissingExtraError("imaging_quality", module, None) from exc
    return MUSIQ


def checkpoint_file(model_path: str | None) -> str:
    """A local weights file: a pyiqa metric name (its published checkpoint, downloaded), or any path/URL/hub file."""
    name = model_path or DEFAULT_CHECKPOINT
    if name == "musiq-ava":
        raise ConfigError(
            "musiq-ava is an aesthetic 10-class head (scores 1-10), not a 0-100 quality MOS; "
            "use musiq-spaq (VBench), musiq or musiq-paq2piq",
            field="model_path",
        )
    if name in PYIQA_CHECKPOINTS:
        musiq_class()
        from pyiqa.archs.musiq_arch import default_model_urls

        name = default_model_urls[PYIQA_CHECKPOINTS[name]]
    return resolve_weights_file(name)


def load_musiq(path: str, arch: Mapping[str, Any] | None = None) -> torch.nn.Module:
    """pyiqa's MUSIQ (``pretrained=False``, ``**arch``; the number of head outputs from the checkpoint) with the
    state dict of ``path`` loaded strictly (a ``module.`` prefix is dropped, as pyiqa does)."""
    MUSIQ = musiq_class()
    try:
        state = strip_prefix(load_state_dict(path), ("module.",))
    except InputError as exc:
        raise ConfigError(exc.message, field="model_path") from None
    head = state.get("head.weight", state.get("head.0.weight"))
    if head is None:
        raise ConfigError(
            f"'{path}' is not a MUSIQ checkpoint (no 'head.weight'; keys: {sorted(state)[:6]})", field="model_path"
        )
    if head.shape[0] != 1:
        raise ConfigError(
            f"'{path}' has a {head.shape[0]}-class head (a score distribution, e.g. AVA's 1-10); "
            "imaging_quality needs a single 0-100 MOS output",
            field="model_path",
        )
    options = dict(arch or {})
    bad = sorted(set(options) & {"pretrained", "pretrained_model_path", "num_class"})
    if bad:
        raise ConfigError(f"kwargs.arch must not set {bad}: the weights come from model_path", field="kwargs.arch")
    try:
        net = MUSIQ(pretrained=False, num_class=1, **options)
    except TypeError as exc:
        raise ConfigError(f"kwargs.arch: {exc}", field="kwargs.arch") from None
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ConfigError(
            f"'{path}' does not fit MUSIQ({options or 'pyiqa defaults'}): {str(exc)[:400]}", field="model_path"
        ) from None
    return net.eval().requires_grad_(False)


def vbench_resize(image: torch.Tensor, mode: str | None, side: int = VBENCH_SIDE) -> torch.Tensor:
    """VBench's imaging-quality preprocessing of (N, 3, H, W) float 0-255 values -> [0, 1].

    ``longer`` / ``shorter``: when that side exceeds ``side``, resize to ``(int(s * h), int(s * w))`` with
    ``s = side / that side`` (bilinear, no antialias); ``shorter_centercrop`` also centre-crops ``side``;
    None: no resize. Then divide by 255.
    """
    h, w = image.shape[-2:]
    ref = max(h, w) if mode == "longer" else min(h, w)
    if mode is not None and ref > side:
        scale = side / ref
        image = TF.resize(image, [int(scale * h), int(scale * w)], antialias=False)
        if mode == "shorter_centercrop":
            image = TF.center_crop(image, side)
    return image / 255.0


class ImagingQuality(PointwiseReward):
    """MUSIQ technical quality as in VBench's imaging quality: ``MUSIQ(resize(x)) / 100``, about 0-1.

    Inputs: ``image``. ``model_path``: a pyiqa metric name (``musiq-spaq``, VBench's and the default;
    ``musiq`` = KonIQ-10k; ``musiq-paq2piq``), whose published checkpoint is downloaded, or a local
    ``.pth``/``.safetensors`` file, URL or hub file with pyiqa's MUSIQ key names; options: :class:`Options`. Score range unbounded (a linear head), about 0-1.
    """

    inputs = Inputs(("image",), images="native")

    class Options(RewardOptions):
        resize: Literal["longer", "shorter", "shorter_centercrop"] | None = "longer"
        """VBench's preprocessing to 512 pixels: ``longer``, ``shorter``, ``shorter_centercrop`` or null (none; the
        text ``none`` is read as null)."""
        arch: dict[str, Any] | None = None
        """Keyword arguments of ``pyiqa.archs.musiq_arch.MUSIQ`` (default pyiqa's, those of the published
        checkpoints)."""

        @field_validator("resize", mode="before")
        @classmethod
        def _none_text(cls, value: Any) -> Any:
            return None if isinstance(value, str) and value.lower() == "none" else value

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        self.resize, arch = self.options.resize, self.options.arch
        self.net = load_musiq(checkpoint_file(model_path), arch).to(device=device, dtype=self.dtype)

    def __call__(self, image: Sequence[torch.Tensor] | torch.Tensor, **_: Any) -> RewardOutput:
        return RewardOutput(self.musiq(image) / 100.0)

    def musiq(self, images: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
        """pyiqa's MUSIQ score (0-100 scale) of each image (3, H, W), uint8 or float in [0, 1], after VBench's resize.

        Images of one size run as batches of :data:`~rewardzoo.shared.image_ops.CHUNK_BYTES` as float32 (a batch
        of 4K images one by one); the 8-bit grid is restored first (``round(x * 255)``). An image that VBench
        resizes is resized one colour plane at a time from its 8-bit values
        (:func:`~rewardzoo.shared.image_ops.bilinear_plane`), so a 4K image is never held as float32."""
        scores = torch.empty(len(images), dtype=torch.float64)
        by_size: dict[tuple[int, ...], list[int]] = {}
        for i, img in enumerate(images):
            by_size.setdefault(tuple(img.shape), []).append(i)
        with torch.inference_mode():
            for idx in by_size.values():
                for chunk, x in self._batches(images, idx):
                    out = self.net(x.to(self.dtype))
                    scores[chunk] = out.reshape(len(chunk)).double().cpu()
        return scores

    def _batches(self, images: Sequence[torch.Tensor], idx: list[int]) -> Iterator[tuple[list[int], torch.Tensor]]:
        """(indices, VBench-preprocessed float batch) for same-sized ``images[idx]``, chunked as
        :func:`~rewardzoo.shared.image_ops.float_batches` chunks them."""
        h, w = images[idx[0]].shape[-2:]
        ref = max(h, w) if self.resize == "longer" else min(h, w)
        if self.resize is None or ref <= VBENCH_SIDE:  # the model reads the full size: its input is float anyway
            for chunk, x in float_batches(images, idx, device=self.device):
                yield chunk, vbench_resize(x.mul_(255.0).round_().clamp_(0.0, 255.0), self.resize)
            return
        step = max(1, CHUNK_BYTES // (12 * h * w))
        for a in range(0, len(idx), step):
            chunk = idx[a : a + step]
            yield chunk, torch.cat([self._resized(images[i]) for i in chunk])

    def _resized(self, image: torch.Tensor) -> torch.Tensor:
        """One image (3, H, W), uint8 or float in [0, 1], as VBench resizes it: (1, 3, h, w) in [0, 1], a plane at a
        time through :func:`~rewardzoo.shared.image_ops.bilinear_plane` (never the whole image as float32)."""
        h, w = image.shape[-2:]
        scale = VBENCH_SIDE / (max(h, w) if self.resize == "longer" else min(h, w))
        size = (int(scale * h), int(scale * w))
        planes = []
        for plane in image.to(self.device):
            if plane.dtype != torch.uint8:  # the 8-bit grid, as float_batches' path restores it
                plane = (plane * 255.0).round_().clamp_(0, 255).to(torch.uint8)
            planes.append(bilinear_plane(plane, size))
        resized = torch.stack(planes)[None]
        if self.resize == "shorter_centercrop":
            resized = TF.center_crop(resized, VBENCH_SIDE)
        return resized / 255.0
