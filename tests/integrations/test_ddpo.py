"""ddpo-pytorch's own reward_fn contract, side by side with the adapter."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rewardzoo.integrations import ddpo_reward_fn

from ..clients import client_module


def _images(seed: int, dtype=torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(4, 3, 20, 28, generator=gen).to(dtype)


def test_fp32_scores_equal_ddpo_pytorchs_jpeg_rewards():
    rewards = client_module("ddpo_pytorch", "ddpo_pytorch.rewards")
    ours = ddpo_reward_fn({"rewards": [{"name": "jpeg_incompressibility"}]})
    images = _images(0)
    theirs, _ = rewards.jpeg_incompressibility()(images, ["p"] * 4, [{}] * 4)
    total, _meta = ours(images, ["p"] * 4, [{}] * 4)
    np.testing.assert_allclose(total, theirs, rtol=1e-6)
    assert torch.as_tensor(total).shape == (4,)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_rounding_differs_from_ddpo_pytorch_by_at_most_a_few_levels(dtype):
    """ddpo-pytorch quantises with ``(x * 255).round()`` in the image dtype; rewardzoo in float32. The
    figures in the JPEG card come from this comparison."""
    rewards = client_module("ddpo_pytorch", "ddpo_pytorch.rewards")
    images = _images(1, dtype)
    theirs_pixels = (images * 255).round().clamp(0, 255).to(torch.uint8)
    ours_pixels = (images.float() * 255).round().clamp(0, 255).to(torch.uint8)
    level_diff = (theirs_pixels.int() - ours_pixels.int()).abs().max().item()
    assert level_diff <= 2  # fp16 rounds x*255 to 0.125 steps above 128, bf16 to whole levels near 255
    theirs, _ = rewards.jpeg_incompressibility()(images, ["p"] * 4, [{}] * 4)
    ours, _ = ddpo_reward_fn({"rewards": ["jpeg_incompressibility"]})(images, ["p"] * 4, [{}] * 4)
    assert np.max(np.abs(ours - theirs) / theirs) < 0.05


def test_dataset_key_routes_gated_rewards():
    config = {
        "rewards": [
            {"name": "a", "reward_model": "jpeg_incompressibility", "applicable_datasets": ["x"]},
            {"name": "b", "reward_model": "jpeg_compressibility", "applicable_datasets": ["y"]},
        ]
    }
    fn = ddpo_reward_fn(config, dataset_key="ds")
    total, meta = fn(_images(2), ["p"] * 4, [{"ds": d} for d in "xyxy"])
    assert (total[[0, 2]] > 0).all() and (total[[1, 3]] < 0).all()
    assert meta["applied"] == [["a"], ["b"], ["a"], ["b"]]


def test_an_offloaded_reward_is_asleep_between_two_ddpo_steps(tmp_path):
    """ddpo-pytorch's sampling loop submits ``reward_fn(images, prompts, prompt_metadata)`` to a thread pool and
    collects the results before the update (its train.py); with ``offload: drop`` the CLIP weights are freed
    between the steps, and the scores equal a resident model's (same weights, another copy), bit for bit."""
    from concurrent.futures import ThreadPoolExecutor

    from rewardzoo.testing import tiny_open_clip_dir

    client_module("ddpo_pytorch", "ddpo_pytorch.rewards")  # the contract's owner is importable

    def entry(folder):
        return {"name": "clip", "reward_model": "clip_score", "device": "cpu", "model_path": str(folder)}

    resident = ddpo_reward_fn({"rewards": [entry(tiny_open_clip_dir(tmp_path / "a", seed=1))]})
    ours = ddpo_reward_fn({"rewards": [{**entry(tiny_open_clip_dir(tmp_path / "b", seed=1)), "offload": "drop"}]})
    reward, residency = ours.processor.rewards["clip"], ours.processor.loader.residency
    prompts = ["a cat", "a dog", "the sea", "a tree"]
    with ThreadPoolExecutor(max_workers=2) as executor:
        for step in range(2):
            images = _images(10 + step)
            total, _ = executor.submit(ours, images, prompts, [{}] * 4).result()
            assert residency.is_asleep(reward) and residency.weight_bytes(reward) == 0
            expected, _ = resident(images, prompts, [{}] * 4)
            assert total.tobytes() == expected.tobytes()
