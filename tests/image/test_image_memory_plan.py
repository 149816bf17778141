"""The memory plan against loaded models: a checkpoint's header bytes equal the bytes of the loaded modules.

What is compared: the plan counts what a checkpoint stores, parameters and persistent buffers, at the entry's
resolved dtype; the loaded side is the sum of ``numel * element_size`` over the tensors of the loaded reward's
modules' ``state_dict`` (parameters and persistent buffers, each tensor once). Non-persistent buffers (open_clip's
attention mask, transformers' position ids) are rebuilt at construction and are in neither; their size is printed by
the test that checks it. Tiny open_clip (``oc_dir``) and transformers CLIP (``hf_dir``) directories.
"""

from __future__ import annotations

import json
import os

import pytest
import torch

import rewardzoo.testing as rzt
from rewardzoo import RewardProcessor
from rewardzoo.cli import main
from rewardzoo.core.memory_plan import plan_config
from rewardzoo.core.residency import reward_modules
from rewardzoo.core.resolve import load_config
from rewardzoo.registry import builtin


def _loaded_bytes(reward) -> int:
    seen: dict[int, int] = {}
    for module in reward_modules(reward):
        for tensor in module.state_dict(keep_vars=True).values():
            seen.setdefault(id(tensor), tensor.numel() * tensor.element_size())
    return sum(seen.values())


def _entry(family, oc_dir, hf_dir, dtype):
    path = {"clip_score": oc_dir, "pickscore": hf_dir}[family]
    return {"name": "r", "reward_model": family, "model_path": str(path), "device": "cpu", "dtype": dtype}


