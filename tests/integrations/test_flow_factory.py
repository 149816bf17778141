"""Flow-Factory adapters (rewardzoo.integrations.flow_factory) driven by Flow-Factory's own code.

Flow-Factory is the unmodified snapshot in ../shared/clients (see tests/clients.py): its registry fallback
(``load_reward_model``), ``MultiRewardLoader``, ``RewardProcessor`` (local and gathered groupwise paths),
``RewardBuffer`` (sync and async) and ``AdvantageProcessor``, on the CPU with 32x32 random images. Scores
are checked against rewardzoo's own processor and an independent PIL computation (JPEG q95 size in kB).
"""

from __future__ import annotations

import copy
import io
import math
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from PIL import Image

from rewardzoo import RewardProcessor as ZooProcessor
from rewardzoo import Sample
from rewardzoo.errors import ConfigError, InputError, RegistryError, RewardOutputError
from rewardzoo.rewards.base import Inputs, PointwiseReward
from rewardzoo.rewards.group.ranking import GroupRank
from rewardzoo.rewards.image.jpeg import JpegCompressibility
from rewardzoo.rewards.remote import RemoteReward

from ..clients import SHARED, client_module

torch = pytest.importorskip("torch")

ADAPTERS = "rewardzoo.integrations.flow_factory."
POINTWISE, GROUPWISE = ADAPTERS + "RewardZooPointwise", ADAPTERS + "RewardZooGroupwise"
N_PROMPTS, GROUP = 3, 4
ENTRIES = [
    {
        "name": "jpeg",
        "reward_model": POINTWISE,
        "rewardzoo": "jpeg_incompressibility",
        "quality": 95,
        "batch_size": 5,
        "device": "cpu",
        "dtype": "float32",
    },
    {
        "name": "rank",
        "reward_model": GROUPWISE,
        "rewardzoo": "group_rank",
        "base": "jpeg_incompressibility",
        "weight": 0.5,
        "device": "cpu",
    },
]
WEIGHTS = {"jpeg": 1.0, "rank": 0.5}


def path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


# --------------------------------------------------------------------------- test-local rewards
class Settings(PointwiseReward):
    """Score = factor * len(prompt) + weight; keeps what its constructor received."""

    inputs = Inputs(("prompt",))

    def __init__(self, model_path=None, device="cpu", dtype="float32", *, factor: float = 1.0, weight: float = 0.0):
        super().__init__(model_path, device, dtype)
        self.factor, self.weight = factor, weight

    def __call__(self, prompt, **_):
        return [self.factor * len(p) + self.weight for p in prompt]


class FrameCount(PointwiseReward):
    inputs = Inputs(("video",), frames="float")

    def __call__(self, video, **_):
        return [float(v.shape[0]) for v in video]


class Seconds(PointwiseReward):
    inputs = Inputs(("audio",), mono=False)

    def __call__(self, audio, audio_sample_rate, **_):
        return [a.shape[0] * a.shape[-1] / rate for a, rate in zip(audio, audio_sample_rate)]  # channels * s


class ConditionPixels(PointwiseReward):
    inputs = Inputs(("condition_images",))

    def __call__(self, condition_images, **_):
        return [float(sum(im.size[0] * im.size[1] for im in images)) for images in condition_images]


class NotANumber(PointwiseReward):
    inputs = Inputs(("prompt",))

    def __call__(self, prompt, **_):
        return [math.nan] * len(prompt)


class NeedsMetadata(PointwiseReward):
    inputs = Inputs(("metadata",))


class Configured(PointwiseReward):
    """A reward whose own options are called ``config`` and ``accelerator`` (score = len(config))."""

    inputs = Inputs(("prompt",))

    def __init__(self, model_path=None, device="cpu", dtype="float32", *, config=None, accelerator=None):
        super().__init__(model_path, device, dtype)
        self.config, self.accelerator = config, accelerator

    def __call__(self, prompt, **_):
        return [float(len(self.config))] * len(prompt)


