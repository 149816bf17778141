"""Loader: one construction per model identity across train and eval specs; constructor kwargs checked."""

from __future__ import annotations

import pytest

import rewardzoo
from rewardzoo import RewardLoader, build_processors
from rewardzoo.errors import ConfigError, RegistryError

from .rewards import PromptLength, path


class CountingLength(PromptLength):
    built = 0

    def __init__(self, model_path=None, device="cpu", dtype="float32", factor: float = 1.0):
        super().__init__(model_path, device, dtype, factor)
        type(self).built += 1


def test_train_and_eval_specs_of_one_model_share_an_instance():
    CountingLength.built = 0
    target = f"{__name__}:CountingLength"
    cfg = rewardzoo.load_config(
        {
            "rewards": [
                {"name": "a", "reward_model": target, "weight": 2.0, "batch_size": 3},
                {"name": "b", "reward_model": target, "applicable_datasets": ["x"], "dtype": "fp32"},
            ],
            "eval_rewards": [
                {"name": "c", "reward_model": target, "async_reward": True},
                {"name": "d", "reward_model": target, "kwargs": {"factor": 2.0}},
                {"name": "e", "reward_model": target, "dtype": "bfloat16"},
                {"name": "f", "reward_model": target, "model_path": "other"},
            ],
        }
    )
    loader = RewardLoader()
    train, evaluate = build_processors(cfg, loader)
    assert train.rewards["a"] is train.rewards["b"] is evaluate.rewards["c"]
    assert len({id(r) for r in evaluate.rewards.values()}) == 4
    assert loader.constructions == 4 and CountingLength.built == 4


def test_device_auto_and_cpu_are_one_identity_on_a_cpu_machine():
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("CPU-only check")
    loader = RewardLoader()
    a = loader.load({"name": "a", "reward_model": "jpeg_compressibility", "device": "auto"})
    b = loader.load({"name": "b", "reward_model": "jpeg_compressibility", "device": "cpu"})
    assert a is b and a.device == "cpu" and loader.constructions == 1


def test_unknown_constructor_option_is_a_config_error():
    with pytest.raises(
        ConfigError, match="entry 'q', field 'kwargs.qualty'.*no option 'qualty'.*did you mean 'quality'"
    ):
        RewardLoader().load({"name": "q", "reward_model": "jpeg_compressibility", "kwargs": {"qualty": 90}})


def test_a_non_reward_class_is_refused():
    with pytest.raises(RegistryError, match="not a rewardzoo Reward"):
        RewardLoader().load({"name": "x", "reward_model": "collections:OrderedDict"})


def test_reward_instance_gets_device_dtype_and_path_from_spec():
    reward = RewardLoader().load(
        {"name": "l", "reward_model": path(PromptLength), "device": "cpu", "dtype": "bf16", "model_path": "/weights"}
    )
    assert (reward.device, reward.dtype_name, reward.model_path) == ("cpu", "bfloat16", "/weights")


def test_constructor_refusals_name_the_entry():
    with pytest.raises(ConfigError, match="entry 'q', field 'kwargs.quality': must be an integer in \\[1, 100\\]"):
        RewardLoader().load({"name": "q", "reward_model": "jpeg_compressibility", "kwargs": {"quality": 0}})
    with pytest.raises(ConfigError, match="entry 'ranked', field 'kwargs.base'"):
        RewardLoader().load({"name": "ranked", "reward_model": "group_rank"})


