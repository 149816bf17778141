"""Latents on the wire: a sample's ``latent`` as a raw tensor, decoded by the server's ``decode:`` stage.

A trainer that holds latents sends them instead of pixels (a 1024x1024 image travels as a 128x128x16 latent: 512 kB
in float16 instead of 3 MB of RGB), and the server decodes them with the VAE its config's ``decode:`` stage names
(:mod:`rewardzoo.core.decode`), once per batch, for its pixel rewards. On the wire::

    "latent": {"format": "raw", "dtype": "float16" | "bfloat16" | "float32", "shape": [C, H, W] | [T, C, H, W]
               | [C, T, H, W], "data": <bytes>}

little-endian, C-order (``bfloat16``: the upper 16 bits of each float32, as torch stores it). A latent of another
dtype, rank or byte count is a :class:`~rewardzoo.transport.wire.WireError` 422 naming the field; one whose
channels the server's VAE does not take (or a server without a decode stage whose pixel rewards need it) is
refused when it is scored, also with 422 naming ``latent`` (or ``image``) and the sample. Its decoded pixels count
against ``max_pixels`` and ``max_request_pixels`` at :data:`SPATIAL_FACTOR` pixels per latent position per side
(the factor of every VAE diffusers ships for images and video but Wan 2.2's 16x; a video latent's frames as the
larger of its two leading axes, before a video VAE's temporal upsampling), before anything is decoded.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np

from ..errors import InputError

#: Wire dtype names and their little-endian storage (bfloat16 travels as its 16-bit patterns).
LATENT_DTYPES: dict[str, np.dtype[Any]] = {
    "float16": np.dtype("<f2"),
    "bfloat16": np.dtype("<i2"),
    "float32": np.dtype("<f4"),
}
#: Decoded pixels per latent position, per side, counted against the pixel limits before decoding.
SPATIAL_FACTOR = 8


def encode_latent(value: Any) -> dict[str, Any]:
    """A latent (a torch tensor or a NumPy array of float16, bfloat16 or float32, 3 or 4 dimensions) as a wire
    latent; InputError naming ``latent`` otherwise."""
    if hasattr(value, "detach"):  # a torch tensor, without importing torch
        tensor = value.detach().cpu().contiguous()
        name = str(tensor.dtype).removeprefix("torch.")
        if name == "bfloat16":
            import torch

            array = tensor.view(torch.int16).numpy()
        else:
            array = tensor.numpy()
    else:
        array = np.asarray(value)
        name = array.dtype.name
    if name not in LATENT_DTYPES:
        raise InputError(f"a latent travels as {', '.join(LATENT_DTYPES)}, got {name}", field="latent")
    if array.ndim not in (3, 4):
        raise InputError(f"a latent has 3 or 4 dimensions, got shape {list(array.shape)}", field="latent")
    little = np.ascontiguousarray(array).astype(LATENT_DTYPES[name], copy=False)
    return {"format": "raw", "dtype": name, "shape": list(array.shape), "data": little.data.cast("B")}


def decode_latent(
    obj: Any, budget: Any = None, key: str = "latent", *, dry: bool = False, error: type[InputError] = InputError
) -> Any:
    """A wire latent -> a CPU torch tensor of its dtype (a copy of the received bytes; ``dry``: checked, None).
    ``budget``: the request's pixel budget (``take(pixels, what, field, count)``), charged the decoded pixels;
    ``error``: the class refusals are raised as (the wire's ``WireError``, which takes ``status`` and ``kind``)."""

    def refuse(message: str) -> InputError:
        if error is InputError:
            return InputError(message, field=key)
        return error(message, field=key, status=422, kind="input")  # type: ignore[call-arg]

    if not isinstance(obj, dict) or obj.get("format") != "raw":
        raise refuse("a latent is a raw array map: format 'raw', dtype, shape, data")
    name = obj.get("dtype")
    dtype = LATENT_DTYPES.get(name) if isinstance(name, str) else None
    if dtype is None:
        raise refuse(f"a latent's dtype must be one of {', '.join(LATENT_DTYPES)}, got {name!r:.40}")
    shape = obj.get("shape")
    if (
        not isinstance(shape, list)
        or len(shape) not in (3, 4)
        or not all(isinstance(d, int) and not isinstance(d, bool) and 0 < d < 2**31 for d in shape)
    ):
        raise refuse(f"a latent's 'shape' is 3 or 4 positive ints ([C, H, W], [T, C, H, W]), got {shape!r:.80}")
    data = obj.get("data")
    if isinstance(data, str):  # JSON carries bytes as base64
        try:
            data = base64.b64decode(data, validate=True)
        except ValueError:
            raise refuse("'data' is not valid base64") from None
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise refuse(f"'data' must be bytes (base64 in JSON), got {type(data).__name__}")
    expected = math.prod(shape) * dtype.itemsize
    if memoryview(data).nbytes != expected:
        raise refuse(f"'data' holds {memoryview(data).nbytes} bytes; shape {shape} of {name} needs {expected}")
    if budget is not None:
        frames = max(shape[0], shape[1]) if len(shape) == 4 else 1  # (T, C, H, W) or (C, T, H, W): the larger axis
        pixels = shape[-1] * shape[-2] * SPATIAL_FACTOR**2
        budget.take(pixels, f"the latent's decoded frames ({pixels} pixels each)", key, count=frames)
    if dry:
        return None
    import torch

    array = np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))  # a copy, writable
    tensor = torch.from_numpy(array)
    return tensor.view(torch.bfloat16) if name == "bfloat16" else tensor