# --------------------------------------------------------------------------- Flow-Factory and data
@pytest.fixture(scope="module")
def ff():
    """Flow-Factory's own modules (the test skips, saying why, when the snapshot does not import)."""
    rewards = client_module("flow_factory", "flow_factory.rewards")
    from accelerate import Accelerator

    return SimpleNamespace(
        rewards=rewards,
        hparams=client_module("flow_factory", "flow_factory.hparams"),
        samples=client_module("flow_factory", "flow_factory.samples"),
        advantage=client_module("flow_factory", "flow_factory.advantage.advantage_processor"),
        acc=Accelerator(cpu=True),
    )


def kilobytes(array: np.ndarray) -> float:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="JPEG", quality=95)
    return len(buf.getvalue()) / 1000


def make_batch(ff):
    """3 prompts x 4 images, interleaved as a k-repeat sampler gives them; JPEG sizes all differ."""
    rng = np.random.default_rng(0)
    n = N_PROMPTS * GROUP
    arrays = [rng.integers(0, 24 + 16 * int(i), (32, 32, 3), dtype=np.uint8) for i in rng.permutation(n)]
    prompts = [f"prompt {j % N_PROMPTS}" for j in range(n)]
    samples = [ff.samples.T2ISample(prompt=p, image=Image.fromarray(a)) for p, a in zip(prompts, arrays)]
    kb = np.array([kilobytes(a) for a in arrays])
    groups = np.array([j % N_PROMPTS for j in range(n)])
    ranks = np.empty(n)
    for g in range(N_PROMPTS):
        members = np.flatnonzero(groups == g)
        assert len(set(kb[members])) == GROUP  # no ties: each rank is unambiguous
        ranks[members] = kb[members].argsort().argsort() / (GROUP - 1)
    return SimpleNamespace(samples=samples, arrays=arrays, prompts=prompts, kb=kb, ranks=ranks, groups=groups)


def ff_args(ff, entries):
    return ff.hparams.MultiRewardArguments.from_dict([dict(e) for e in entries])


def loaded(ff, entries=ENTRIES):
    loader = ff.rewards.MultiRewardLoader(ff_args(ff, entries), ff.acc).load()
    return loader.get_training_reward_models(), loader.get_reward_configs("train")


def ff_reward(ff, **entry):
    return ff.rewards.load_reward_model(ff.hparams.RewardArguments.from_dict(entry), ff.acc)