@pytest.mark.parametrize("family", ["clip_score", "pickscore"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_plan_bytes_equal_the_loaded_modules(oc_dir, hf_dir, family, dtype):
    entry = _entry(family, oc_dir, hf_dir, dtype)
    plan = plan_config(load_config({"rewards": [entry]}))
    (model,) = plan.models
    assert model.how == "safetensors headers" and model.dtype == dtype and model.files
    with RewardProcessor([entry]) as processor:
        loaded = _loaded_bytes(processor.rewards["r"])
    assert loaded > 0 and model.weights == loaded


def test_shared_models_are_counted_once_and_kept_together(oc_dir, hf_dir):
    clip = {"reward_model": "clip_score", "model_path": str(oc_dir), "device": "cpu"}
    config = load_config(
        {
            "rewards": [
                {"name": "clip", **clip, "offload": "cpu"},
                {"name": "rank", "reward_model": "group_rank", "kwargs": {"base": clip}},
                {"name": "pick", "reward_model": "pickscore", "model_path": str(hf_dir), "device": "cpu"},
            ],
            "eval_rewards": [{"name": "clip_eval", **clip, "offload": "drop"}],
        }
    )
    plan = plan_config(config)
    by_entry = {name: m for m in plan.models for name in m.entries}
    shared = by_entry["clip"]
    assert by_entry["clip_eval"] is shared and by_entry["rank.base"] is shared  # train, eval, a wrapper's base
    assert shared.offload == "none"  # the wrapper's base keeps it awake, as the loader does
    assert by_entry["rank"].how == "no weights"
    with RewardProcessor(config.rewards) as train:
        clip_bytes, pick_bytes = _loaded_bytes(train.rewards["clip"]), _loaded_bytes(train.rewards["pick"])
        assert train.loader.constructions == 3  # clip (shared with rank's base), rank, pick
    assert plan.devices["cpu"].resident == clip_bytes + pick_bytes


def test_auto_entries_sharing_a_model_are_placed_together(oc_dir, hf_dir):
    clip = {"reward_model": "clip_score", "model_path": str(oc_dir)}
    config = load_config(
        {
            "rewards": [
                {"name": "clip", **clip},
                {"name": "pick", "reward_model": "pickscore", "model_path": str(hf_dir)},
            ],
            "eval_rewards": [{"name": "clip_eval", **clip}],
        }
    )
    budgets = {"cuda:0": 10**9, "cuda:1": 10**9 + 1}
    plan = plan_config(config, budgets)
    by_entry = {name: m for m in plan.models for name in m.entries}
    assert by_entry["clip"] is by_entry["clip_eval"]
    big, small = sorted((by_entry["clip"], by_entry["pick"]), key=lambda m: -(m.weights or 0))
    assert (big.device, small.device) == ("cuda:1", "cuda:0")  # the largest first, onto the most free
    for model in (big, small):  # dtype auto on CUDA: the card's default_dtype there
        assert model.dtype == builtin()[model.reward_model].dtype_on("cuda:0")
    assert by_entry["clip"].dtype == "float16"


def test_probe_measures_an_activation_on_the_cpu(oc_dir, tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"rewards:\n  - name: clip\n    reward_model: clip_score\n    model_path: {oc_dir}\n    device: cpu\n"
    )
    assert main(["plan", str(cfg), "--probe", "--json"]) == 0
    (model,) = json.loads(capsys.readouterr().out)["models"]
    assert model["activation_from"] == "probe", model["notes"]
    assert model["activation_per_sample_bytes"] >= 0
    assert any("cpu rss" in n for n in model["notes"])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_head_beside_its_backbone_is_counted(oc_dir, tmp_path, dtype):
    """laion_aesthetic loads its head (``model_path``, kept in float32) and a CLIP backbone (``clip_model``)."""
    head = rzt.aesthetic_head_file(tmp_path / "head.safetensors", seed=7)
    entry = {
        "name": "a",
        "reward_model": "laion_aesthetic",
        "model_path": str(head),
        "device": "cpu",
        "dtype": dtype,
        "kwargs": {"clip_model": str(oc_dir)},
    }
    (model,) = plan_config(load_config({"rewards": [entry]})).models
    assert str(head) in model.files and len(model.files) == 2 and model.how.startswith("safetensors headers")
    with RewardProcessor([entry]) as processor:
        reward = processor.rewards["a"]
        assert reward.head.layers[0].weight.dtype == torch.float32
        loaded = _loaded_bytes(reward)
    assert model.weights == loaded


def _cache_file(cache, repo: str, name: str):
    """``name`` of ``repo`` laid out as huggingface_hub caches it (refs/main -> a snapshot)."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("0" * 40)
    path = folder / "snapshots" / ("0" * 40) / name
    path.parent.mkdir(parents=True)
    return path


def test_an_open_clip_tag_is_found_where_open_clip_looks(tmp_path, monkeypatch):
    """``clip_score`` with its default ``ViT-B-32`` / ``openai``: unknown until the tag's file is in the Hugging Face
    cache, then that file, the one open_clip's own resolution of the tag returns (offline, from the cache)."""
    import huggingface_hub.constants as hub
    import open_clip
    from safetensors.torch import save_file

    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    config = load_config({"rewards": [{"name": "clip_score", "device": "cpu"}]})
    (model,) = plan_config(config).models
    assert model.weights is None and "not in the local Hugging Face cache" in model.how
    cfg = open_clip.get_pretrained_cfg("ViT-B-32", "openai")
    path = _cache_file(tmp_path, cfg["hf_hub"].rstrip("/"), "open_clip_model.safetensors")
    save_file({"w": torch.zeros(3, 4), "b": torch.zeros(5, dtype=torch.float16)}, str(path))
    (model,) = plan_config(config).models
    assert [os.path.realpath(f) for f in model.files] == [os.path.realpath(path)]
    assert os.path.realpath(open_clip.pretrained.download_pretrained(cfg)) == os.path.realpath(path)
    assert model.weights == (12 + 5) * 4  # at the entry's float32


def test_a_frame_averaging_video_reward_plans_its_image_reward_once(tmp_path):
    """The composite holds no weights of its own (its card says model_free): its inner image reward's checkpoint is
    counted once, not once for each (the real-size check found video_imaging_quality planned at twice its weights)."""
    from rewardzoo.core.resolve import load_config
    from rewardzoo.registry import find
    from rewardzoo.rewards.video.frame_scores import FrameAverage

    composites = [
        name
        for name in ("video_clip_score", "video_aesthetic", "video_imaging_quality", "video_quality")
        if issubclass(find(name).load_class(), FrameAverage)
    ]
    assert len(composites) == 4 and all(find(name).card.model_free for name in composites)
    checkpoint = tmp_path / "w.safetensors"
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(1000)}, str(checkpoint))
    config = load_config(
        {"rewards": [{"name": "v", "reward_model": "video_imaging_quality", "model_path": str(checkpoint)}]}
    )
    models = plan_config(config).models
    assert sum(m.weights or 0 for m in models) == 4000
