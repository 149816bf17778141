"""The ``decode:`` stage (rewardzoo.core.decode) against diffusers' own ``vae.decode`` on tiny random VAEs saved to
disk and loaded through the config's path."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from rewardzoo import Sample
from rewardzoo import testing as rzt
from rewardzoo.core.api import build_processors
from rewardzoo.core.loader import RewardLoader
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.base import Inputs, PointwiseReward

SCALE, SHIFT = rzt.TINY_VAE_SCALING, rzt.TINY_VAE_SHIFT
PIXEL_REWARDS = [
    "jpeg_compressibility",
    {"name": "big", "reward_model": "jpeg_incompressibility", "weight": 0.01},
]


class LatentMean(PointwiseReward):
    """A reward that scores the latent itself (its mean), to check that latent rewards never cause a decode."""

    inputs = Inputs(("latent",))
    score_range = (-math.inf, math.inf)

    def __call__(self, latent):  # type: ignore[override]
        return [float(x.float().mean()) for x in latent]


LATENT_REWARD = {"name": "lat", "reward_model": f"{__name__}:LatentMean"}


@pytest.fixture(scope="module")
def vae_dir(tmp_path_factory):
    return str(rzt.tiny_vae_dir(tmp_path_factory.mktemp("vae")))


@pytest.fixture(scope="module")
def theirs(vae_dir):
    """diffusers' own VAE, loaded by diffusers from the same folder."""
    return diffusers.AutoencoderKL.from_pretrained(vae_dir).eval()


def _reference(vae, latents, scale=SCALE, shift=SHIFT):
    with torch.no_grad():
        x = vae.decode(latents / scale + shift).sample
    return (x * 0.5 + 0.5).clamp(0, 1)


def _latents(n, seed=0, size=16):
    return torch.randn(n, 4, size, size, generator=torch.Generator().manual_seed(seed))


def _counting(decoder):
    shapes = []
    original = decoder.vae.decode

    def decode(z, *args, **kwargs):
        shapes.append(tuple(z.shape))
        return original(z, *args, **kwargs)

    decoder.vae.decode = decode
    return shapes


def test_decoded_pixels_are_diffusers_decode_bit_identical(vae_dir, theirs):
    processor = RewardProcessor(PIXEL_REWARDS, decode={"vae": vae_dir, "batch_size": 3})
    latents = _latents(5)
    ours = processor.decoder.decode(list(latents))
    assert torch.equal(torch.stack(ours), _reference(theirs, latents))
    assert ours[0].dtype == torch.float32 and ours[0].shape == (3, 32, 32)
    assert processor.decoder.resources.modules() == [processor.decoder.vae]
    assert processor.decoder.resources.files() == [vae_dir]


def test_one_decode_per_batch_shared_by_every_pixel_reward_and_scores_equal_the_same_pixels(vae_dir, theirs):
    processor = RewardProcessor([*PIXEL_REWARDS, LATENT_REWARD], decode={"vae": vae_dir, "batch_size": 4})
    shapes = _counting(processor.decoder)
    latents = _latents(6, seed=1)
    result = processor([Sample(latent=x, prompt="p") for x in latents])
    assert shapes == [(4, 4, 16, 16), (2, 4, 16, 16)]  # one pass over the batch, in chunks of batch_size
    pixels = _reference(theirs, latents)
    plain = RewardProcessor([*PIXEL_REWARDS, LATENT_REWARD])(
        [Sample(image=x, latent=z) for x, z in zip(pixels, latents)]
    )
    for name in ("jpeg_compressibility", "big", "lat"):
        np.testing.assert_array_equal(result.rewards[name], plain.rewards[name])
    np.testing.assert_array_equal(result.total, plain.total)
    np.testing.assert_allclose(result.rewards["lat"], latents.mean(dim=(1, 2, 3)).numpy(), rtol=1e-6)
    with processor.incremental() as runner:  # the incremental runner: one decode per batch added
        runner.add([Sample(latent=x) for x in latents[:3]])
        runner.add([Sample(latent=x) for x in latents[3:]])
        np.testing.assert_array_equal(runner.finalize().total, plain.total)
    assert shapes[2:] == [(3, 4, 16, 16), (3, 4, 16, 16)]


def test_no_decode_when_no_pixel_reward_reads_the_latent(vae_dir):
    only_latent = RewardProcessor([LATENT_REWARD], decode={"vae": vae_dir})
    shapes = _counting(only_latent.decoder)
    only_latent([Sample(latent=x) for x in _latents(3)])
    routed = RewardProcessor(
        [{**PIXEL_REWARDS[1], "applicable_datasets": ["pixels"]}, LATENT_REWARD], decode={"vae": vae_dir}
    )
    routed_shapes = _counting(routed.decoder)
    result = routed([Sample(latent=x, dataset="latents") for x in _latents(2)])
    assert shapes == [] and routed_shapes == [] and np.isnan(result.rewards["big"]).all()


