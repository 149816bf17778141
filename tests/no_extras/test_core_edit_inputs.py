"""An edit's inputs read once (rewardzoo.shared.editing): the source is condition_images[0], the optional mask
condition_images[1] (grayscale, white = may change), in every image form a reward may declare; bad inputs are
InputErrors naming the field and the sample."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from rewardzoo.errors import InputError
from rewardzoo.shared.editing import MASK_THRESHOLD, edit_inputs, image_size

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)
SOURCE = RNG.integers(0, 256, (12, 20, 3), dtype=np.uint8)
MASK = np.zeros((12, 20), dtype=np.uint8)
MASK[3:7, 5:16] = 255


def _forms(arr: np.ndarray) -> dict:
    rgb = arr if arr.ndim == 3 else np.repeat(arr[..., None], 3, -1)
    t = torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1)
    return {"pil": Image.fromarray(arr), "uint8": t, "float": t.float() / 255, "numpy": arr}


@pytest.mark.parametrize("form", ["pil", "uint8", "float", "numpy"])
def test_source_and_mask_in_every_form(form):
    src, mask = _forms(SOURCE)[form], _forms(MASK)[form]
    (plain, masked) = edit_inputs([[src], [src, mask]])
    assert plain.source is src and plain.mask is None
    assert masked.source is src
    np.testing.assert_array_equal(masked.mask, MASK >= MASK_THRESHOLD)
    assert image_size(src) == (20, 12)


def test_a_gray_level_mask_is_thresholded_at_half_and_a_bool_array_is_a_mask():
    levels = np.tile(np.arange(0, 256, 16, dtype=np.uint8), (12, 2))[:, :20]
    np.testing.assert_array_equal(edit_inputs([[SOURCE, levels]])[0].mask, levels >= 128)
    np.testing.assert_array_equal(edit_inputs([[SOURCE, MASK > 0]])[0].mask, MASK > 0)


@pytest.mark.parametrize(
    "conds, words",
    [
        (None, "source image as condition_images[0]"),
        ([], "source image as condition_images[0]"),
        ([None], "source image as condition_images[0]"),
        ([SOURCE, MASK, MASK], "[source] or [source, mask], got 3"),
        (
            [SOURCE, MASK[:, :10]],
            "mask (condition_images[1]) is 10x12, the source image (condition_images[0]) is 20x12",
        ),
        ([SOURCE, SOURCE], "must be grayscale"),
        ([SOURCE, np.zeros((12, 20, 2))], "edit mask (condition_images[1]): image array of shape"),
    ],
)
def test_bad_edit_inputs_name_the_field_and_the_sample(conds, words):
    with pytest.raises(InputError) as info:
        edit_inputs([[SOURCE], conds])
    assert info.value.field == "condition_images" and info.value.sample == 1
    assert words in str(info.value)
