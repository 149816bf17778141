"""Image conversion between file paths, PIL, NumPy and tensors.

Every image leaves here as RGB: alpha is dropped (as PIL's ``convert("RGB")`` and open_clip do),
grayscale is repeated, 16-bit input is scaled to 8 bits, and float input must already lie in [0, 1]
(a [-1, 1] VAE output is an error, not something to clip). NumPy arrays are (H, W[, C]) (or an unambiguous
(1|3, H, W)); tensors are (C, H, W) or (H, W). Float -> 8-bit uses ``round(x * 255)``, the convention of flow_grpo/DDPO.
Errors are :class:`~rewardzoo.errors.InputError` without location; the processor adds reward, field
and sample.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..errors import InputError
from . import sharedmem
from .files import regular_file

PathLike = (str, os.PathLike)


def is_path(value: Any) -> bool:
    return isinstance(value, PathLike)


def is_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def open_image(
    path: str | os.PathLike, max_pixels: int | None = None, draft: tuple[int, int] | None = None
) -> Image.Image:
    """Read an image file fully (so the file handle is closed); InputError when it cannot be read, or when its
    header says it has more than ``max_pixels`` pixels (checked before anything is decoded). ``draft``: a JPEG
    is decoded at the smallest scale (1/2 .. 1/8) still at least this size (for thumbnails)."""
    path = regular_file(path, "image")
    try:
        with Image.open(path) as img:
            if draft is not None:
                img.draft("RGB", draft)
            _check_size(img.size, max_pixels)
            img.load()
            return img
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(f"image file not found: '{path}'") from None
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, SyntaxError, ValueError) as exc:
        raise InputError(f"cannot read image file '{path}': {exc}") from None


def check_pixels(value: Any, max_pixels: int | None) -> Any:
    """``value`` (a path is opened: the image comes back) when it has at most ``max_pixels`` pixels.

    Works on the size alone for PIL images, arrays and tensors ((H, W[, C]) or (C, H, W)); None: no limit.
    """
    if max_pixels is None:
        return value
    if is_path(value):
        return open_image(value, max_pixels)  # measured from the file's header, decoded only when within
    if isinstance(value, Image.Image):
        w, h = value.size  # a lazily opened image is not decoded by asking its size
    else:
        shape = tuple(getattr(value, "shape", ()))
        if len(shape) == 3 and (is_tensor(value) or (shape[0] in (1, 3) and shape[-1] not in (1, 3, 4))):
            shape = shape[1:]
        if len(shape) < 2:
            return value  # not an image: the conversion says what is wrong with it
        h, w = shape[0], shape[1]
    _check_size((w, h), max_pixels)
    return value


def _check_size(size: tuple[int, int], max_pixels: int | None) -> None:
    w, h = size
    if max_pixels is not None and h * w > max_pixels:
        raise InputError(
            f"the image is {w}x{h} = {w * h} pixels, more than this reward's limit of {max_pixels} "
            "(raise it with `limits: {pixels: ...}` in the config entry)"
        )


def image_to_uint8(value: Any) -> np.ndarray:
    """Any supported image -> uint8 NumPy array (H, W, 3)."""
    if is_path(value):
        value = open_image(value)
    if isinstance(value, Image.Image):
        return _pil_to_uint8(value)
    if is_tensor(value):
        return to_uint8_tensor(value).permute(1, 2, 0).cpu().numpy()
    if isinstance(value, np.ndarray):
        if value.ndim == 3 and value.shape[0] in (1, 3) and value.shape[-1] not in (1, 3, 4):
            value = value.transpose(1, 2, 0)  # unambiguous (C, H, W) gray or RGB
        return _array_to_uint8(value)
    raise InputError(f"unsupported image type {type(value).__name__}; use a path, PIL image, NumPy array or tensor")


def images_to_uint8(images: Sequence[Any], field: str = "image") -> list[np.ndarray]:
    """Each image as a uint8 (H, W, 3) array (:func:`image_to_uint8`); errors name the field and sample."""
    out = []
    for i, value in enumerate(images):
        try:
            out.append(image_to_uint8(value))
        except InputError as exc:
            raise exc.located(field=field, sample=i) from None
    return out


def to_pil_rgb(value: Any) -> Image.Image:
    """Any supported image -> RGB PIL image (no copy for an RGB PIL input)."""
    if isinstance(value, Image.Image) and value.mode == "RGB":
        return value
    return Image.fromarray(image_to_uint8(value))


def to_uint8_tensor(value: Any, *, device: Any = None):
    """Any supported image -> uint8 tensor (3, H, W).

    A tensor input stays on its device (no round trip through the host) unless ``device`` is given;
    other inputs are built on the CPU. Float input is quantised with ``round(x * 255)``.
    """
    import torch

    if is_tensor(value):
        t = value.detach()
        if t.ndim == 2:
            t = t.unsqueeze(0)
        if t.ndim != 3 or t.shape[0] not in (1, 3, 4):
            hint = " (channels last?)" if t.ndim == 3 and t.shape[-1] in (1, 3, 4) else ""
            raise InputError(
                f"image tensors are (C, H, W) with C in 1, 3, 4, or (H, W); got shape {tuple(value.shape)}{hint}"
            )
        if 0 in t.shape:
            raise InputError(f"empty image of shape {tuple(value.shape)}")
        t = tensor_to_uint8(t)
    else:
        arr = image_to_uint8(value)
        if not (arr.flags.writeable and arr.flags.c_contiguous):
            arr = np.array(arr)  # PIL-backed arrays are read-only
        t = torch.from_numpy(arr).permute(2, 0, 1)
    return t if device is None else t.to(device)


def tensor_to_uint8(t):
    """Image tensor(s) ``(..., C, H, W)`` with C in 1, 3, 4 -> uint8 ``(..., 3, H, W)`` on the same device.

    Float values must lie in [0, 1], integers in [0, 255]; alpha is dropped, gray repeated.
    """
    import torch

    t = t.detach()
    if t.shape[-3] == 4:
        t = t[..., :3, :, :]
    if t.is_floating_point():
        check_unit_range(t)
        t = t.float().mul(255.0).round_().to(torch.uint8)
    elif t.dtype == torch.bool:
        t = t.to(torch.uint8) * 255
    elif t.dtype != torch.uint8:
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi > 255:
            raise InputError(f"integer image values must be in [0, 255] (or uint16); got [{lo}, {hi}]")
        t = t.to(torch.uint8)
    return t.expand(*t.shape[:-3], 3, *t.shape[-2:]) if t.shape[-3] == 1 else t


def is_float_image_tensor(value: Any) -> bool:
    """Whether :func:`to_image_tensor` keeps ``value`` at full precision: a non-empty float tensor (1|3, H, W)."""
    return (
        is_tensor(value)
        and value.is_floating_point()
        and value.ndim == 3
        and value.shape[0] in (1, 3)
        and value.numel() > 0
    )


def to_image_tensor(value: Any):
    """Any supported image -> float32 tensor (3, H, W) in [0, 1] (CPU, or a tensor input's device).

    A float tensor input in [0, 1] is returned at full precision (not quantised to 8 bits).
    """
    if is_float_image_tensor(value):
        t = value.detach()
        check_unit_range(t)
        return t.float().expand(3, -1, -1) if t.shape[0] == 1 else t.float()
    return to_uint8_tensor(value).float().div_(255.0)


def _pil_to_uint8(img: Image.Image) -> np.ndarray:
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        arr = np.asarray(img, dtype=np.float64)
        top = 65535.0 if img.mode.startswith("I;16") or arr.max(initial=0) > 255 else 255.0
        return _array_to_uint8(np.clip(arr / top, 0.0, 1.0))
    if img.mode == "F":
        return _array_to_uint8(np.asarray(img, dtype=np.float32))
    return _rgb_array(img if img.mode == "RGB" else img.convert("RGB"))


#: Rows of a PIL image copied at a time into a NumPy array (:func:`_rgb_array`).
STRIP_ROWS = 256


def _rgb_array(img: Image.Image) -> np.ndarray:
    """An RGB PIL image as a writeable uint8 (H, W, 3) array, filled a strip of rows at a time.

    ``np.asarray(img)`` goes through ``tobytes()``, which joins the encoded chunks (two transient copies of the
    image) into a read-only array that a tensor needs copied again; strips keep the transient to one strip."""
    w, h = img.size
    if h <= STRIP_ROWS:
        return np.array(img)
    out = sharedmem.empty((h, w, 3), np.uint8)  # (in shared memory for a worker's "array" form)
    for top in range(0, h, STRIP_ROWS):
        bottom = min(top + STRIP_ROWS, h)
        out[top:bottom] = np.asarray(img.crop((0, top, w, bottom)))
    return out


def _array_to_uint8(arr: np.ndarray) -> np.ndarray:
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim == 3 and arr.shape[-1] == 4:
        arr = arr[..., :3]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] != 3):
        raise InputError(f"image array of shape {tuple(arr.shape)} is not (H, W), (H, W, 1), (H, W, 3) or (H, W, 4)")
    if 0 in arr.shape:
        raise InputError(f"empty image of shape {tuple(arr.shape)}")
    if arr.dtype == np.uint8:
        out = arr
    elif arr.dtype == np.bool_:
        out = arr.astype(np.uint8) * 255
    elif arr.dtype == np.uint16:
        out = _scale(arr / 65535.0)
    elif np.issubdtype(arr.dtype, np.integer):
        lo, hi = arr.min(), arr.max()
        if lo < 0 or hi > 255:
            raise InputError(f"integer image values must be in [0, 255] (or uint16); got [{lo}, {hi}]")
        out = arr.astype(np.uint8)
    elif np.issubdtype(arr.dtype, np.floating):
        check_unit_range(arr)
        out = _scale(arr)
    else:
        raise InputError(f"unsupported image dtype {arr.dtype}")
    return np.repeat(out[..., None], 3, axis=-1) if out.ndim == 2 else out


def check_unit_range(values: Any) -> None:
    """InputError unless every value of a float image (array or tensor) is finite and in [0, 1]."""
    lo, hi = float(values.min()), float(values.max())
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise InputError("image contains NaN or Inf values")
    if lo < -1e-6 or hi > 1 + 1e-6:
        raise InputError(
            f"float image values must be in [0, 1]; got [{lo:.4g}, {hi:.4g}] (convert [-1, 1] outputs with (x + 1) / 2)"
        )


def _scale(unit: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(unit * 255.0), 0, 255).astype(np.uint8)