def test_the_same_latent_tensors_scored_again_reuse_their_pixels_until_changed(vae_dir):
    loader = RewardLoader()
    first = RewardProcessor(PIXEL_REWARDS[:1], loader, decode={"vae": vae_dir})
    second = RewardProcessor(PIXEL_REWARDS[1:], loader, decode={"vae": vae_dir})
    assert first.decoder is second.decoder  # one VAE per loader and decode stage
    shapes = _counting(first.decoder)
    latents = [x.clone() for x in _latents(2, seed=4)]  # the tensors a trainer keeps (views share one version)
    first([Sample(latent=x) for x in latents])
    second([Sample(latent=x) for x in latents])
    latents[1].mul_(2)  # changed in place: decoded again
    changed = second([Sample(latent=x) for x in latents])
    assert shapes == [(2, 4, 16, 16), (1, 4, 16, 16)]
    fresh = RewardProcessor(PIXEL_REWARDS[1:], decode={"vae": vae_dir})([Sample(latent=x.clone()) for x in latents])
    np.testing.assert_array_equal(changed.rewards["big"], fresh.rewards["big"])


def test_a_samples_own_pixels_win_over_its_latent(vae_dir):
    processor = RewardProcessor(PIXEL_REWARDS, decode={"vae": vae_dir})
    shapes = _counting(processor.decoder)
    image = np.full((32, 32, 3), 200, np.uint8)
    mixed = processor([Sample(image=image, latent=_latents(1)[0]), Sample(latent=_latents(1, seed=2)[0])])
    alone = RewardProcessor(PIXEL_REWARDS)([Sample(image=image)])
    assert shapes == [(1, 4, 16, 16)]  # only the sample without pixels
    assert mixed.rewards["big"][0] == alone.rewards["big"][0]


def test_video_latents_through_wan_are_diffusers_decode_bit_identical(tmp_path):
    vae = diffusers.AutoencoderKLWan.from_pretrained(rzt.tiny_wan_vae_dir(tmp_path)).eval()
    processor = RewardProcessor(["jpeg_compressibility"], decode={"vae": str(tmp_path)})
    latents = torch.randn(2, 4, 3, 8, 8, generator=torch.Generator().manual_seed(3))  # (B, C, T, H, W)
    # the Wan pipeline's own formula (latents / (1 / std) + mean), then its decode
    mean = torch.tensor(vae.config.latents_mean).view(1, 4, 1, 1, 1)
    std = 1.0 / torch.tensor(vae.config.latents_std).view(1, 4, 1, 1, 1)
    with torch.no_grad():
        reference = (vae.decode(latents / std + mean).sample * 0.5 + 0.5).clamp(0, 1).permute(0, 2, 1, 3, 4)
    as_tchw = [x.transpose(0, 1) for x in latents]  # a trainer holding (T, C, H, W): layout auto finds C
    ours = processor.decoder.decode([processor.decoder.check(x) for x in as_tchw])
    assert torch.equal(torch.stack(ours), reference) and ours[0].shape == (5, 3, 16, 16)
    video = RewardProcessor(["video_temporal_flickering"], decode={"vae": str(tmp_path)})
    through = video([Sample(latent=x) for x in as_tchw])  # a pixel video reward of the decoded frames
    given = RewardProcessor(["video_temporal_flickering"])([Sample(video=x) for x in reference])
    np.testing.assert_array_equal(
        through.rewards["video_temporal_flickering"], given.rewards["video_temporal_flickering"]
    )


def test_latents_the_vae_cannot_take_name_the_field_and_sample(vae_dir):
    processor = RewardProcessor(PIXEL_REWARDS, decode={"vae": vae_dir})
    good, wrong = _latents(1)[0], torch.randn(16, 16, 16)
    with pytest.raises(InputError, match=r"sample 1, field 'latent'.*16 channels.*takes 4"):
        processor([Sample(latent=good), Sample(latent=wrong)])
    with pytest.raises(InputError, match=r"sample 0, field 'latent'.*not float16, bfloat16 or float32"):
        processor([Sample(latent=good.double())])
    with pytest.raises(InputError, match=r"field 'image'.*has a latent: add a decode stage"):
        RewardProcessor(PIXEL_REWARDS)([Sample(latent=good)])


def test_the_config_decode_stage_is_shared_by_train_and_eval_and_counted_by_plan(vae_dir):
    from rewardzoo.core.memory_plan import plan_config
    from rewardzoo.core.resolve import load_config
    from rewardzoo.shared.checkpoints import safetensors_bytes

    config = load_config({"rewards": PIXEL_REWARDS, "decode": {"vae": vae_dir, "device": "cpu"}})
    train, evals = build_processors(config, RewardLoader())
    assert train.decoder is evals.decoder and train.decoder is not None
    plan = plan_config(config)
    decode = next(m for m in plan.models if m.entries == ["decode"])
    expected = sum(p.numel() * 4 for p in train.decoder.vae.state_dict().values())
    assert (
        decode.weights == expected == safetensors_bytes(f"{vae_dir}/diffusion_pytorch_model.safetensors", "float32")[0]
    )
    assert decode.device == "cpu" and plan.devices["cpu"].resident >= expected


def test_the_vae_is_read_from_safetensors_only(tmp_path, vae_dir, theirs):
    theirs.save_pretrained(tmp_path, safe_serialization=False)  # a pickled checkpoint alone
    with pytest.raises(ConfigError, match=r"field 'decode.vae'.*safetensors only"):
        RewardProcessor(PIXEL_REWARDS, decode={"vae": str(tmp_path)})
    with pytest.raises(ConfigError, match=r"field 'decode.batch_size'"):
        RewardProcessor(PIXEL_REWARDS, decode={"vae": vae_dir, "batch_size": 0})
