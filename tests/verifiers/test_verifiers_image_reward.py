"""ImageReward against the `image-reward` package's own model code, built with the same tiny random weights.

The reference here is the package's own ``vit.py``, ``med.py`` and ``ImageReward.py`` (its ``score`` method,
preprocessing and MLP), imported as :mod:`tests.verifiers.image_reward_tiny` says (without the package
``__init__``, with the helpers transformers 5 removed supplied). Needs ``pip install --no-deps image-reward
fairscale`` (the package pins timm==0.6.13).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from PIL import Image

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.image.image_reward import RAW_MEAN, RAW_STD, ImageReward, convert_to_safetensors

from .image_reward_tiny import MED, SIZE, build_reference, reference_available, write_tiny_checkpoint

PROMPTS = [
    "a photo of a red dog",
    "two cats on a table",
    " ".join(["a very detailed painting of a big red house"] * 5),  # > 35 tokens: truncated
    "blue sky over the sea",
]


class Unpicklable:
    pass


needs_reference = pytest.mark.skipif(not reference_available(), reason="pip install --no-deps image-reward fairscale")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("imagereward")
    return path, write_tiny_checkpoint(path)


@pytest.fixture(scope="module")
def reference(checkpoint):
    """The package's ImageReward with the same weights (:func:`~tests.verifiers.image_reward_tiny.build_reference`)."""
    return build_reference(*checkpoint)


@pytest.fixture(scope="module")
def reward(checkpoint):
    return ImageReward(str(checkpoint[0]))


def _images(size, n=4, seed=0):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)) for _ in range(n)]


@needs_reference
def test_equals_reference_package_per_sample(reward, reference):
    images = _images((SIZE, SIZE))
    out = reward(image=images, prompt=PROMPTS)
    with torch.no_grad():
        expected = [reference.score(p, img) for p, img in zip(PROMPTS, images)]
    np.testing.assert_allclose(np.asarray(out.rewards), expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(out.extras["raw"]), np.asarray(expected) * RAW_STD + RAW_MEAN, atol=1e-5)
    assert np.std(expected) > 1e-3  # the prompts and images really change the score


@needs_reference
def test_resizing_matches_the_reference_transform_within_rounding(reward, reference):
    """Larger, non-square images: the batched torch resize gives the reference's PIL pixels to one 8-bit level."""
    images = _images((48, 40), seed=1)
    from rewardzoo.shared.image_ops import preprocess_images

    ours = preprocess_images(images, reward.preprocess_config)
    ref = torch.stack([reference.preprocess(img) for img in images])
    levels = ((ours - ref) * torch.tensor(reward.preprocess_config.std).view(1, 3, 1, 1) * 255).abs()
    assert ours.shape == ref.shape == (4, 3, SIZE, SIZE)
    assert float(levels.max()) <= 1.0 + 1e-4 and float((levels > 0.5).float().mean()) < 0.02


def test_prompt_is_truncated_to_35_tokens(reward):
    assert reward.tokenizer(PROMPTS[2], truncation=True, max_length=35)["input_ids"].__len__() == 35
    long = reward(image=_images((SIZE, SIZE), 1), prompt=[PROMPTS[2]]).rewards[0]
    longer = reward(image=_images((SIZE, SIZE), 1), prompt=[PROMPTS[2] + " with a tree"]).rewards[0]
    assert float(long) == float(longer)


def test_safetensors_conversion_scores_the_same(reward, checkpoint, tmp_path):
    path = tmp_path / "converted"
    path.mkdir()
    convert_to_safetensors(checkpoint[0] / "ImageReward.pt", path / "ImageReward.safetensors")
    for name in ("med_config.json", "vocab.txt"):
        (path / name).write_text((checkpoint[0] / name).read_text())
    images = _images((SIZE, SIZE))
    np.testing.assert_array_equal(
        np.asarray(ImageReward(str(path))(image=images, prompt=PROMPTS).rewards),
        np.asarray(reward(image=images, prompt=PROMPTS).rewards),
    )


