"""The inputs of an instruction-guided edit, read in one place for every editing reward.

An edit sample is ``prompt`` (the instruction), ``image`` (the edited result) and ``condition_images``:

- ``condition_images[0]``: the **source** image the edit starts from (required);
- ``condition_images[1]``: optionally, the **edit mask**: a grayscale image of the source's size, white
  (>= 128) where the edit may change the image, black where it must keep the source.

A third entry is refused: editing rewards compare the result with one source. The mask is a media entry (not a
``metadata`` key) so that it travels as the source does on every front end: a path in a manifest (resolved next
to the manifest), a PNG in the wire format, bytes or a path in a Ray row, an array or tensor in process; and a
reward that reads it need not require ``metadata`` on every sample.

Errors are :class:`~rewardzoo.errors.InputError` naming the field and the sample's index in the call; the engine
adds the reward and maps the index onto the caller's (global) one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from ..errors import InputError
from .media import image_to_uint8, is_path, is_tensor

#: A mask's channels may differ by this much (8-bit levels) and still count as grayscale (JPEG noise).
GRAY_TOLERANCE = 16
#: Mask values at or above this level (8-bit) mark the region the edit may change.
MASK_THRESHOLD = 128


@dataclass(frozen=True)
class EditInput:
    """One sample's edit inputs: ``source`` as the reward received it (its declared image form) and ``mask``,
    a bool array (H, W) that is True where the edit may change the image, or None (no mask: the whole image)."""

    source: Any
    mask: np.ndarray | None = None


def image_size(value: Any) -> tuple[int, int]:
    """(width, height) of a PIL image, a tensor (C, H, W) / (H, W) or an array (H, W[, C]) without converting it."""
    if isinstance(value, Image.Image):
        return value.size
    shape = tuple(value.shape)
    if is_tensor(value):
        return (shape[-1], shape[-2])
    if len(shape) == 3 and shape[0] in (1, 3) and shape[-1] not in (1, 3, 4):
        return (shape[2], shape[1])  # an unambiguous (C, H, W) array
    return (shape[1], shape[0])


def edit_inputs(condition_images: Sequence[Any] | None) -> list[EditInput]:
    """Each sample's :class:`EditInput` from its ``condition_images`` ([source] or [source, mask])."""
    if condition_images is None:
        raise InputError("an edit needs its source image as condition_images[0]; none given", field="condition_images")
    return [_edit_input(conds, i) for i, conds in enumerate(condition_images)]


def _edit_input(conds: Any, i: int) -> EditInput:
    conds = list(conds) if isinstance(conds, (list, tuple)) else [conds]
    if not conds or conds[0] is None:
        raise InputError(
            "an edit needs its source image as condition_images[0]; none given", field="condition_images", sample=i
        )
    if len(conds) > 2:
        raise InputError(
            f"an edit takes condition_images [source] or [source, mask], got {len(conds)} images",
            field="condition_images",
            sample=i,
        )
    source = conds[0]
    if len(conds) == 1 or conds[1] is None:
        return EditInput(source)
    if is_path(source) or is_path(conds[1]):
        raise InputError(
            "edit inputs are read from decoded images, got a path (declare condition_images in the reward's Inputs)",
            field="condition_images",
            sample=i,
        )
    try:
        pixels = image_to_uint8(conds[1])
    except InputError as exc:
        raise InputError(
            f"the edit mask (condition_images[1]): {exc.message}", field="condition_images", sample=i
        ) from None
    (mh, mw), (sw, sh) = pixels.shape[:2], image_size(source)
    if (mw, mh) != (sw, sh):
        raise InputError(
            f"the edit mask (condition_images[1]) is {mw}x{mh}, the source image (condition_images[0]) "
            f"is {sw}x{sh}; they must be the same size",
            field="condition_images",
            sample=i,
        )
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    if np.array_equal(r, g) and np.array_equal(r, b):  # the usual gray mask: one channel says it all
        return EditInput(source, r >= MASK_THRESHOLD)
    r, g, b = r.astype(np.int16), g.astype(np.int16), b.astype(np.int16)
    spread = int(max(np.abs(r - g).max(), np.abs(r - b).max(), np.abs(g - b).max()))
    if spread > GRAY_TOLERANCE:
        raise InputError(
            f"the edit mask (condition_images[1]) must be grayscale (white where the edit may change "
            f"the image), got colours (channels differ by up to {spread} levels)",
            field="condition_images",
            sample=i,
        )
    return EditInput(source, (r + g + b) >= 3 * MASK_THRESHOLD)
