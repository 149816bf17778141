"""clip_image_similarity: mean CLIP cosine to the condition images, against open_clip's encoders."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rewardzoo import RewardProcessor, Sample
from rewardzoo.errors import InputError
from rewardzoo.rewards.image.similarity import ClipImageSimilarity

from .media import make_images


def _encode(oc_reference, images):
    model, preprocess, _ = oc_reference
    with torch.no_grad():
        return F.normalize(model.encode_image(torch.stack([preprocess(im) for im in images])), dim=-1)


@pytest.mark.parametrize("n_conditions", [[1, 1, 1], [2, 1, 3], [4]])
def test_mean_cosine_matches_open_clip(oc_dir, oc_reference, n_conditions):
    reward = ClipImageSimilarity(model_path=str(oc_dir))
    images = make_images(len(n_conditions), size=(80, 70), seed=41)
    conds = [make_images(k, size=[(64, 90), (100, 60)], seed=100 + i) for i, k in enumerate(n_conditions)]
    out = reward(image=images, condition_images=conds)
    gen = _encode(oc_reference, images)
    expected = [float((_encode(oc_reference, c) @ gen[i]).mean()) for i, c in enumerate(conds)]
    np.testing.assert_allclose(np.asarray(out.rewards), expected, atol=1e-3)
    lo = [float((_encode(oc_reference, c) @ gen[i]).min()) for i, c in enumerate(conds)]
    np.testing.assert_allclose(out.extras["min_cosine"].numpy(), lo, atol=1e-3)


def test_identical_condition_scores_one(oc_dir):
    reward = ClipImageSimilarity(model_path=str(oc_dir))
    images = make_images(2, seed=42)
    out = reward(image=images, condition_images=[[im] for im in images])
    np.testing.assert_allclose(np.asarray(out.rewards), 1.0, atol=1e-5)


def test_through_processor_and_errors(oc_dir):
    proc = RewardProcessor([{"name": "clip_image_similarity", "model_path": str(oc_dir), "device": "cpu"}])
    images = make_images(3, seed=43)
    res = proc(
        [
            Sample(image=images[0], condition_images=[images[1], images[2]]),
            Sample(image=images[1], condition_images=[images[1]]),
        ]
    )
    assert res.rewards["clip_image_similarity"][1] == pytest.approx(1.0, abs=1e-5)
    reward = proc.rewards["clip_image_similarity"]
    with pytest.raises(InputError, match="empty list") as info:
        reward(image=images[:2], condition_images=[[images[0]], []])
    assert (info.value.field, info.value.sample) == ("condition_images", 1)
    with pytest.raises(InputError) as info:
        reward(image=images[:2], condition_images=[[images[0]], [images[1], torch.rand(3, 8, 8) + 5]])
    assert (info.value.field, info.value.sample) == ("condition_images", 1)
    with pytest.raises(InputError, match="mismatched"):
        reward(image=images, condition_images=[[images[0]]])