def test_pickled_objects_are_refused(checkpoint, tmp_path):
    path = tmp_path / "bad"
    path.mkdir()
    state = dict(checkpoint[1])
    state["extra"] = Unpicklable()  # an arbitrary class: torch.load(weights_only=True) must refuse it
    torch.save(state, path / "ImageReward.pt")
    (path / "med_config.json").write_text(json.dumps(MED))
    with pytest.raises(ConfigError, match="refusing to unpickle"):
        ImageReward(str(path), tokenizer_path=str(checkpoint[0]))


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda s: s.update({"blip.something_else.weight": torch.zeros(1)}), "unexpected keys"),
        (lambda s: s.pop("mlp.layers.0.weight"), "does not fit"),
    ],
)
def test_wrong_checkpoints_are_named(checkpoint, tmp_path, change, match):
    state = dict(checkpoint[1])
    change(state)
    torch.save(state, tmp_path / "ImageReward.pt")
    (tmp_path / "med_config.json").write_text(json.dumps(MED))
    with pytest.raises(ConfigError, match=match):
        ImageReward(str(tmp_path), tokenizer_path=str(checkpoint[0]))


def test_score_pixels_is_differentiable_and_matches(reward):
    g = torch.Generator().manual_seed(0)
    pixels = torch.rand(3, 3, 40, 48, generator=g).requires_grad_(True)
    score = reward.score_pixels(pixels, PROMPTS[:3])
    score.sum().backward()
    assert pixels.grad is not None and torch.isfinite(pixels.grad).all() and pixels.grad.abs().sum() > 0
    assert all(p.grad is None for p in reward.model.parameters())
    again = pixels.detach().clone().requires_grad_(True)
    reward.score_pixels(again, PROMPTS[:3], gradient_checkpointing=True).sum().backward()
    torch.testing.assert_close(again.grad, pixels.grad, atol=1e-6, rtol=1e-5)
    # on 8-bit-valued pixels at the model's size nothing is resized or rounded: the two paths agree
    exact = torch.randint(0, 256, (3, 3, SIZE, SIZE), generator=g).float() / 255
    plain = torch.as_tensor(reward(image=list(exact), prompt=PROMPTS[:3]).rewards)
    torch.testing.assert_close(reward.score_pixels(exact, PROMPTS[:3]).detach(), plain, atol=1e-5, rtol=0)


def test_float64_gradient_matches_finite_differences(checkpoint):
    reward = ImageReward(str(checkpoint[0]), dtype="float64")
    g = torch.Generator().manual_seed(5)
    pixels = torch.rand(1, 3, 40, 48, generator=g, dtype=torch.float64).requires_grad_(True)
    reward.score_pixels(pixels, PROMPTS[:1]).sum().backward()
    v = torch.randn(pixels.shape, generator=g, dtype=torch.float64)
    eps = 1e-5
    with torch.no_grad():
        diff = reward.score_pixels(pixels + eps * v, PROMPTS[:1]) - reward.score_pixels(pixels - eps * v, PROMPTS[:1])
    numeric = float(diff.sum()) / (2 * eps)
    assert float((pixels.grad * v).sum()) == pytest.approx(numeric, rel=1e-5)


def test_mismatched_counts_name_the_field(reward):
    with pytest.raises(InputError, match="prompt"):
        reward(image=_images((SIZE, SIZE), 2), prompt=PROMPTS[:1])


@needs_reference
def test_through_the_processor_equals_the_reference(checkpoint, reference):
    from rewardzoo import RewardProcessor, Sample

    images = _images((SIZE, SIZE), 2, seed=4)
    proc = RewardProcessor([{"name": "ir", "reward_model": "image_reward", "model_path": str(checkpoint[0])}])
    res = proc([Sample(image=np.asarray(img), prompt=p) for img, p in zip(images, PROMPTS)])
    with torch.no_grad():
        expected = [reference.score(p, img) for p, img in zip(PROMPTS, images)]
    np.testing.assert_allclose(res.rewards["ir"], expected, atol=1e-5, rtol=0)


def test_rewardzoo_differentiable_drives_it(checkpoint, reward):
    import rewardzoo

    f = rewardzoo.differentiable({"rewards": [{"name": "image_reward", "model_path": str(checkpoint[0])}]})
    pixels = torch.rand(2, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(2)).requires_grad_(True)
    total = f(pixels, PROMPTS[:2])
    total.sum().backward()
    assert pixels.grad is not None and pixels.grad.abs().sum() > 0
    torch.testing.assert_close(total.detach(), reward.score_pixels(pixels.detach(), PROMPTS[:2]), atol=1e-6, rtol=0)
