"""The differentiable path (``rewardzoo.differentiable`` / ``Reward.score_pixels``) of every reward whose
card says ``differentiable: true``, on tiny random models loaded through ``model_path``:

- gradients reach the pixels (finite, non-zero) and never the reward's own parameters (``.grad is None``);
- the gradient is right: in float64, ``grad . v`` equals the central finite difference of the score along
  a random direction ``v`` to a relative ``DIRECTIONAL_RTOL``;
- parity with the no-grad call on the same images (float tensors, and PIL images converted to float): the
  only difference is the 8-bit rounding of the no-grad path, bounded by ``PARITY_ATOL`` (max) and
  ``PARITY_MEAN_ATOL`` (mean) in units of the reward's scale (see ``SCALE`` and ``PARITY_UNIT``);
- the path never leaves the device: ``torch.Tensor.numpy`` and PIL's ``Image.fromarray`` raise under the test;
- it runs under ``torch.autocast("cpu", dtype=torch.bfloat16)``;
- gradient checkpointing recomputes the vision blocks and gives the same gradient;
- a non-differentiable reward is a ConfigError naming it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import rewardzoo
from rewardzoo.errors import ConfigError, InputError

IMAGE_REWARDS = ("clip_score", "pickscore", "hpsv2", "laion_aesthetic", "clip_image_similarity", "image_reward")
VIDEO_REWARDS = ("video_clip_score", "video_aesthetic")
ALL = IMAGE_REWARDS + VIDEO_REWARDS
PROMPTS = ["a red cube on a table", "a photo of a dog", "two cats", "blue sky over the sea"]
#: relative tolerance of the float64 directional-derivative check
DIRECTIONAL_RTOL = 1e-5
#: differentiable vs no-grad score, |diff| / SCALE: max and mean over the test images
PARITY_ATOL = 2.5e-3
PARITY_MEAN_ATOL = 1e-3
#: the factor between a cosine and each score (pickscore: exp(logit_scale) of the tiny model, scale 1);
#: the tolerances are relative to it
SCALE = {
    "clip_score": 2.5,
    "pickscore": 14.28,
    "hpsv2": 1.0,
    "laion_aesthetic": 1.0,
    "clip_image_similarity": 1.0,
    "image_reward": 1.0,
    "video_clip_score": 2.5,
    "video_aesthetic": 1.0,
}
#: the unit of the 8-bit-rounding bound of the parity checks: SCALE, except for image_reward, which has no cosine
#: to scale by and whose tiny random BLIP (2 blocks on 4 patches) moves its score about ten times more per 8-bit
#: level than the tiny CLIP towers move theirs (0.0072 mean, 0.0145 max on the float-tensor images here). At 10
#: the checks still fail a bilinear or non-antialiased resize, ImageNet normalisation or a squash instead of the
#: centre crop in its score_pixels (measured: mean differences 0.013 to 0.20 on the PIL images, 0.03 to 0.18 on
#: the float ones).
PARITY_UNIT = {**SCALE, "image_reward": 10.0}


@pytest.fixture(scope="module")
def image_reward_dir(tmp_path_factory):
    """The tiny ImageReward checkpoint of the verifier tests (published layout, BERT vocabulary)."""
    from tests.verifiers.test_verifiers_image_reward import write_tiny_checkpoint

    path = tmp_path_factory.mktemp("imagereward")
    write_tiny_checkpoint(path)
    return path


@pytest.fixture(scope="module")
def entries(oc_dir, hf_dir, hps_ckpt, aesthetic_head_file, image_reward_dir):
    """name -> config entry (dict) for the tiny models; ``entries[name](dtype)``."""

    def make(name: str, dtype: str = "float32") -> dict:
        base = {"name": name, "device": "cpu", "dtype": dtype}
        if name in ("clip_score", "clip_image_similarity"):
            return {**base, "model_path": str(oc_dir), **({"kwargs": {"prefix": ""}} if name == "clip_score" else {})}
        if name == "pickscore":
            return {**base, "model_path": str(hf_dir), "kwargs": {"scale": 1.0}}
        if name == "hpsv2":
            return {**base, "model_path": str(hps_ckpt[0]), "kwargs": {"clip_model": str(oc_dir)}}
        if name in ("laion_aesthetic", "video_aesthetic"):
            kwargs = {"clip_model": str(oc_dir), **({"num_frames": 3} if name == "video_aesthetic" else {})}
            return {**base, "model_path": str(aesthetic_head_file), "kwargs": kwargs}
        if name == "video_clip_score":
            return {**base, "model_path": str(oc_dir), "kwargs": {"prefix": "", "num_frames": 3}}
        if name == "image_reward":
            return {**base, "model_path": str(image_reward_dir)}
        raise KeyError(name)

    return make


def _pixels(name: str, n: int = 3, *, dtype=torch.float32, seed: int = 0, size=(72, 88)) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    shape = (n, 4, 3, *size) if name in VIDEO_REWARDS else (n, 3, *size)
    return torch.rand(shape, generator=g, dtype=torch.float64).to(dtype)


def _fields(name: str, n: int, *, dtype=torch.float32, seed: int = 1) -> dict:
    if name == "clip_image_similarity":
        g = torch.Generator().manual_seed(seed)
        conds = [
            [torch.rand(3, 64, 80, generator=g, dtype=torch.float64).to(dtype) for _ in range(1 + i % 2)]
            for i in range(n)
        ]
        return {"condition_images": conds}
    if name in ("laion_aesthetic", "video_aesthetic"):
        return {}
    return {"prompts": PROMPTS[:n]}


def _reward_parameters(f) -> list[torch.Tensor]:
    from rewardzoo.core.residency import reward_modules

    return [p for r in f.rewards.values() for m in reward_modules(r) for p in m.parameters()]


@pytest.mark.parametrize("name", ALL)
def test_gradient_reaches_the_pixels_and_not_the_reward(name, entries):
    f = rewardzoo.differentiable({"rewards": [entries(name)]})
    pixels = _pixels(name).requires_grad_(True)
    total, parts = f(pixels, return_parts=True, **_fields(name, 3))
    assert total.shape == (3,) and set(parts) == {name} and f.last is parts
    assert torch.equal(total, parts[name])
    total.sum().backward()
    grad = pixels.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
    params = _reward_parameters(f)
    assert params and all(p.grad is None and not p.requires_grad for p in params)


@pytest.mark.parametrize("name", ALL)
def test_directional_derivative_matches_finite_difference_in_float64(name, entries):
    f = rewardzoo.differentiable({"rewards": [entries(name, "float64")]})
    fields = _fields(name, 2, dtype=torch.float64)
    x = _pixels(name, 2, dtype=torch.float64, size=(40, 52)).requires_grad_(True)
    f(x, **fields).sum().backward()
    v = torch.randn(x.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    eps = 1e-6
    with torch.no_grad():
        fd = (f(x + eps * v, **fields).sum() - f(x - eps * v, **fields).sum()) / (2 * eps)
    analytic = (x.grad * v).sum()
    assert abs(float(fd)) > 1e-8, "a degenerate direction"
    assert abs(float(analytic - fd)) <= DIRECTIONAL_RTOL * max(1.0, abs(float(fd))), (float(analytic), float(fd))


def _no_grad_scores(f, name: str, images, fields: dict) -> np.ndarray:
    reward = f.rewards[name]
    call = {"prompt": fields["prompts"]} if "prompts" in fields else {}
    if "condition_images" in fields:
        call["condition_images"] = fields["condition_images"]
    key = "video" if name in VIDEO_REWARDS else "image"
    return np.asarray(reward(**{key: images}, **call).rewards, dtype=np.float64)


@pytest.mark.parametrize("name", ALL)
def test_parity_with_the_no_grad_call_on_float_tensors(name, entries):
    f = rewardzoo.differentiable({"rewards": [entries(name)]})
    n = 4
    pixels = _pixels(name, n, seed=3, size=(96, 80))
    fields = _fields(name, n)
    ours = f(pixels, **fields).detach().double().numpy()
    ref = _no_grad_scores(f, name, list(pixels.unbind(0)), fields)
    diff = np.abs(ours - ref) / PARITY_UNIT[name]
    assert diff.max() <= PARITY_ATOL and diff.mean() <= PARITY_MEAN_ATOL, (diff.max(), diff.mean())


@pytest.mark.parametrize("name", IMAGE_REWARDS)
def test_parity_with_the_no_grad_call_on_pil_images(name, entries):
    f = rewardzoo.differentiable({"rewards": [entries(name)]})
    rng = np.random.default_rng(4)
    # smooth-ish images, as decoded photos are: a random low-resolution picture upsampled
    pil = [
        Image.fromarray(rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)).resize((100, 120), Image.BICUBIC)
        for _ in range(3)
    ]
    pixels = torch.stack([torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1).float() / 255 for im in pil])
    fields = _fields(name, 3)
    if name == "clip_image_similarity":  # references as PIL for the no-grad call, as float for ours
        ref_fields = {
            "condition_images": [
                [Image.fromarray((c.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)) for c in cs]
                for cs in fields["condition_images"]
            ]
        }
        fields = {
            "condition_images": [
                [torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1).float() / 255 for im in cs]
                for cs in ref_fields["condition_images"]
            ]
        }
    else:
        ref_fields = fields
    ours = f(pixels, **fields).detach().double().numpy()
    ref = _no_grad_scores(f, name, pil, ref_fields)
    diff = np.abs(ours - ref) / PARITY_UNIT[name]
    assert diff.max() <= PARITY_ATOL and diff.mean() <= PARITY_MEAN_ATOL, (diff.max(), diff.mean())


@pytest.mark.parametrize(
    "change",
    [
        {"antialias": False},
        {"interpolation": "bilinear"},
        {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)},
    ],
)
def test_image_reward_parity_bound_still_fails_a_preprocessing_mismatch(change, entries):
    """PARITY_UNIT["image_reward"] is wide enough for 8-bit rounding only: a wrong resize or normalisation in the
    differentiable path (the no-grad path keeps the right one) exceeds the mean bound."""
    import dataclasses

    f = rewardzoo.differentiable({"rewards": [entries("image_reward")]})
    reward = f.rewards["image_reward"]
    pixels, fields = _pixels("image_reward", 4, seed=3, size=(96, 80)), _fields("image_reward", 4)
    ref = _no_grad_scores(f, "image_reward", list(pixels.unbind(0)), fields)
    right = reward.preprocess_config
    reward.preprocess_config = dataclasses.replace(right, **change)
    try:
        ours = f(pixels, **fields).detach().double().numpy()
    finally:
        reward.preprocess_config = right
    assert (np.abs(ours - ref) / PARITY_UNIT["image_reward"]).mean() > 2 * PARITY_MEAN_ATOL


def test_video_samples_frames_as_the_no_grad_path(entries):
    from rewardzoo.shared.video import sample_indices

    f = rewardzoo.differentiable({"rewards": [entries("video_clip_score")]})
    videos = torch.rand(2, 7, 3, 64, 72, generator=torch.Generator().manual_seed(2))
    keep = sample_indices(7, 3)
    ours = f(videos, PROMPTS[:2]).detach().double().numpy()
    ref = _no_grad_scores(f, "video_clip_score", [v[keep] for v in videos], {"prompts": PROMPTS[:2]})
    assert np.abs(ours - ref).max() <= PARITY_ATOL * 2.5


@pytest.mark.parametrize("name", ALL)
def test_the_path_never_leaves_the_device(name, entries):
    f = rewardzoo.differentiable({"rewards": [entries(name)]})  # loaded before the guard (tokenizers, weights)
    pixels = _pixels(name, 2).requires_grad_(True)
    fields = _fields(name, 2)
    f(pixels, **fields)  # warm-up: text embeddings etc. are computed the same way inside the guard
    guard = pytest.MonkeyPatch()
    try:

        def refuse(*_a, **_k):
            raise AssertionError("the differentiable path left the device (Tensor.numpy / PIL)")

        guard.setattr(torch.Tensor, "numpy", refuse)
        guard.setattr(Image, "fromarray", refuse)
        guard.setattr(Image, "new", refuse)
        total = f(pixels, **fields)
        total.sum().backward()
    finally:
        guard.undo()
    assert torch.isfinite(pixels.grad).all()


@pytest.mark.parametrize("name", ALL)
def test_works_under_bfloat16_autocast(name, entries):
    f = rewardzoo.differentiable({"rewards": [entries(name)]})
    pixels = _pixels(name, 2).requires_grad_(True)
    fields = _fields(name, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        total = f(pixels, **fields)
    total.float().sum().backward()
    assert total.shape == (2,) and torch.isfinite(total.float()).all()
    assert torch.isfinite(pixels.grad).all() and pixels.grad.abs().sum() > 0
    ref = f(pixels.detach(), **fields).detach()
    assert (total.detach().float() - ref).abs().max() <= 0.1 * SCALE[name]  # bf16 rounding, loosely


def _vision_blocks(reward) -> list:
    if hasattr(reward, "backbone"):  # a ClipBackbone (open_clip or transformers)
        return reward.backbone.vision_blocks()
    return list(reward.model.visual_encoder.encoder.layers)  # image_reward's BLIP ViT


@pytest.mark.parametrize("name", ["clip_score", "pickscore", "image_reward"])  # open_clip, transformers, BLIP towers
def test_gradient_checkpointing_recomputes_the_blocks_and_keeps_the_gradient(name, entries):
    plain = rewardzoo.differentiable({"rewards": [entries(name)]})
    ckpt = rewardzoo.differentiable({"rewards": [entries(name)]}, gradient_checkpointing=True)
    blocks = _vision_blocks(ckpt.rewards[name])
    # the CLIP rewards share one backbone per model; image_reward loads its own model per call
    hooked = list({id(b): b for b in [*blocks, *_vision_blocks(plain.rewards[name])]}.values())
    assert blocks
    calls = []
    # a block's first submodule: the recomputation calls the block's forward, which calls its submodules
    hooks = [next(b.children()).register_forward_hook(lambda *_: calls.append(1)) for b in hooked]
    try:
        grads = []
        for f in (plain, ckpt):
            pixels = _pixels(name, 2).requires_grad_(True)
            calls.clear()
            f(pixels, PROMPTS[:2]).sum().backward()
            grads.append((pixels.grad, len(calls)))
    finally:
        for h in hooks:
            h.remove()
    (g_plain, n_plain), (g_ckpt, n_ckpt) = grads
    assert n_ckpt == 2 * n_plain  # each block runs again in the backward pass
    assert all("forward" not in vars(b) for b in blocks)  # the wrapper is gone after the call
    torch.testing.assert_close(g_ckpt, g_plain, rtol=1e-5, atol=1e-7)
    # the no-grad call is unaffected by the checkpointing wrapper
    calls.clear()
    images = list(_pixels(name, 2).unbind(0))
    a = ckpt.rewards[name](image=images, prompt=PROMPTS[:2]).rewards
    b = plain.rewards[name](image=images, prompt=PROMPTS[:2]).rewards
    torch.testing.assert_close(torch.as_tensor(a), torch.as_tensor(b))


def test_weighted_total_and_parts(entries):
    cfg = {
        "rewards": [
            {**entries("clip_score"), "weight": 0.5},
            {**entries("laion_aesthetic"), "weight": {"t2i": 2.0}, "applicable_datasets": ["t2i"]},
        ]
    }
    f = rewardzoo.differentiable(cfg)
    pixels = _pixels("clip_score", 3)
    total, parts = f(pixels, PROMPTS[:3], dataset=["t2i", "other", "t2i"], return_parts=True)
    weights = torch.tensor([2.0, 0.0, 2.0])
    torch.testing.assert_close(total, 0.5 * parts["clip_score"] + weights * parts["laion_aesthetic"])


def test_a_reward_name_is_a_config():
    with pytest.raises(ConfigError, match="jpeg_compressibility.*not differentiable"):
        rewardzoo.differentiable("jpeg_compressibility")


@pytest.mark.parametrize(
    "name", ["jpeg_compressibility", "dnsmos", "loudness", "group_rank", "video_subject_consistency"]
)
def test_non_differentiable_rewards_are_refused_by_name(name):
    with pytest.raises(ConfigError) as exc:
        rewardzoo.differentiable({"rewards": [{"name": f"my_{name}", "reward_model": name}]})
    assert name in str(exc.value) and f"my_{name}" in str(exc.value) and "not differentiable" in str(exc.value)


def test_every_card_states_differentiable():
    from rewardzoo.registry import builtin, read_card

    for name, info in builtin().items():
        meta, body = read_card(name)
        assert isinstance(meta.get("differentiable"), bool), name
        assert info.differentiable == meta["differentiable"]
        limitations = body.split("## Limitations", 1)[1].split("\n## ", 1)[0]
        if not info.differentiable:
            assert "differentiable: false" in limitations, f"{name}: say why it is not differentiable"
    assert {n for n, i in builtin().items() if i.differentiable} == set(ALL)


def test_wrong_pixels_are_input_errors(entries):
    f = rewardzoo.differentiable({"rewards": [entries("clip_score")]})
    with pytest.raises(InputError, match="float pixels"):
        f(torch.zeros(2, 3, 8, 8, dtype=torch.uint8), PROMPTS[:2])
    with pytest.raises(InputError, match="videos"):
        rewardzoo.differentiable({"rewards": [entries("video_clip_score")]})(torch.rand(2, 3, 8, 8), PROMPTS[:2])
    with pytest.raises(InputError, match="prompt"):
        f(torch.rand(2, 3, 8, 8))
