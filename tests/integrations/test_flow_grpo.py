"""flow_grpo's own multi_score and training-script consumer code, side by side with the adapter."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rewardzoo import Sample
from rewardzoo.core.api import build_processors
from rewardzoo.errors import InputError
from rewardzoo.integrations import flow_grpo_reward_fn

from ..clients import client_module

CONFIG = {"rewards": [{"name": "jpeg_compressibility", "weight": 0.7}]}


def _images(seed: int, n: int = 4) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    detail = torch.linspace(0.1, 1.0, n).view(n, 1, 1, 1)
    return (0.5 + detail * (torch.rand(n, 3, 24, 32, generator=gen) - 0.5)).clamp(0, 1)


def test_avg_equals_flow_grpos_multi_score():
    rewards = client_module("flow_grpo", "flow_grpo.rewards")
    theirs = rewards.multi_score("cpu", {"jpeg_compressibility": 0.7})
    ours = flow_grpo_reward_fn(CONFIG)
    images, prompts, meta = _images(0), ["a", "b", "c", "d"], [{}] * 4
    their_scores, _ = theirs(images, prompts, meta, only_strict=True)
    our_scores, extra = ours(images, prompts, meta, only_strict=True)
    assert extra == {} and set(our_scores) == {"jpeg_compressibility", "avg"}
    np.testing.assert_allclose(our_scores["avg"], their_scores["avg"], rtol=1e-6)
    np.testing.assert_allclose(our_scores["jpeg_compressibility"], their_scores["jpeg_compressibility"], rtol=1e-6)


def test_the_training_scripts_consumer_code_runs_on_the_adapters_output():
    stat_tracking = client_module("flow_grpo", "flow_grpo.stat_tracking")
    reward_fn = flow_grpo_reward_fn(CONFIG)
    batches, prompts_all = [], []
    for seed in (1, 2):  # two sampling batches, as the script collects them before the update
        prompts = ["p0", "p0", "p1", "p1"]
        scores, _ = reward_fn(_images(seed), prompts, [{}] * 4, only_strict=True)
        batches.append({key: torch.as_tensor(value).float() for key, value in scores.items()})
        prompts_all += prompts
    gathered = {key: torch.cat([b[key] for b in batches]).numpy() for key in batches[0]}
    tracker = stat_tracking.PerPromptStatTracker(global_std=False)
    advantages = tracker.update(np.array(prompts_all), gathered["avg"])
    assert np.isfinite(advantages).all() and advantages.shape == (8,)
    for prompt in ("p0", "p1"):
        assert abs(advantages[np.array(prompts_all) == prompt].mean()) < 1e-6


def test_a_gated_stream_routes_by_the_metadata_dataset_key():
    config = {
        "rewards": [
            {"name": "small", "reward_model": "jpeg_compressibility", "applicable_datasets": ["a"]},
            {"name": "big", "reward_model": "jpeg_incompressibility", "applicable_datasets": ["b"], "weight": 0.01},
        ]
    }
    reward_fn = flow_grpo_reward_fn(config, dataset_key="dataset")
    meta = [{"dataset": d} for d in "abab"]
    scores, _ = reward_fn(_images(3), ["x"] * 4, meta)
    assert np.isnan(scores["small"][[1, 3]]).all() and np.isfinite(scores["small"][[0, 2]]).all()
    np.testing.assert_allclose(scores["avg"][[1, 3]], 0.01 * scores["big"][[1, 3]], rtol=1e-6)
    with pytest.raises(InputError, match="sample 0, field 'metadata'.*'dataset'"):
        reward_fn(_images(3), ["x"] * 4, [{}] * 4)
    with pytest.raises(InputError, match="no configured reward applies"):
        reward_fn(_images(3), ["x"] * 4, [{"dataset": "c"}] * 4)


def test_danceGRPO_inline_pattern():
    from PIL import Image

    images = [Image.fromarray((np.random.default_rng(i).random((16, 16, 3)) * 255).astype(np.uint8)) for i in range(3)]
    captions = ["a", "b", "c"]
    score = build_processors({"rewards": ["jpeg_incompressibility"]})[0]
    rewards = score([Sample(image=img, prompt=c) for img, c in zip(images, captions)]).total
    import io

    def kb(img):
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=95)
        return buf.tell() / 1000

    np.testing.assert_allclose(rewards, [kb(img) for img in images], rtol=1e-6)


def test_offloaded_rewards_are_asleep_between_two_steps_of_flow_grpos_script_and_danceGRPOs_loop(tmp_path):
    """flow_grpo's script scores each sampling batch with ``reward_fn`` and normalises ``avg`` per prompt with its
    own ``PerPromptStatTracker``; DanceGRPO scores inline with a processor. With ``offload: drop`` the CLIP weights
    are freed between the steps of both, and the scores equal a resident copy's, bit for bit."""
    from rewardzoo.testing import tiny_open_clip_dir

    stat_tracking = client_module("flow_grpo", "flow_grpo.stat_tracking")

    def config(folder, **extra):
        path = str(tiny_open_clip_dir(tmp_path / folder, seed=3))
        return {
            "rewards": [{"name": "clip", "reward_model": "clip_score", "device": "cpu", "model_path": path, **extra}]
        }

    resident = flow_grpo_reward_fn(config("resident"))
    reward_fn = flow_grpo_reward_fn(config("flow_grpo", offload="drop"))
    score = build_processors(config("dance", offload="cpu"))[0]
    prompts = ["p0", "p0", "p1", "p1"]
    tracker = stat_tracking.PerPromptStatTracker(global_std=False)
    for seed in (1, 2):
        images = _images(seed)
        scores, _ = reward_fn(images, prompts, [{}] * 4, only_strict=True)
        advantages = tracker.update(np.array(prompts), scores["avg"])
        tracker.clear()  # once per epoch, as the script does
        inline = score([Sample(image=im, prompt=p) for im, p in zip(images.unbind(0), prompts)]).total
        for processor in (reward_fn.processor, score):
            residency, reward = processor.loader.residency, processor.rewards["clip"]
            assert residency.is_asleep(reward)
        assert reward_fn.processor.loader.residency.weight_bytes(reward_fn.processor.rewards["clip"]) == 0
        expected, _ = resident(images, prompts, [{}] * 4)
        assert scores["avg"].tobytes() == expected["avg"].tobytes() == inline.tobytes()
        assert np.isfinite(advantages).all()
