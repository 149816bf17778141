"""Image conversion: every input form and mode normalised to RGB, checked against PIL/NumPy directly."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from rewardzoo.core.fields import convert_field
from rewardzoo.errors import InputError
from rewardzoo.rewards.base import Inputs
from rewardzoo.shared.media import image_to_uint8, to_image_tensor, to_pil_rgb

from ..optional import needs_torch, torch

RNG = np.random.default_rng(0)
RGB = RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)


def _rgb(value) -> np.ndarray:
    return np.asarray(to_pil_rgb(value))


@pytest.mark.parametrize(
    "value",
    [
        RGB,
        Image.fromarray(RGB),
        *([torch.from_numpy(RGB).permute(2, 0, 1).contiguous()] if torch else []),
        RGB.astype(np.float32) / 255,
        *([torch.from_numpy(RGB).permute(2, 0, 1).float() / 255] if torch else []),
        RGB.transpose(2, 0, 1),  # unambiguous (C, H, W) NumPy
        np.concatenate([RGB, np.full((5, 7, 1), 9, np.uint8)], axis=-1),  # RGBA: alpha dropped
    ],
)
def test_rgb_forms_round_trip_exactly(value):
    np.testing.assert_array_equal(_rgb(value), RGB)
    if torch is not None:
        np.testing.assert_allclose(to_image_tensor(value).numpy(), RGB.transpose(2, 0, 1) / 255.0, atol=1e-7)


def test_pil_modes_match_pils_own_conversion():
    rgba = Image.fromarray(np.concatenate([RGB, RNG.integers(0, 256, (5, 7, 1), dtype=np.uint8)], -1), "RGBA")
    gray = Image.fromarray(RGB[..., 0], "L")
    pal = Image.fromarray(RGB).convert("P")
    for img in (rgba, gray, pal):
        np.testing.assert_array_equal(_rgb(img), np.asarray(img.convert("RGB")))


def test_sixteen_bit_inputs_scale_to_eight_bits():
    values = RNG.integers(0, 65536, (4, 6), dtype=np.uint16)
    expected = np.rint(values / 65535 * 255).astype(np.uint8)
    np.testing.assert_array_equal(_rgb(values)[..., 0], expected)
    img16 = Image.fromarray(values.astype(np.uint16))
    assert img16.mode.startswith("I;16")
    np.testing.assert_array_equal(_rgb(img16), np.repeat(expected[..., None], 3, -1))


@pytest.mark.parametrize(
    "value",
    [
        RGB[..., 0],
        RGB[..., :1],
        *([torch.from_numpy(RGB[..., 0]), torch.from_numpy(RGB[..., 0])[None]] if torch else []),
    ],
)
def test_grayscale_is_repeated_to_three_channels(value):
    np.testing.assert_array_equal(_rgb(value), np.repeat(RGB[..., :1], 3, -1))


def test_float_quantisation_rounds_like_flow_grpo():
    x = np.array([[0.0, 0.5 / 255, 0.49 / 255, 1.0, 0.7]], dtype=np.float32)[..., None].repeat(3, -1)
    np.testing.assert_array_equal(image_to_uint8(x)[0, :, 0], np.round(x[0, :, 0] * 255).astype(np.uint8))


@needs_torch
def test_float_tensor_keeps_full_precision():
    t = torch.rand(3, 4, 4)
    assert torch.equal(to_image_tensor(t), t)


def test_bool_masks():
    mask = RGB[..., 0] > 128
    np.testing.assert_array_equal(_rgb(mask)[..., 0], mask.astype(np.uint8) * 255)


@pytest.mark.parametrize(
    "value, message",
    [
        (np.full((4, 4, 3), -0.5, np.float32), r"must be in \[0, 1\]"),
        (np.full((4, 4, 3), 2.0, np.float32), r"must be in \[0, 1\]"),
        (np.full((4, 4, 3), np.nan, np.float32), "NaN"),
        *([(torch.full((3, 4, 4), float("nan")), "NaN"), (torch.zeros(8, 8, 3), "channels last")] if torch else []),
        (np.zeros((4, 4, 5), np.uint8), "is not"),
        (np.zeros((2, 4, 4, 3), np.uint8), "is not"),
        (np.zeros((0, 4, 3), np.uint8), "empty"),
        (np.full((4, 4), 300, np.int32), r"\[0, 255\]"),
        ("not/a/file.png", "not found"),
        (12, "unsupported image type"),
    ],
)
def test_bad_images_are_input_errors(value, message):
    with pytest.raises(InputError, match=message):
        to_pil_rgb(value)


@needs_torch
@pytest.mark.parametrize("shape", [(3, 0, 4), (1, 4, 0)])
def test_empty_float_tensor_is_an_input_error_for_tensor_rewards(shape):
    with pytest.raises(InputError, match="empty"):
        to_image_tensor(torch.zeros(shape))


def test_unreadable_file_is_an_input_error(tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(InputError, match="cannot read image file"):
        to_pil_rgb(bad)


def test_image_file_round_trip(tmp_path):
    Image.fromarray(RGB).save(tmp_path / "a.png")
    np.testing.assert_array_equal(_rgb(str(tmp_path / "a.png")), RGB)


def _Wants(tensors: bool) -> Inputs:
    return Inputs(("condition_images",), images="float" if tensors else "pil")


@pytest.mark.parametrize("tensors", [False, *([True] if torch else [])])
def test_condition_images_stay_nested(tensors):
    items = [RGB, Image.fromarray(RGB[::-1])]
    out = convert_field("condition_images", items, None, _Wants(tensors))
    assert isinstance(out, list) and len(out) == 2
    first = out[0] if tensors else np.asarray(out[0]).transpose(2, 0, 1) / 255.0
    np.testing.assert_allclose(np.asarray(first), RGB.transpose(2, 0, 1) / 255.0, atol=1e-7)
    single = convert_field("condition_images", RGB, None, _Wants(tensors))
    assert isinstance(single, list) and len(single) == 1
    with pytest.raises(InputError, match="empty list"):
        convert_field("condition_images", [], None, _Wants(tensors))
