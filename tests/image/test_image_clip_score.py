"""clip_score against open_clip's own encoders and torchmetrics' CLIPScore on the same HF weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from rewardzoo import RewardProcessor, Sample
from rewardzoo.core.loader import RewardLoader
from rewardzoo.errors import InputError
from rewardzoo.rewards.image.clip_score import ClipScore

from .media import PROMPTS, make_images

SIZES = [(96, 80), (80, 96), (64, 64), (120, 70), (70, 70), (200, 150)]


@pytest.fixture(scope="module")
def reward(oc_dir):
    return ClipScore(model_path=str(oc_dir))


def _open_clip_reference(oc_reference, images, captions):
    """CLIPScore computed entirely with open_clip: its PIL transform, tokenizer and encoders."""
    model, preprocess, tokenizer = oc_reference
    with torch.no_grad():
        img = F.normalize(model.encode_image(torch.stack([preprocess(im) for im in images])), dim=-1)
        txt = F.normalize(model.encode_text(tokenizer(captions)), dim=-1)
    cos = (img * txt).sum(-1)
    return 2.5 * cos.clamp(min=0), cos


@pytest.mark.parametrize("prefix", ["A photo depicts ", ""])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_open_clip_api(oc_dir, oc_reference, prefix, seed):
    images = make_images(len(PROMPTS), size=SIZES, seed=seed)
    reward = ClipScore(model_path=str(oc_dir), prefix=prefix)
    out = reward(image=images, prompt=PROMPTS)
    ref_score, ref_cos = _open_clip_reference(oc_reference, images, [prefix + p for p in PROMPTS])
    # tensor preprocessing vs open_clip's PIL pipeline: a few 8-bit levels apart at most
    np.testing.assert_allclose(out.extras["cosine"].numpy(), ref_cos.numpy(), atol=1e-3)
    np.testing.assert_allclose(np.asarray(out.rewards), ref_score.numpy(), atol=2.5e-3)


def test_formula_exact_on_identical_pixels(reward, oc_reference):
    """Given the same pixels, the score is exactly 2.5 * max(cos, 0) of open_clip's encoders."""
    model, _, tokenizer = oc_reference
    images = make_images(4, seed=3)
    pixels = reward.backbone.preprocess(images)
    with torch.no_grad():
        img = F.normalize(model.encode_image(pixels), dim=-1)
        txt = F.normalize(model.encode_text(tokenizer(["A photo depicts " + p for p in PROMPTS[:4]])), dim=-1)
    cos = (img * txt).sum(-1)
    out = reward(image=images, prompt=PROMPTS[:4])
    torch.testing.assert_close(torch.as_tensor(out.rewards), 2.5 * cos.clamp(min=0), atol=1e-5, rtol=0)