def test_dtype_auto_is_the_cards_reference_precision_per_device(tmp_path):
    from rewardzoo.core.loader import dtype_for as card_dtype
    from rewardzoo.core.resolve import parse_spec
    from rewardzoo.registry import info_from_card, lookup

    def dtype_for(spec, device):
        return card_dtype(spec, device, lookup(spec.reward_model))

    auto = parse_spec({"name": "c", "reward_model": "clip_score"})
    assert auto.dtype == "auto"
    # clip_score's card says the reference (OpenAI clip.load) keeps float16 weights on CUDA
    assert (dtype_for(auto, "cuda:1"), dtype_for(auto, "cpu")) == ("float16", "float32")
    assert dtype_for(parse_spec({"name": "c", "reward_model": "clip_score", "dtype": "fp32"}), "cuda:0") == "float32"
    assert dtype_for(parse_spec({"name": "v", "reward_model": "vqascore"}), "cuda:0") == "bfloat16"
    assert dtype_for(parse_spec({"name": "j", "reward_model": "jpeg_compressibility"}), "cuda:0") == "float32"
    assert dtype_for(parse_spec({"name": "l", "reward_model": path(PromptLength)}), "cuda:0") == "float32"
    # `auto` and the float32 it means on the CPU are one model identity, loaded once
    loader = RewardLoader()
    a = loader.load({"name": "a", "reward_model": path(PromptLength), "device": "cpu"})
    b = loader.load({"name": "b", "reward_model": path(PromptLength), "device": "cpu", "dtype": "float32"})
    assert a is b and a.dtype_name == "float32" and loader.constructions == 1
    meta = {
        "name": "x",
        "implementation": "m:C",
        "summary": "s",
        "modality": "image",
        "kind": "pointwise",
        "extra": None,
        "higher_is_better": True,
        "score_range": [0, 1],
        "download": False,
    }
    assert (
        info_from_card({**meta, "default_dtype": {"cuda": "bf16"}}, tmp_path / "x.md").dtype_on("cuda:0") == "bfloat16"
    )
    for bad in ({"gpu": "float16"}, {"cuda": "int8"}):
        with pytest.raises(RegistryError, match="default_dtype"):
            info_from_card({**meta, "default_dtype": bad}, tmp_path / "x.md")


def test_a_reward_has_its_configured_name_from_the_start_of_init():
    from .rewards import NamesItself

    NamesItself.seen.clear()
    built = RewardLoader().load({"name": "n", "reward_model": path(NamesItself)})
    assert built.name == path(NamesItself).lower() and NamesItself.seen == [built.name, built.name]
    with pytest.raises(ConfigError, match=r"entry 'n'.*tests\.no_extras\.rewards:namesitself: refused"):
        RewardLoader().load({"name": "n", "reward_model": path(NamesItself), "kwargs": {"refuse": True}})
    assert NamesItself().name == "NamesItself"  # built directly: its class name, as before


def test_a_load_consults_the_registry_once_and_reads_the_resolved_record(monkeypatch):
    from rewardzoo import registry
    from rewardzoo.core import loader as loader_module

    calls = []
    real = registry.find

    def counting(name):
        calls.append(name)
        return real(name)

    monkeypatch.setattr(loader_module, "find", counting)
    for name in ("lookup", "canonical_target", "resolve", "describe", "info"):  # nothing else is asked
        monkeypatch.setattr(registry, name, lambda *a, **k: pytest.fail("the loader asked the registry again"))
    reward = RewardLoader().load({"name": "j", "reward_model": "jpeg_compressibility", "device": "cpu"})
    assert calls == ["jpeg_compressibility"]
    assert reward.info.name == "jpeg_compressibility" and reward.device == "cpu" and reward.dtype_name == "float32"
    from rewardzoo.core.resolve import parse_spec

    resolved = loader_module.resolve_reward(parse_spec({"name": "j", "reward_model": "jpeg_compressibility"}))
    assert resolved.record is reward.info and resolved.implementation is type(reward)
    assert resolved.identity[0] == "rewardzoo.rewards.image.jpeg:JpegCompressibility"


def test_registry_errors_name_the_entry_once_relabelled():
    with pytest.raises(
        RegistryError,
        match="entry 'q', field 'reward_model': unknown reward 'jpeg_compresibility'"
        ".*did you mean 'jpeg_compressibility'",
    ) as err:
        RewardLoader().load({"name": "q", "reward_model": "jpeg_compresibility"})
    assert (err.value.entry, err.value.field) == ("q", "reward_model")
    # an inner reward's: the entry the user wrote and the option that named it
    with pytest.raises(RegistryError, match="entry 'ranked', field 'kwargs.base': unknown reward 'no_such'") as err:
        RewardLoader().load({"name": "ranked", "reward_model": "group_rank", "kwargs": {"base": "no_such"}})
    assert (err.value.entry, err.value.field) == ("ranked", "kwargs.base")
