"""pickscore against transformers' own logits_per_image on the same weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rewardzoo.errors import InputError
from rewardzoo.rewards.image.pickscore import PickScore

from .media import PROMPTS, make_images

SIZES = [(96, 80), (80, 96), (64, 64), (120, 70), (70, 70), (200, 150)]


def _logits_per_image(model, processor, images, prompts):
    """transformers' CLIPModel forward on its own processor's inputs: diag(logits_per_image)."""
    inputs = processor(text=prompts, images=images, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**inputs).logits_per_image.diagonal()


@pytest.mark.parametrize("scale", [1 / 26, 1.0])
def test_matches_logits_per_image(hf_dir, hf_reference, scale):
    model, processor = hf_reference
    images = make_images(len(PROMPTS), size=SIZES, seed=21)
    reward = PickScore(model_path=str(hf_dir), scale=scale)
    out = reward(image=images, prompt=PROMPTS)
    ref = _logits_per_image(model, processor, images, PROMPTS)
    # HF's PIL preprocessing vs ours: a few 8-bit levels; logits are ~14x a cosine here
    np.testing.assert_allclose(np.asarray(out.rewards), scale * ref.numpy(), atol=scale * 14.3 * 1e-3)


def test_formula_exact_on_identical_pixels(hf_dir, hf_reference):
    model, processor = hf_reference
    reward = PickScore(model_path=str(hf_dir))
    images = make_images(3, seed=22)
    pixels = reward.backbone.preprocess(images)
    text = processor.tokenizer(PROMPTS[:3], padding=True, return_tensors="pt")
    with torch.no_grad():
        ref = model(pixel_values=pixels, **text).logits_per_image.diagonal()
    torch.testing.assert_close(
        torch.as_tensor(np.asarray(reward(image=images, prompt=PROMPTS[:3]).rewards)), ref / 26, atol=1e-5, rtol=0
    )


def test_default_scale_is_one_over_26(hf_dir):
    assert PickScore(model_path=str(hf_dir)).scale == pytest.approx(1 / 26)


def test_processor_path_is_used(hf_dir, tmp_path):
    """A model directory without tokenizer files takes them from processor_path."""
    import shutil

    bare = tmp_path / "bare-clip"
    bare.mkdir()
    for f in ("config.json", "model.safetensors"):
        shutil.copy(hf_dir / f, bare / f)
    images = make_images(2, seed=23)
    a = PickScore(model_path=str(bare), processor_path=str(hf_dir))(image=images, prompt=PROMPTS[:2])
    b = PickScore(model_path=str(hf_dir))(image=images, prompt=PROMPTS[:2])
    np.testing.assert_allclose(np.asarray(a.rewards), np.asarray(b.rewards), atol=1e-6)


def test_tensor_inputs_and_mismatch(hf_dir):
    reward = PickScore(model_path=str(hf_dir))
    images = make_images(2, seed=24)
    tensors = [torch.from_numpy(np.array(im)).permute(2, 0, 1).float() / 255 for im in images]
    np.testing.assert_array_equal(
        np.asarray(reward(image=tensors, prompt=PROMPTS[:2]).rewards),
        np.asarray(reward(image=images, prompt=PROMPTS[:2]).rewards),
    )
    with pytest.raises(InputError, match="mismatched"):
        reward(image=images, prompt=PROMPTS[:1])