class _TensorFeatures(torch.nn.Module):
    """torchmetrics 1.9 expects tensors from get_*_features; transformers 5 returns model outputs."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.config = model.config

    def get_image_features(self, *args, **kwargs):
        out = self.model.get_image_features(*args, **kwargs)
        return out if isinstance(out, torch.Tensor) else out.pooler_output

    def get_text_features(self, *args, **kwargs):
        out = self.model.get_text_features(*args, **kwargs)
        return out if isinstance(out, torch.Tensor) else out.pooler_output


def test_matches_torchmetrics_per_sample(hf_dir, hf_reference):
    pytest.importorskip("torchmetrics")
    from torchmetrics.functional.multimodal import clip_score as tm_clip_score

    model, processor = hf_reference
    wrapped = _TensorFeatures(model)
    images = make_images(len(PROMPTS), size=SIZES, seed=7)
    tensors = [torch.from_numpy(np.array(im)).permute(2, 0, 1) for im in images]  # uint8, as torchmetrics takes
    ours = ClipScore(model_path=str(hf_dir), prefix="")
    assert ours.backbone.backend == "transformers"
    out = ours(image=images, prompt=PROMPTS)
    assert (out.extras["cosine"] > 0).any() and (out.extras["cosine"] < 0).any()  # both sides of the clamp
    for i, (t, p) in enumerate(zip(tensors, PROMPTS)):
        # one sample per call: torchmetrics' max(mean(100 * cos), 0) is then the per-sample clamp
        with torch.no_grad():
            theirs = float(tm_clip_score(t, p, model_name_or_path=lambda: (wrapped, processor)))
        assert float(out.rewards[i]) == pytest.approx(2.5 * theirs / 100, abs=2.5e-3), i
    # also unclamped: the cosine itself, through torchmetrics' batched update
    from torchmetrics.functional.multimodal.clip_score import _clip_score_update

    with torch.no_grad():
        per_sample, _ = _clip_score_update(tensors, PROMPTS, wrapped, processor)
    np.testing.assert_allclose(out.extras["cosine"].numpy(), per_sample.numpy() / 100, atol=1e-3)


def test_backend_kwarg_forces_transformers(hf_dir):
    r = ClipScore(model_path=str(hf_dir), backend="transformers")
    assert r.backbone.backend == "transformers"


@pytest.mark.parametrize("batch_size", [1, 2, 5])
def test_batch_size_invariance(oc_dir, batch_size):
    images = make_images(len(PROMPTS), size=SIZES, seed=11)
    samples = [Sample(image=im, prompt=p) for im, p in zip(images, PROMPTS)]
    spec = {"name": "clip_score", "model_path": str(oc_dir), "device": "cpu"}
    full = RewardProcessor([{**spec, "batch_size": 64}])(samples).rewards["clip_score"]
    chunked = RewardProcessor([{**spec, "batch_size": batch_size}])(samples).rewards["clip_score"]
    np.testing.assert_allclose(chunked, full, atol=1e-6)


def test_pil_tensor_array_and_path_inputs_agree(reward, tmp_path):
    images = make_images(3, size=(90, 70), seed=12)
    prompts = PROMPTS[:3]
    base = np.asarray(reward(image=images, prompt=prompts).rewards)
    as_float = [torch.from_numpy(np.array(im)).permute(2, 0, 1).float() / 255 for im in images]
    paths = []
    for i, im in enumerate(images):
        im.save(tmp_path / f"{i}.png")
        paths.append(str(tmp_path / f"{i}.png"))
    np.testing.assert_array_equal(np.asarray(reward(image=as_float, prompt=prompts).rewards), base)
    np.testing.assert_array_equal(np.asarray(reward(image=torch.stack(as_float), prompt=prompts).rewards), base)
    np.testing.assert_array_equal(
        np.asarray(reward(image=[np.array(im) for im in images], prompt=prompts).rewards), base
    )
    # through the processor (tensor conversion), from files
    proc_scores = RewardProcessor([{"name": "clip_score", "model_path": reward.model_path, "device": "cpu"}])(
        [Sample(image=p, prompt=t) for p, t in zip(paths, prompts)]
    ).rewards["clip_score"]
    np.testing.assert_allclose(proc_scores, base, atol=1e-6)


@pytest.mark.parametrize("mode", ["L", "RGBA", "LA"])
def test_grayscale_and_rgba_inputs(reward, oc_reference, mode):
    img = make_images(1, size=(80, 64), seed=13)[0].convert(mode)
    out = reward(image=[img], prompt=["a cat"])
    ref, _ = _open_clip_reference(oc_reference, [img.convert("RGB")], ["A photo depicts a cat"])
    assert float(out.rewards[0]) == pytest.approx(float(ref[0]), abs=2.5e-3)


def test_empty_prompt_scores_like_open_clip(oc_dir, oc_reference):
    reward = ClipScore(model_path=str(oc_dir), prefix="")
    images = make_images(2, seed=14)
    out = reward(image=images, prompt=["", ""])
    _, ref_cos = _open_clip_reference(oc_reference, images, ["", ""])
    np.testing.assert_allclose(out.extras["cosine"].numpy(), ref_cos.numpy(), atol=1e-3)


@pytest.mark.parametrize("n_images, n_prompts", [(3, 2), (2, 3)])
def test_mismatched_counts_are_a_clear_error(reward, n_images, n_prompts):
    with pytest.raises(InputError, match="mismatched input counts") as info:
        reward(image=make_images(n_images), prompt=PROMPTS[:n_prompts])
    assert info.value.field == ("prompt" if n_prompts < n_images else "image")
    assert info.value.sample == min(n_images, n_prompts)


def test_bad_inputs_name_field_and_sample(reward):
    images = make_images(3)
    with pytest.raises(InputError, match="expected a string") as info:
        reward(image=images, prompt=["a", 3, "c"])
    assert (info.value.field, info.value.sample) == ("prompt", 1)
    bad = [torch.rand(3, 8, 8), torch.rand(3, 8, 8) * 3, torch.rand(3, 8, 8)]
    with pytest.raises(InputError, match=r"\[0, 1\]") as info:
        reward(image=bad, prompt=["a", "b", "c"])
    assert (info.value.field, info.value.sample) == ("image", 1)


def test_processor_reports_global_sample_and_reward_name(oc_dir):
    proc = RewardProcessor([{"name": "clip_score", "model_path": str(oc_dir), "device": "cpu", "batch_size": 2}])
    samples = [Sample(image=im, prompt="a") for im in make_images(3)] + [
        Sample(image=torch.rand(3, 8, 8) - 2, prompt="a")
    ]
    with pytest.raises(InputError) as info:
        proc(samples)
    assert (info.value.reward, info.value.field, info.value.sample) == ("clip_score", "image", 3)


def test_clip_score_and_aesthetic_share_one_backbone(oc_dir, aesthetic_head_file):
    loader = RewardLoader()
    a = loader.load({"name": "clip_score", "model_path": str(oc_dir), "device": "cpu"})
    b = loader.load(
        {
            "name": "laion_aesthetic",
            "model_path": str(aesthetic_head_file),
            "device": "cpu",
            "kwargs": {"clip_model": str(oc_dir)},
        }
    )
    assert a.backbone is b.backbone
    assert loader.constructions == 2
