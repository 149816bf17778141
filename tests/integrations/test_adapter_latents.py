"""The trainer adapters pass latents when the config has a ``decode:`` stage: flow_grpo's ``reward_fn`` and
Flow-Factory's reward processor (their own code, from ../shared/clients) and verl-omni's ``compute_score`` (called as
its ``VisualRewardManager`` calls it with ``output_type: latent``; verl-omni's own managers run in the verl test
environment, which has no diffusers). Scores equal those of diffusers' own decode of the same latents given as
images; the latents of calls that arrive together are decoded once for every stream."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from rewardzoo import Sample
from rewardzoo import testing as rzt
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.integrations import flow_grpo_reward_fn

from ..clients import client_module

PIXEL_REWARDS = [
    {"name": "jpeg_compressibility", "weight": 0.7},
    {"name": "big", "reward_model": "jpeg_incompressibility", "weight": 0.01},
]


@pytest.fixture(scope="module")
def vae_dir(tmp_path_factory):
    return str(rzt.tiny_vae_dir(tmp_path_factory.mktemp("adapter_vae")))


@pytest.fixture(scope="module")
def latents():
    return torch.randn(4, 4, 16, 16, generator=torch.Generator().manual_seed(5))


@pytest.fixture(scope="module")
def pixels(vae_dir, latents):
    """diffusers' own decode of the latents, postprocessed as its image processor does ((x + 1) / 2 in [0, 1])."""
    vae = diffusers.AutoencoderKL.from_pretrained(vae_dir).eval()
    with torch.no_grad():
        decoded = vae.decode(latents / rzt.TINY_VAE_SCALING + rzt.TINY_VAE_SHIFT).sample
    return diffusers.image_processor.VaeImageProcessor().postprocess(decoded, output_type="pt")


def test_flow_grpo_reward_fn_on_latents_equals_its_own_multi_score_on_the_decoded_images(vae_dir, latents, pixels):
    rewards = client_module("flow_grpo", "flow_grpo.rewards")
    theirs = rewards.multi_score("cpu", {"jpeg_compressibility": 0.7})
    ours = flow_grpo_reward_fn({"rewards": PIXEL_REWARDS[:1], "decode": {"vae": vae_dir}})
    prompts, meta = ["a", "b", "c", "d"], [{}] * 4
    their_scores, _ = theirs(pixels, prompts, meta, only_strict=True)
    our_scores, _ = ours(None, prompts, meta, only_strict=True, latents=latents)
    np.testing.assert_allclose(our_scores["avg"], their_scores["avg"], rtol=1e-6)
    np.testing.assert_allclose(our_scores["jpeg_compressibility"], their_scores["jpeg_compressibility"], rtol=1e-6)


def test_flow_factory_reward_processor_passes_latents_to_the_decode_stage(vae_dir, latents, pixels):
    ff_rewards = client_module("flow_factory", "flow_factory.rewards")
    hparams = client_module("flow_factory", "flow_factory.hparams")
    samples = client_module("flow_factory", "flow_factory.samples")
    from accelerate import Accelerator

    adapter = "rewardzoo.integrations.flow_factory.RewardZooPointwise"
    entries = [
        {"name": "jpeg", "reward_model": adapter, "rewardzoo": "jpeg_incompressibility", "device": "cpu"},
        {"name": "small", "reward_model": adapter, "rewardzoo": "jpeg_compressibility", "device": "cpu"},
    ]
    entries = [{**e, "dtype": "float32", "decode": {"vae": vae_dir}} for e in entries]
    accelerator = Accelerator(cpu=True)
    loader = ff_rewards.MultiRewardLoader(hparams.MultiRewardArguments.from_dict(entries), accelerator).load()
    models, configs = loader.get_training_reward_models(), loader.get_reward_configs("train")
    processor = ff_rewards.RewardProcessor(accelerator, models, configs, group_on_same_rank=True, verbose=False)
    batch = [samples.T2ISample.from_dict({"prompt": f"p{i}", "latent": x}) for i, x in enumerate(latents)]
    assert "latent" in models["jpeg"].required_fields
    decoder = models["jpeg"].processor.decoder
    assert decoder is models["small"].processor.decoder  # one VAE for the process's adapters
    shapes = []
    original = decoder.vae.decode
    decoder.vae.decode = lambda z, *a, **k: (shapes.append(tuple(z.shape)), original(z, *a, **k))[1]
    try:
        rewards = processor.compute_rewards(batch)
    finally:
        del decoder.vae.decode
    assert shapes == [(4, 4, 16, 16)]  # FF calls its entries one by one: the second reuses the first's pixels
    own = RewardProcessor(
        [
            {"name": "jpeg", "reward_model": "jpeg_incompressibility"},
            {"name": "small", "reward_model": "jpeg_compressibility"},
        ]
    )([Sample(image=x) for x in pixels])
    for name in ("jpeg", "small"):
        np.testing.assert_array_equal(rewards[name].numpy(), own.rewards[name])


def test_verl_omni_latent_responses_gathered_are_decoded_once_for_every_stream(vae_dir, latents, pixels):
    from rewardzoo.integrations import gather
    from rewardzoo.integrations.verl_omni import compute_score

    config = {"rewards": [{**e, "batch_size": 4} for e in PIXEL_REWARDS], "decode": {"vae": vae_dir}}
    kwargs = {"rewards": config, "max_wait_ms": 2000}  # the calls of one step arrive within the wait: one batch

    async def step():
        return await asyncio.gather(
            *[compute_score("t2i", x, None, {"prompt": "p"}, **kwargs) for x in latents]  # as output_type: latent
        )

    scorer = gather.scorer_for(config, max_wait_ms=2000)
    shapes = []
    original = scorer.decoder.vae.decode
    scorer.decoder.vae.decode = lambda z, *a, **k: (shapes.append(tuple(z.shape)), original(z, *a, **k))[1]
    answers = asyncio.run(step())
    assert shapes == [(4, 4, 16, 16)]  # one decode for the four calls and both streams
    local = RewardProcessor(PIXEL_REWARDS)([Sample(image=x) for x in pixels])
    for i, answer in enumerate(answers):
        assert answer["big"] == pytest.approx(float(local.rewards["big"][i]), rel=1e-6)
        assert answer["score"] == pytest.approx(float(local.total[i]), rel=1e-6)