def assert_scores(rewards, batch):
    np.testing.assert_array_equal(rewards["jpeg"].numpy(), batch.kb.astype(np.float32))
    np.testing.assert_allclose(rewards["rank"].numpy(), batch.ranks, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- construction
def test_flow_factory_loads_the_adapters_through_its_registry_fallback(ff):
    jpeg, rank = (ff_reward(ff, **entry) for entry in ENTRIES)
    assert isinstance(jpeg, ff.rewards.PointwiseRewardModel) and isinstance(rank, ff.rewards.GroupwiseRewardModel)
    assert jpeg.required_fields == ("image",) and rank.required_fields == ("prompt", "image")
    assert jpeg.use_tensor_inputs and jpeg.device == torch.device("cpu")
    assert (jpeg.reward.name, jpeg.reward.quality) == ("jpeg_incompressibility", 95)
    # train and eval entries of one model share one instance (FF's dedup keys include the extra keys)
    loader = ff.rewards.MultiRewardLoader(ff_args(ff, ENTRIES), ff.acc, ff_args(ff, ENTRIES[:1])).load()
    assert loader.get_unique_model_count() == 2
    assert loader.get("jpeg", "eval") is loader.get("jpeg", "train")


def test_constructor_maps_device_dtype_model_path_and_options(ff):
    # FF's defaults: device cuda (this rank's device: the accelerator's CPU here), dtype from `fp16`
    model = ff_reward(
        ff,
        name="s",
        reward_model=POINTWISE,
        rewardzoo=path(Settings),
        dtype="fp16",
        model_path="/weights/s",
        factor=2.0,
        kwargs={"weight": 3.0},
        batch_size=7,
    )
    reward = model.reward
    assert (reward.device, reward.dtype_name, reward.model_path) == ("cpu", "float16", "/weights/s")
    assert (reward.factor, reward.weight) == (2.0, 3.0)
    assert model.processor.specs[0].batch_size == 7
    assert model(prompt=["abc", "de"]).rewards.tolist() == [9.0, 7.0]


def test_default_cuda_device_is_the_cpu_for_a_cpu_only_reward(ff):
    # an accelerator on cuda:0 (a stand-in: only its device is read); jpeg's card says cpu only
    gpu = SimpleNamespace(device=torch.device("cuda", 0))
    args = ff.hparams.RewardArguments.from_dict(
        {"name": "jpeg", "reward_model": POINTWISE, "rewardzoo": "jpeg_incompressibility"}
    )
    model = ff.rewards.load_reward_model(args, gpu)
    assert model.reward.device == "cpu" and model.device == torch.device("cpu")
    args = ff.hparams.RewardArguments.from_dict({"name": "s", "reward_model": POINTWISE, "rewardzoo": path(Settings)})
    if torch.cuda.is_available():  # a reward without a card runs on the accelerator's device
        assert ff.rewards.load_reward_model(args, gpu).reward.device == "cuda:0"
    else:  # passed on, and checked by rewardzoo
        with pytest.raises(ConfigError, match="entry 's', field 'device'.*cuda:0"):
            ff.rewards.load_reward_model(args, gpu)


@pytest.mark.parametrize(
    "entry, error, match",
    [
        ({"reward_model": POINTWISE}, ConfigError, "entry 'x', field 'rewardzoo': name the rewardzoo reward"),
        (
            {"reward_model": POINTWISE, "rewardzoo": "jpeg_incompresibility"},
            RegistryError,
            "entry 'x', field 'rewardzoo': unknown reward.*did you mean 'jpeg_incompressibility'",
        ),
        (
            {"reward_model": POINTWISE, "rewardzoo": "jpeg_incompressibility", "qualty": 90},
            ConfigError,
            "no option 'qualty' \\(did you mean 'quality'",
        ),
        (
            {
                "reward_model": POINTWISE,
                "rewardzoo": "jpeg_incompressibility",
                "quality": 90,
                "kwargs": {"quality": 80},
            },
            ConfigError,
            "'quality'.*both",
        ),
        (
            {"reward_model": POINTWISE, "rewardzoo": "group_rank", "base": "jpeg_incompressibility"},
            ConfigError,
            "groupwise reward; use .*RewardZooGroupwise",
        ),
        (
            {"reward_model": GROUPWISE, "rewardzoo": "jpeg_incompressibility"},
            ConfigError,
            "pointwise reward; use .*RewardZooPointwise",
        ),
        (
            {"reward_model": GROUPWISE, "rewardzoo": "group_rank", "base": "jpeg_incompresibility"},
            RegistryError,
            "entry 'x', field 'kwargs.base'",
        ),
        (
            {"reward_model": POINTWISE, "rewardzoo": "math:sqrt"},
            ConfigError,
            "field 'rewardzoo'.*not a rewardzoo reward",
        ),
        (
            {"reward_model": POINTWISE, "rewardzoo": path(NeedsMetadata)},
            ConfigError,
            "needs \\['metadata'\\], which Flow-Factory samples do not carry",
        ),
    ],
)
def test_configuration_errors_name_the_entry(ff, entry, error, match):
    with pytest.raises(error, match=match):
        ff_reward(ff, name="x", device="cpu", **entry)


# --------------------------------------------------------------------------- a rewardzoo class named directly
def suggested_entry(message: str) -> dict:
    """The YAML entry a refusal of a bare rewardzoo class shows, parsed."""
    block = message.split("write the entry as\n", 1)[1].split("\nkeeping", 1)[0]
    (entry,) = yaml.safe_load(block)
    return entry


@pytest.mark.parametrize(
    "cls, options, adapter, card",
    [
        (JpegCompressibility, {"quality": 90}, POINTWISE, "jpeg_compressibility"),
        (GroupRank, {"base": "jpeg_compressibility"}, GROUPWISE, "group_rank"),
    ],
    ids=["pointwise", "groupwise"],
)
def test_a_rewardzoo_class_named_directly_is_refused_with_the_adapter_entry(ff, cls, options, adapter, card):
    # Flow-Factory's dotted-path fallback builds Class(config=..., accelerator=...): a bare TypeError until now
    with pytest.raises(ConfigError) as caught:
        ff_reward(ff, name="bare", reward_model=f"{cls.__module__}.{cls.__qualname__}", device="cpu", **options)
    message = str(caught.value)
    assert message.startswith(f"entry 'bare', field 'reward_model': {cls.__qualname__} is a rewardzoo reward")
    assert "registry name (`rewardzoo list`" in message
    entry = suggested_entry(message)
    assert entry == {"name": "bare", "reward_model": adapter, "rewardzoo": path(cls)}
    # the entry it shows, with the other keys kept, is one Flow-Factory builds: that class, its card, its options
    model = ff_reward(ff, **entry, device="cpu", **options)
    assert type(model.reward) is cls and model.reward.info.name == card
    built = {"quality": model.reward.quality} if cls is JpegCompressibility else {"base": model.reward.base.info.name}
    assert built == options


def test_a_per_instance_class_named_directly_is_refused_naming_both_adapters(ff):
    with pytest.raises(ConfigError) as caught:  # refused before its __init__ would reach for the server
        ff_reward(
            ff,
            name="judge",
            reward_model="rewardzoo.rewards.remote.RemoteReward",
            url="http://127.0.0.1:9",
            rewards=["pickscore"],
        )
    assert f"reward_model: {POINTWISE}  # RewardZooGroupwise when it is built groupwise\n" in str(caught.value)
    assert suggested_entry(str(caught.value)) == {
        "name": "judge",
        "reward_model": POINTWISE,
        "rewardzoo": path(RemoteReward),
    }


def test_rewardzoo_construction_is_unaffected_by_the_refusal(ff):
    # options of a reward's own named config and accelerator, directly and through rewardzoo's loader
    reward = Configured(config={"a": 1, "b": 2}, accelerator="none")
    assert (reward.config, reward.accelerator, reward.name) == ({"a": 1, "b": 2}, "none", "Configured")
    zoo = ZooProcessor(
        [{"name": "c", "reward_model": path(Configured), "kwargs": {"config": [1, 2, 3], "accelerator": "x"}}]
    )
    assert zoo([Sample(prompt="p")]).rewards["c"].tolist() == [3.0]
    jpeg = JpegCompressibility.named("jpeg_compressibility", quality=80)
    twin = copy.deepcopy(jpeg)  # copies and unpickling call __new__ with no arguments
    assert (twin.name, twin.quality, JpegCompressibility("/w").model_path) == ("jpeg_compressibility", 80, "/w")


# --------------------------------------------------------------------------- scoring through Flow-Factory
@pytest.mark.parametrize("group_on_same_rank", [True, False], ids=["local-groups", "gathered-groups"])
def test_reward_processor_scores_equal_rewardzoo_and_pil(ff, group_on_same_rank):
    batch = make_batch(ff)
    models, configs = loaded(ff)
    processor = ff.rewards.RewardProcessor(
        ff.acc, models, configs, group_on_same_rank=group_on_same_rank, verbose=False
    )
    rewards = processor.compute_rewards(batch.samples)
    assert_scores(rewards, batch)
    assert float(batch.samples[1].extra_kwargs["rewards"]["jpeg"]) == np.float32(batch.kb[1])
    zoo = ZooProcessor(
        [
            {"name": "jpeg", "reward_model": "jpeg_incompressibility", "kwargs": {"quality": 95}},
            {"name": "rank", "reward_model": "group_rank", "kwargs": {"base": "jpeg_incompressibility"}},
        ]
    )
    own = zoo([Sample(image=Image.fromarray(a), prompt=p, group_id=p) for a, p in zip(batch.arrays, batch.prompts)])
    for name in ("jpeg", "rank"):
        np.testing.assert_array_equal(rewards[name].numpy(), own.rewards[name])


@pytest.mark.parametrize("async_reward", [False, True], ids=["sync", "async"])
def test_reward_buffer_scores_equal_pil(ff, async_reward):
    batch = make_batch(ff)
    models, configs = loaded(ff, [{**e, "async_reward": async_reward, "num_workers": 2} for e in ENTRIES])
    processor = ff.rewards.RewardProcessor(ff.acc, models, configs, group_on_same_rank=True, verbose=False)
    buffer = ff.rewards.RewardBuffer(processor, group_size=GROUP)
    try:
        for start in range(0, len(batch.samples), 5):  # chunks that match neither batch_size nor groups
            buffer.add_samples(batch.samples[start : start + 5])
        rewards = buffer.finalize(store_to_samples=True)
    finally:
        buffer.shutdown(wait=True)
    assert_scores(rewards, batch)


def hand_advantages(rewards, groups, aggregation, global_std):
    r = {k: v.numpy().astype(np.float64) for k, v in rewards.items()}
    out = np.zeros(len(groups))
    if aggregation == "sum":
        agg = sum(WEIGHTS[k] * v for k, v in r.items())
        for g in np.unique(groups):
            m = groups == g
            std = max(agg.std(), 1e-6) if global_std else max(agg[m].std(), 1e-6)
            out[m] = (agg[m] - agg[m].mean()) / std
        return out
    for k, v in r.items():
        for g in np.unique(groups):
            m = groups == g
            out[m] += WEIGHTS[k] * (v[m] - v[m].mean()) / max(v[m].std(), 1e-6)
    return (out - out.mean()) / max(out.std(), 1e-6)


@pytest.mark.parametrize("sampler_type", ["group_contiguous", "distributed_k_repeat"])
@pytest.mark.parametrize("aggregation, global_std", [("sum", True), ("sum", False), ("gdpo", True)])
def test_advantage_processor_consumes_the_rewards(ff, sampler_type, aggregation, global_std):
    batch = make_batch(ff)
    models, configs = loaded(ff)
    rewards = ff.rewards.RewardProcessor(
        ff.acc, models, configs, verbose=False, group_on_same_rank=sampler_type == "group_contiguous"
    ).compute_rewards(batch.samples)
    processor = ff.advantage.AdvantageProcessor(
        ff.acc,
        {k: c.weight for k, c in configs.items()},
        group_size=GROUP,
        global_std=global_std,
        sampler_type=sampler_type,
        verbose=False,
    )
    advantages = processor.compute_advantages(batch.samples, rewards, aggregation_func=aggregation)
    np.testing.assert_allclose(
        advantages.numpy(), hand_advantages(rewards, batch.groups, aggregation, global_std), rtol=1e-5, atol=1e-6
    )
    assert processor.pop_advantage_metrics()["train/reward_jpeg_mean"] == pytest.approx(batch.kb.mean(), rel=1e-6)


# --------------------------------------------------------------------------- direct calls and media
def test_direct_calls_return_scores_and_extras(ff):
    batch = make_batch(ff)
    jpeg, rank = (ff_reward(ff, **entry) for entry in ENTRIES)
    images = [s.image for s in batch.samples]  # (C, H, W) float tensors, as Flow-Factory passes them
    for given in (images, torch.stack(images)):
        out = jpeg(prompt=batch.prompts, image=given)
        np.testing.assert_array_equal(out.rewards.numpy(), batch.kb.astype(np.float32))
        np.testing.assert_array_equal(out.extra_info["jpeg_kb"].numpy(), batch.kb.astype(np.float32))
    # a direct groupwise call with several prompts scores each prompt's samples as one group
    out = rank(prompt=batch.prompts, image=images)
    np.testing.assert_allclose(out.rewards.numpy(), batch.ranks, atol=1e-6)
    np.testing.assert_array_equal(out.extra_info["base_score"].numpy(), batch.kb.astype(np.float32))


def media_cases(ff):
    s = ff.samples
    return {
        "video": (FrameCount, [s.T2VSample(prompt="v", video=torch.rand(t, 3, 8, 8)) for t in (3, 5)], [3.0, 5.0]),
        "audio": (
            Seconds,
            [s.T2AVSample(prompt="a", audio=torch.zeros(2, n), audio_sample_rate=16000) for n in (8000, 16000)],
            [1.0, 2.0],
        ),
        "condition_images": (
            ConditionPixels,
            [
                s.I2ISample(
                    prompt="i",
                    image=torch.rand(3, 8, 8),
                    condition_images=[Image.new("RGB", (8, 8)), Image.new("RGB", (4, 2))],
                ),  # kept as (1, C, H, W)
                s.I2ISample(prompt="i", image=torch.rand(3, 8, 8), condition_images=[torch.rand(3, 4, 4)] * 3),
            ],
            [72.0, 48.0],
        ),
    }


@pytest.mark.parametrize("case", ["video", "audio", "condition_images"])
def test_flow_factory_media_reach_the_reward_as_declared(ff, case):
    cls, samples, expected = media_cases(ff)[case]
    model = ff_reward(ff, name=case, reward_model=POINTWISE, rewardzoo=path(cls), device="cpu")
    assert model.required_fields == ((case, "audio_sample_rate") if case == "audio" else (case,))
    rewards = ff.rewards.RewardProcessor(ff.acc, {case: model}, verbose=False).compute_rewards(samples)
    assert rewards[case].tolist() == expected


def test_errors_are_rewardzoos(ff):
    batch = make_batch(ff)
    model = ff_reward(ff, name="nan", reward_model=POINTWISE, rewardzoo=path(NotANumber), device="cpu")
    processor = ff.rewards.RewardProcessor(ff.acc, {"nan": model}, verbose=False)
    with pytest.raises(RewardOutputError, match="reward 'nan': returned non-finite scores"):
        processor.compute_rewards(batch.samples[:2])
    jpeg = ff_reward(ff, **ENTRIES[0])
    with pytest.raises(InputError, match="sample 1, field 'image', reward 'jpeg'"):
        jpeg(image=[torch.rand(3, 8, 8), torch.rand(2, 3, 8, 8, 1)])
    with pytest.raises(InputError, match="one value per sample, got lengths {'prompt': 1, 'image': 2}"):
        jpeg(prompt=["a"], image=[torch.rand(3, 8, 8)] * 2)
    with pytest.raises(InputError, match="field 'prompt': expected a list"):
        jpeg(prompt="a", image=[torch.rand(3, 8, 8)])


def test_importing_rewardzoo_does_not_import_flow_factory():
    code = (
        "import sys, rewardzoo, rewardzoo.integrations; rewardzoo.integrations.__all__; "
        "assert 'flow_factory' not in sys.modules"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SHARED / "flow_factory_src" / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


def test_a_monitor_fed_by_flow_factorys_reward_processor(ff, tmp_path):
    from rewardzoo import RewardMonitor
    from rewardzoo.integrations.flow_factory import monitor_step

    batch = make_batch(ff)
    models, configs = loaded(ff)
    processor = ff.rewards.RewardProcessor(ff.acc, models, configs, group_on_same_rank=True, verbose=False)
    rewards = processor.compute_rewards(batch.samples)
    monitor = RewardMonitor(
        {
            "rewards": [
                {"name": "jpeg", "reward_model": "jpeg_incompressibility"},
                {"name": "rank", "reward_model": "group_rank", "kwargs": {"base": "jpeg_incompressibility"}},
            ]
        }
    )
    weights = {name: float(cfg.weight) for name, cfg in configs.items()}
    assert weights == WEIGHTS
    metrics = monitor_step(monitor, rewards, batch.samples, step=3, weights=weights)
    kb = batch.kb.astype(np.float32).astype(np.float64)
    ranks = rewards["rank"].numpy().astype(np.float64)
    assert metrics["train/jpeg/mean"] == np.mean(kb)
    total = (kb + 0.5 * ranks).astype(np.float32).astype(np.float64)
    assert metrics["train/total/mean"] == pytest.approx(np.mean(total), rel=1e-7)
    # groups are Flow-Factory's unique ids (one per prompt): 3 groups of 4, none inseparable
    spreads = [kb[batch.groups == g].std() for g in range(N_PROMPTS)]
    assert metrics["train/jpeg/group_std"] == pytest.approx(np.mean(spreads), rel=1e-12)
    assert metrics["train/rank/inseparable"] == 0.0
    assert "train/rank/saturation" not in metrics  # a rank reaches its bounds by construction
    with pytest.raises(InputError, match="scores for"):
        monitor_step(monitor, {"jpeg": rewards["jpeg"][:3]}, batch.samples, step=4)


# --------------------------------------------------------------------------- residency (offload)
def test_offloaded_rewards_are_asleep_between_two_steps_of_flow_factorys_reward_processor(ff, tmp_path):
    """``offload: drop`` on a CLIP entry and on a groupwise entry over the same CLIP: after each step of
    Flow-Factory's ``RewardProcessor.compute_rewards`` the shared model's weights are freed (it slept once), and the
    scores equal those of the same entries without ``offload``, bit for bit."""
    from rewardzoo.integrations.flow_factory import _LOADER
    from rewardzoo.testing import tiny_open_clip_dir

    def entries(folder):  # one copy of the same weights per run: Flow-Factory's adapters share one loader, where
        clip = str(tiny_open_clip_dir(tmp_path / folder, seed=2))  # an `offload: none` entry keeps a model awake
        return [
            {"name": "clip", "reward_model": POINTWISE, "rewardzoo": "clip_score", "model_path": clip, "device": "cpu"},
            {
                "name": "rank",
                "reward_model": GROUPWISE,
                "rewardzoo": "group_rank",
                "base": {"reward_model": "clip_score", "model_path": clip},
                "device": "cpu",
            },
        ]

    batch = make_batch(ff)
    steps = [batch.samples[:6], batch.samples[6:]]

    def run(entries):
        models, configs = loaded(ff, entries)
        processor = ff.rewards.RewardProcessor(ff.acc, models, configs, group_on_same_rank=True, verbose=False)
        rewards = [models["clip"].reward, models["rank"].reward]
        between = []
        scores = []
        for samples in steps:
            scores.append({k: v.numpy().copy() for k, v in processor.compute_rewards(samples).items()})
            between.append([(_LOADER.residency.is_asleep(r), _LOADER.residency.weight_bytes(r)) for r in rewards])
        return scores, between

    resident, awake = run(entries("resident"))
    offloaded, asleep = run([{**e, "offload": "drop"} for e in entries("offloaded")])
    assert all(not sleeping and n > 0 for step in awake for sleeping, n in step)
    assert asleep == [[(True, 0), (True, 0)]] * 2  # weights freed between the steps and after
    for ours, theirs in zip(offloaded, resident):
        assert ours.keys() == theirs.keys()
        for name in ours:
            assert ours[name].tobytes() == theirs[name].tobytes()


def test_the_flow_factory_pages_yaml_scores_in_flow_factorys_own_processor(ff):
    """docs/guides/trainers/flow-factory.md's example (a YAML block) loaded and scored by Flow-Factory itself."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs/guides/trainers/flow-factory.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```yaml\n(.*?)^```$", page, flags=re.S | re.M)
    entries = yaml.safe_load(block)["rewards"]
    batch = make_batch(ff)
    models, configs = loaded(ff, entries)
    rewards = ff.rewards.RewardProcessor(ff.acc, models, configs, verbose=False).compute_rewards(batch.samples)
    zoo = ZooProcessor(
        [
            {"name": "jpeg", "reward_model": "jpeg_incompressibility"},
            {"name": "jpeg_rank", "reward_model": "group_rank", "kwargs": {"base": "jpeg_incompressibility"}},
        ]
    )
    own = zoo([Sample(image=Image.fromarray(a), prompt=p, group_id=p) for a, p in zip(batch.arrays, batch.prompts)])
    for name in ("jpeg", "jpeg_rank"):
        np.testing.assert_array_equal(rewards[name].numpy(), own.rewards[name])
    np.testing.assert_allclose(rewards["jpeg_rank"].numpy(), batch.ranks, rtol=0, atol=1e-6)  # independent: PIL
