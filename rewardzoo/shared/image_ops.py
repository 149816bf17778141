"""Batched, tensor-native image preprocessing for CLIP-style encoders.

One function does the whole job: :func:`preprocess_images` takes a list of images (PIL, tensors,
NumPy arrays or paths, mixed sizes allowed) or one ``(N, C, H, W)`` tensor and returns one normalised
float batch ``(N, 3, S, S)`` on the requested device. Images of equal size are resized together in
one call; RGB PIL images of one size are copied once into a single channels-last uint8 buffer.

Why uint8 first: resizing the 8-bit tensor (torch's antialiased bicubic/bilinear kernels accept
uint8 on the CPU) and converting to float only at ``S x S`` is ~4x faster than PIL and gives the same
pixels PIL does to within rounding. Every input is therefore quantised to 8 bits first, with
``round(x * 255)`` for float input (the convention of :mod:`rewardzoo.shared.media`), so a float
tensor and the PIL image made from it score identically. On accelerators the resize runs in float
and is rounded back to 8-bit values, which keeps the result equal to the CPU path up to rounding.

Resize modes (open_clip's names):

- ``shortest``: shorter side to ``S`` (longer side ``int(S * long / short)``), then a centre crop
  (offsets ``int(round((H - S) / 2))``), as torchvision's ``Resize(S)`` + ``CenterCrop(S)``.
- ``longest`` (letterbox, HPSv2): longer side to ``S`` (other side ``round(dim * S / long)``), then
  zero padding to ``S x S`` with ``pad // 2`` on the left/top and the rest on the right/bottom.
- ``squash``: resize to ``S x S`` ignoring the aspect ratio.

Then ``(x / 255 - mean) / std`` per channel, in float32, cast to the requested dtype.

Images leave as RGB: grayscale is repeated, an alpha channel dropped (as PIL's ``convert("RGB")``).
Unusable input raises :class:`~rewardzoo.errors.InputError` naming the field and the sample.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from ..errors import InputError
from .media import tensor_to_uint8, to_uint8_tensor
from .options import positive_int

#: OpenAI CLIP normalisation constants (also used by open_clip's OpenAI/LAION weights and HF CLIP).
OPENAI_CLIP_MEAN: tuple[float, float, float] = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD: tuple[float, float, float] = (0.26862954, 0.26130258, 0.27577711)

RESIZE_MODES = ("shortest", "longest", "squash")
INTERPOLATIONS = ("bicubic", "bilinear")


@dataclass(frozen=True)
class PreprocessConfig:
    """How images become model input: target ``size``, ``resize_mode``, ``interpolation``, ``fill``
    (0-255 pad value for ``longest``), per-channel ``mean``/``std`` (for pixels in [0, 1]) and
    ``antialias`` (default True, as PIL / open_clip; False = torch's plain kernel, as VBench's
    ``Resize(..., antialias=False)``; without antialiasing the resize runs in float, then is rounded
    back to 8-bit values in :func:`preprocess_images`)."""

    size: int = 224
    mean: tuple[float, float, float] = OPENAI_CLIP_MEAN
    std: tuple[float, float, float] = OPENAI_CLIP_STD
    resize_mode: str = "shortest"
    interpolation: str = "bicubic"
    fill: int = 0
    antialias: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.antialias, bool):
            raise ValueError(f"antialias must be True or False, got {self.antialias!r}")
        if self.resize_mode not in RESIZE_MODES:
            raise ValueError(f"resize_mode must be one of {RESIZE_MODES}, got {self.resize_mode!r}")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(f"interpolation must be one of {INTERPOLATIONS}, got {self.interpolation!r}")
        positive_int(self.size, "size")
        object.__setattr__(self, "mean", tuple(float(m) for m in self.mean))
        object.__setattr__(self, "std", tuple(float(s) for s in self.std))

    def replace(self, **changes: Any) -> PreprocessConfig:
        """A copy with some fields changed (e.g. ``resize_mode="longest"`` for HPSv2)."""
        from dataclasses import replace

        return replace(self, **changes)


def resized_shape(height: int, width: int, config: PreprocessConfig) -> tuple[int, int]:
    """The (H, W) an image of ``height x width`` is resized to before cropping/padding."""
    s = config.size
    if config.resize_mode == "squash":
        return s, s
    if config.resize_mode == "shortest":
        if height <= width:
            return s, int(s * width / height)
        return int(s * height / width), s
    scale = s / float(max(height, width))
    return max(1, round(height * scale)), max(1, round(width * scale))


def _resize(batch: torch.Tensor, shape: tuple[int, int], interpolation: str, antialias: bool = True) -> torch.Tensor:
    """Resize of a uint8 batch (antialiased by default); returns uint8 (CPU, antialiased) or 8-bit-valued float."""
    if tuple(batch.shape[-2:]) == tuple(shape):
        return batch
    if antialias and batch.device.type == "cpu" and batch.dtype == torch.uint8:
        return F.interpolate(batch, size=shape, mode=interpolation, antialias=True)
    out = F.interpolate(batch.float(), size=shape, mode=interpolation, antialias=antialias, align_corners=False)
    return out.round_().clamp_(0, 255)


def _fit(batch: torch.Tensor, config: PreprocessConfig) -> torch.Tensor:
    """Resize + crop/pad a same-sized batch (n, 3, H, W) to (n, 3, S, S)."""
    h, w = batch.shape[-2:]
    rh, rw = resized_shape(h, w, config)
    batch = _resize(batch, (rh, rw), config.interpolation, config.antialias)
    s = config.size
    if config.resize_mode == "shortest":
        top, left = int(round((rh - s) / 2.0)), int(round((rw - s) / 2.0))
        return batch[..., top : top + s, left : left + s]
    if config.resize_mode == "longest" and (rh, rw) != (s, s):
        pad_h, pad_w = s - rh, s - rw
        out = batch.new_full((batch.shape[0], 3, s, s), config.fill)
        out[..., pad_h // 2 : pad_h // 2 + rh, pad_w // 2 : pad_w // 2 + rw] = batch
        return out
    return batch


def preprocess_images(
    images: Sequence[Any] | torch.Tensor,
    config: PreprocessConfig,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    field: str = "image",
) -> torch.Tensor:
    """Images -> normalised model input ``(N, 3, S, S)`` on ``device`` in ``dtype``.

    ``images``: a sequence of images (see :func:`to_uint8_tensor`; sizes may differ) or one batched
    tensor ``(N, C, H, W)`` (e.g. video frames). Same-sized images are resized in one batched call.
    A bad image raises :class:`InputError` with ``field`` and ``sample`` (its index in ``images``).
    """
    device = torch.device(device)
    if isinstance(images, torch.Tensor) and images.ndim == 4:
        images = list(images.unbind(0)) if images.shape[1] not in (1, 3, 4) else images
    n = len(images)
    if n == 0:
        raise InputError("no images to preprocess", field=field)
    if isinstance(images, torch.Tensor):  # one batched tensor: a single group
        if 0 in images.shape:
            raise InputError(f"empty image batch of shape {tuple(images.shape)}", field=field)
        batch = images
        groups = {("batch",): (list(range(n)), lambda a, b: _batch_to_uint8(batch, a, b, device, field))}
    else:
        groups = _group(images, device, field)
    fitted_dtype = torch.uint8 if device.type == "cpu" else torch.float32
    out = torch.empty((n, 3, config.size, config.size), dtype=fitted_dtype, device=device)
    for key, (idx, make) in groups.items():
        size = tuple(images.shape if isinstance(images, torch.Tensor) else key)
        step = max(1, CHUNK_BYTES // (3 * int(size[-2]) * int(size[-1])))
        for a in range(0, len(idx), step):
            chunk = idx[a : a + step]
            out[torch.tensor(chunk, device=device)] = _fit(make(a, a + len(chunk)), config).to(fitted_dtype)
    return normalize(out, config, dtype=dtype)


#: Bytes of full-size 8-bit images stacked and resized at a time (:func:`preprocess_images`): a batch of large
#: images (8 of 3840x2160 are 190 MiB) is never stacked whole, only in chunks of about this size.
CHUNK_BYTES = 1 << 26


Maker = Any  # (start, stop) -> uint8 batch (k, 3, H, W) of a group's images start:stop


def _group(images: Sequence[Any], device: torch.device, field: str) -> dict[Any, tuple[list[int], Maker]]:
    """Same-sized images as makers of uint8 batches (k, 3, H, W) on ``device``, with their indices; keys end
    with (H, W).

    RGB PIL images (the common case) and uint8 (H, W, 3) arrays (a server's raw images, read-only views of the
    request) are copied straight into one (k, H, W, 3) buffer per chunk: one copy, and a channels-last batch, the
    layout the uint8 resize is fastest on.
    """
    pil: dict[tuple[int, int], list[int]] = {}
    tensors: dict[int, torch.Tensor] = {}
    for i, img in enumerate(images):
        if isinstance(img, Image.Image) and img.mode == "RGB" and img.width > 0 and img.height > 0:
            pil.setdefault((img.height, img.width), []).append(i)
            continue
        if _rgb_array(img):
            pil.setdefault(img.shape[:2], []).append(i)
            continue
        try:
            tensors[i] = to_uint8_tensor(img, device=device)
        except InputError as exc:
            raise exc.located(field=field, sample=i) from None
    groups: dict[Any, tuple[list[int], Maker]] = {}

    def pil_batch(idx: list[int], a: int, b: int) -> torch.Tensor:
        first = images[idx[0]]
        h, w = first.shape[:2] if isinstance(first, np.ndarray) else (first.height, first.width)
        buf = np.empty((b - a, h, w, 3), dtype=np.uint8)
        for k, i in enumerate(idx[a:b]):
            buf[k] = np.asarray(images[i])
        return torch.from_numpy(buf).permute(0, 3, 1, 2).to(device)

    for (h, w), idx in pil.items():
        groups[("pil", h, w)] = (idx, partial(pil_batch, idx))
    by_size: dict[tuple[int, int], list[int]] = {}
    for i, t in tensors.items():
        by_size.setdefault(tuple(t.shape[-2:]), []).append(i)
    for shape, idx in by_size.items():
        key = ("tensor", *shape)  # (a starred item inside [] needs Python 3.11)
        groups[key] = (idx, lambda a, b, idx=idx: _stack([tensors[i] for i in idx[a:b]]))
    return groups


def _rgb_array(img: Any) -> bool:
    """A non-empty uint8 (H, W, 3) array (copied into a chunk's buffer like an RGB PIL image)."""
    return (
        isinstance(img, np.ndarray) and img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3 and img.size > 0
    )


def _stack(images: list[torch.Tensor]) -> torch.Tensor:
    """Stack (3, H, W) images; views of (H, W, 3) arrays (PIL/NumPy input) are stacked as (N, H, W, 3) and
    returned as a channels-last (N, 3, H, W) view: a plain copy, and the layout the uint8 resize is fastest on."""
    if all(t.permute(1, 2, 0).is_contiguous() for t in images):
        return torch.stack([t.permute(1, 2, 0) for t in images]).permute(0, 3, 1, 2)
    return torch.stack(images)


def _batch_to_uint8(batch: torch.Tensor, a: int, b: int, device: torch.device, field: str) -> torch.Tensor:
    """Images ``a:b`` of a (N, C, H, W) tensor -> uint8 (k, 3, H, W) on ``device`` (validated like single
    images; an error names the offending image)."""
    try:
        return tensor_to_uint8(batch[a:b].to(device))
    except InputError as exc:
        for i in range(a, b):  # find the offending frame for the message
            try:
                to_uint8_tensor(batch[i])
            except InputError as frame_exc:
                raise frame_exc.located(field=field, sample=i) from None
        raise exc.located(field=field) from None


def float_batches(
    images: Sequence[torch.Tensor], indices: Sequence[int], *, device: torch.device | str = "cpu"
) -> Iterator[tuple[list[int], torch.Tensor]]:
    """Same-shaped images ``images[i]`` for ``i`` in ``indices`` (uint8 or float (3, H, W), the ``"native"``
    form) as float32 batches (k, 3, H, W) in [0, 1] on ``device``, of about :data:`CHUNK_BYTES` each (at least
    one image): ``x.float() / 255`` of uint8 images (the ``"float"`` form's values), float images as they are.
    Each batch is filled in place, image by image, so a batch of large images is never held as float32."""
    indices = list(indices)
    if not indices:
        return
    h, w = images[indices[0]].shape[-2:]
    step = max(1, CHUNK_BYTES // (12 * h * w))
    for a in range(0, len(indices), step):
        chunk = indices[a : a + step]
        out = torch.empty((len(chunk), 3, h, w), dtype=torch.float32, device=device)
        for k, i in enumerate(chunk):
            out[k].copy_(images[i])
            if images[i].dtype == torch.uint8:
                out[k].div_(255.0)
        yield chunk, out


def normalize(pixels: torch.Tensor, config: PreprocessConfig, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """8-bit-valued pixels (N, 3, S, S) -> ``(x / 255 - mean) / std`` in ``dtype``."""
    mean = torch.tensor(config.mean, dtype=torch.float64)
    std = torch.tensor(config.std, dtype=torch.float64)
    scale = (1.0 / (255.0 * std)).to(pixels.device, torch.float32).view(1, 3, 1, 1)
    bias = (-mean / std).to(pixels.device, torch.float32).view(1, 3, 1, 1)
    # one contiguous float copy, then two in-place passes (4x faster than dividing a channels-last view)
    x = pixels.to(torch.float32, memory_format=torch.contiguous_format).mul_(scale).add_(bias)
    return x if dtype == torch.float32 else x.to(dtype)


def preprocess_pixels(
    pixels: torch.Tensor, config: PreprocessConfig, *, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Differentiable preprocessing: float pixels (N, 3, H, W) in [0, 1] -> normalised (N, 3, S, S).

    The same steps, in the same order, as :func:`preprocess_images` (resize, antialiased unless
    ``config.antialias`` is False, with
    :func:`resized_shape`, centre crop with the same offsets or letterbox padding with ``fill / 255``,
    then ``(x - mean) / std``), but in floating point throughout: no 8-bit quantisation, no PIL, no
    NumPy, no ``no_grad``, no clamping, so gradients flow back to ``pixels`` (the DRaFT/ReFL/AlignProp
    path). Compared with :func:`preprocess_images` on the same float input the result differs only by
    the 8-bit rounding that path applies (at most about one 8-bit level before normalisation).
    ``dtype``: the output dtype (default: that of ``pixels``; float64 input stays float64 for
    gradient checks). Stays on ``pixels.device``.
    """
    if not isinstance(pixels, torch.Tensor) or pixels.ndim != 4 or pixels.shape[1] != 3:
        shape = tuple(pixels.shape) if isinstance(pixels, torch.Tensor) else type(pixels).__name__
        raise InputError(f"expected float pixels of shape (N, 3, H, W) in [0, 1], got {shape}", field="image")
    if not pixels.is_floating_point():
        raise InputError(f"expected float pixels in [0, 1], got dtype {pixels.dtype}", field="image")
    if 0 in pixels.shape:
        raise InputError(f"empty image batch of shape {tuple(pixels.shape)}", field="image")
    h, w = pixels.shape[-2:]
    rh, rw = resized_shape(h, w, config)
    x = pixels
    if (rh, rw) != (h, w):
        x = F.interpolate(x, size=(rh, rw), mode=config.interpolation, antialias=config.antialias, align_corners=False)
    s = config.size
    if config.resize_mode == "shortest":
        top, left = int(round((rh - s) / 2.0)), int(round((rw - s) / 2.0))
        x = x[..., top : top + s, left : left + s]
    elif config.resize_mode == "longest" and (rh, rw) != (s, s):
        pad_h, pad_w = s - rh, s - rw
        x = F.pad(x, (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2), value=config.fill / 255.0)
    mean = torch.tensor(config.mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(config.std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    x = (x - mean) / std
    return x if dtype is None else x.to(dtype)


def bilinear_plane(plane: torch.Tensor, size: tuple[int, int], band: int = 64) -> torch.Tensor:
    """One 8-bit plane (H, W) resized to ``size`` as torch's bilinear interpolation does it (``align_corners=False``,
    no antialias): ``src = max(scale * (i + 0.5) - 0.5, 0)`` per axis in float32, each output pixel the weighted sum
    of its 2x2 neighbours. Returns float32 of the 8-bit values' scale. Only the two input rows each output row reads
    are converted to float, ``band`` output rows at a time, so a 4K plane is never held as float32. Equal to
    ``F.interpolate`` on the float plane up to float32 rounding (which torch's own result varies by with its thread
    count: ~1e-7 relative)."""
    in_h, in_w = plane.shape
    out_h, out_w = size
    y0, y1, wy0, wy1 = _linear_axis(in_h, out_h)
    x0, x1, wx0, wx1 = _linear_axis(in_w, out_w)
    out = torch.empty((out_h, out_w), dtype=torch.float32, device=plane.device)
    for a in range(0, out_h, band):
        rows = slice(a, a + band)
        top, bottom = plane[y0[rows]].float(), plane[y1[rows]].float()
        top = wx0 * top[:, x0] + wx1 * top[:, x1]
        bottom = wx0 * bottom[:, x0] + wx1 * bottom[:, x1]
        out[rows] = wy0[rows, None] * top + wy1[rows, None] * bottom
    return out


def _linear_axis(n_in: int, n_out: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(first index, second index, first weight, second weight) of each output position along one axis."""
    scale = torch.tensor(n_in, dtype=torch.float32) / torch.tensor(n_out, dtype=torch.float32)
    src = ((torch.arange(n_out, dtype=torch.float32) + 0.5) * scale - 0.5).clamp_(min=0.0)
    first = src.long()
    second = (first + 1).clamp_(max=n_in - 1)
    weight = src - first.float()
    return first, second, 1.0 - weight, weight
