"""The AlignProp-protocol adapter (differentiable ``reward_fn(images, prompts, metadata) -> (rewards, {})``) and
the DRaFT-K example that trains a tiny generator on a differentiable reward."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")

from rewardzoo import differentiable
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.integrations import alignprop_reward_fn
from rewardzoo.testing import aesthetic_head_file, tiny_open_clip_dir

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ["a red cube", "a dog", "two cats", "the sea"]


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    root = tmp_path_factory.mktemp("alignprop")
    clip = tiny_open_clip_dir(root / "clip", seed=0)
    head = aesthetic_head_file(root / "head.pth", seed=7)
    return {
        "rewards": [
            {"name": "clip_score", "model_path": str(clip), "device": "cpu", "kwargs": {"prefix": ""}, "weight": 1.0},
            {
                "name": "laion_aesthetic",
                "model_path": str(head),
                "device": "cpu",
                "kwargs": {"clip_model": str(clip)},
                "weight": {"t2i": 0.5},
                "applicable_datasets": ["t2i"],
            },
        ]
    }


def _images(seed: int = 0) -> torch.Tensor:
    return torch.rand(4, 3, 48, 56, generator=torch.Generator().manual_seed(seed))


def test_rewards_are_a_differentiable_tensor_and_the_reward_model_stays_frozen(config):
    reward_fn = alignprop_reward_fn(config)
    images = _images().requires_grad_(True)
    rewards, meta = reward_fn(images, PROMPTS, [{}] * 4)
    assert meta == {} and rewards.shape == (4,) and rewards.requires_grad
    (-rewards.mean()).backward()
    assert torch.isfinite(images.grad).all() and images.grad.abs().sum() > 0
    f = reward_fn.differentiable
    assert set(f.last) == {"clip_score", "laion_aesthetic"}
    for reward in f.rewards.values():
        assert all(p.grad is None for p in reward.backbone.model.parameters())
    assert all(p.grad is None for p in f.rewards["laion_aesthetic"].head.parameters())


def test_same_total_as_differentiable_and_dataset_routing(config):
    images = _images(1)
    meta = [{"dataset": "t2i"}, {"dataset": "other"}, {"dataset": "t2i"}, {"dataset": "other"}]
    rewards, _ = alignprop_reward_fn(config, dataset_key="dataset")(images, PROMPTS, meta)
    total, parts = differentiable(config)(images, PROMPTS, dataset=[m["dataset"] for m in meta], return_parts=True)
    torch.testing.assert_close(rewards, total)
    w = torch.tensor([0.5, 0.0, 0.5, 0.0])
    torch.testing.assert_close(total, parts["clip_score"] + w * parts["laion_aesthetic"])
    with pytest.raises(InputError, match="dataset_key"):
        alignprop_reward_fn(config, dataset_key="dataset")(images, PROMPTS, [{}] * 4)


def test_signed_input_range_maps_vae_output_like_alignprop(config):
    unit = _images(2)
    signed = unit * 2 - 1  # what a VAE decode gives; AlignProp's loss functions map it with x / 2 + 0.5
    a, _ = alignprop_reward_fn(config)(unit, PROMPTS, None)
    b, _ = alignprop_reward_fn(config, input_range="signed")(signed, PROMPTS, None)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ConfigError, match="input_range"):
        alignprop_reward_fn(config, input_range="0-255")


def test_a_non_differentiable_reward_is_refused_by_name():
    with pytest.raises(ConfigError, match="jpeg_incompressibility.*not differentiable"):
        alignprop_reward_fn({"rewards": [{"name": "jpeg_incompressibility"}]})


def test_draft_example_raises_the_reward():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "draft_tiny.py"), "--steps", "30"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = re.search(r"reward ([0-9.]+) -> ([0-9.]+) in 30 steps \(reward model frozen: True\)", proc.stdout)
    assert found, proc.stdout[-2000:]
    first, last = map(float, found.groups())
    assert last > first * 1.2, (first, last)


@pytest.mark.parametrize("mode", ["cpu", "drop"])
def test_offloaded_rewards_sleep_once_backward_is_through_and_are_asleep_between_two_steps(config, tmp_path, mode):
    """An AlignProp step: decode (here a small generator), score, ``(-rewards.mean()).backward()``, optimizer step.
    With ``offload`` the reward weights are needed through the backward pass and asleep (freed for ``drop``) from
    its end to the next step's call; rewards and generator gradients equal those of resident rewards."""
    clip = tiny_open_clip_dir(tmp_path / "clip", seed=0)  # the same weights, another copy (not shared)
    head = aesthetic_head_file(tmp_path / "head.pth", seed=7)
    entries = [dict(e) for e in config["rewards"]]
    entries[0]["model_path"], entries[1]["model_path"] = str(clip), str(head)
    entries[1]["kwargs"] = {"clip_model": str(clip)}
    ours = alignprop_reward_fn({"rewards": [{**e, "offload": mode} for e in entries]})
    resident = alignprop_reward_fn(config)
    f = ours.differentiable
    residency = f.loader.residency

    def asleep():
        return all(residency.is_asleep(r) for r in f.rewards.values())

    def freed():
        return all(residency.weight_bytes(r) == 0 for r in f.rewards.values())

    for step in range(2):
        results = []
        for reward_fn in (ours, resident):
            generator = torch.nn.Linear(8, 3 * 48 * 56)
            torch.nn.init.normal_(generator.weight, std=0.01, generator=torch.Generator().manual_seed(step))
            torch.nn.init.zeros_(generator.bias)
            images = torch.sigmoid(generator(torch.ones(4, 8))).view(4, 3, 48, 56)
            rewards, _ = reward_fn(images, PROMPTS, [{"ds": "t2i"}] * 4)
            if reward_fn is ours:
                assert not asleep()  # awake: the graph holds the weights until backward
            (-rewards.mean()).backward()
            results.append((rewards.detach(), generator.weight.grad.clone()))
        assert asleep() and (freed() or mode == "cpu")  # between this step and the next
        (r1, g1), (r2, g2) = results
        assert r1.numpy().tobytes() == r2.numpy().tobytes() and torch.equal(g1, g2)
    with torch.no_grad():  # no graph: asleep again at once
        ours(_images(), PROMPTS)
    assert asleep()


def test_several_calls_before_one_backward_keep_offloaded_rewards_awake_until_it(config, tmp_path):
    """Gradient accumulation over two reward calls and one backward: the rewards stay awake while either graph is
    pending (their weights are in both) and sleep once the backward has gone through both."""
    clip = tiny_open_clip_dir(tmp_path / "clip", seed=0)
    entry = {**config["rewards"][0], "model_path": str(clip), "offload": "drop"}
    reward_fn = alignprop_reward_fn({"rewards": [entry]})
    f = reward_fn.differentiable
    reward, residency = f.rewards["clip_score"], f.loader.residency
    first, second = _images(1).requires_grad_(True), _images(2).requires_grad_(True)
    a, _ = reward_fn(first, PROMPTS)
    b, _ = reward_fn(second, PROMPTS)
    with torch.no_grad():
        reward_fn(_images(3), PROMPTS)  # no graph of its own, but two are pending: stays awake
    assert not residency.is_asleep(reward)
    (-(a.mean() + b.mean())).backward()
    assert residency.is_asleep(reward) and residency.weight_bytes(reward) == 0
    assert torch.isfinite(first.grad).all() and torch.isfinite(second.grad).all()
