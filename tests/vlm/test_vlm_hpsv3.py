"""hpsv3: the published checkpoint layout onto a tiny Qwen2-VL, scores against transformers' own model call.

The fixture builds what HPSv3 publishes, at toy size: a Qwen2-VL "base model" directory (config, tokenizer,
chat template, image processor; no weights) and ``HPSv3.safetensors``, the state dict of HPSv3's
``Qwen2VLRewardModelBT`` under the older Qwen2-VL key names (transformers < 4.52: ``visual.*``,
``model.layers.*``, ``lm_head.weight``, ``rm_head.{0,3,5}.*``) with the embeddings resized to the
tokenizer plus ``<|Reward|>``; a second test saves the transformers >= 4.52 layout that HPSv3's trainer
code addresses (``model.visual.*``, ``model.language_model.*``).
The reference re-computes each score on its own: qwen-vl-utils' resize (written here from its formula),
the processor called as HPSv3 calls it, transformers' ``Qwen2VLModel`` with the positions the reward
model's forward uses (``0 .. L-1``), the hidden state at ``<|Reward|>`` and the head applied by hand.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.vlm.hpsv3 import HPSv3, hpsv3_text
from rewardzoo.testing import tiny_vlm_config, tiny_vlm_processor

PIXELS = 112 * 112  # the test's min = max pixels (HPSv3's own: 256 * 28 * 28)
SIZES = [(64, 80), (100, 60), (56, 56), (90, 120), (40, 150)]  # (h, w): mixed sizes, one batch
PROMPTS = ["a cat on a mat", "a photo of a dog", "two cats", "a red car", "a dog on a mat"]


def _legacy_key(key: str) -> str:
    """transformers 5 ``Qwen2VLForConditionalGeneration`` key -> the older (< 4.52) Qwen2-VL name."""
    if key.startswith("model.visual."):
        return key[len("model.") :]
    if key.startswith("model.language_model."):
        return "model." + key[len("model.language_model.") :]
    return key


def write_published(root: Path, ckpt_dir: Path | None = None) -> tuple[Path, Path, Any, Any, Any]:
    """HPSv3's published layout on a tiny Qwen2-VL under ``root``: the base dir, the ``HPSv3.safetensors`` checkpoint
    (older Qwen2-VL names, ``rm_head.*``; in ``ckpt_dir``, default ``root``), the reference model and head, and the
    processor with ``<|Reward|>`` (tests/docs/stand_ins.py builds the docs example's stand-in with it too)."""
    from safetensors.torch import save_file
    from transformers import Qwen2VLForConditionalGeneration

    # the real Qwen2-VL processor bounds (3136 .. 12845056 pixels): HPSv3's resized images pass unchanged
    processor = tiny_vlm_processor("qwen2_vl", min_pixels=56 * 56, max_pixels=28 * 28 * 1280)
    config = tiny_vlm_config("qwen2_vl", vocab_size=len(processor.tokenizer), max_position_embeddings=4096)
    base = root / "Qwen2-VL-tiny"
    processor.save_pretrained(base)
    config.save_pretrained(base)

    processor.tokenizer.add_special_tokens({"additional_special_tokens": ["<|Reward|>"]})
    config.text_config.vocab_size = len(processor.tokenizer)
    torch.manual_seed(3)
    model = Qwen2VLForConditionalGeneration(config).eval()
    head = torch.nn.Sequential(
        torch.nn.Linear(config.text_config.hidden_size, 1024),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.05),
        torch.nn.Linear(1024, 16),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 2),
    ).eval()
    state = {_legacy_key(k): v.clone().contiguous() for k, v in model.state_dict().items()}
    state.update({f"rm_head.{k}": v.clone().contiguous() for k, v in head.state_dict().items()})
    assert "visual.patch_embed.proj.weight" in state and "model.embed_tokens.weight" in state
    folder = ckpt_dir or root
    folder.mkdir(parents=True, exist_ok=True)
    ckpt = folder / "HPSv3.safetensors"
    save_file(state, str(ckpt))
    return base, ckpt, model, head, processor


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(base dir, checkpoint file, reference model, reference head, processor with <|Reward|>)."""
    return write_published(tmp_path_factory.mktemp("hpsv3"))


@pytest.fixture(scope="module")
def reward(published):
    base, ckpt, *_ = published
    return HPSv3(model_path=str(ckpt.parent), base_model=str(base), pixels=PIXELS)


def _images(seed=0, sizes=SIZES):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in sizes]


def _qwen_vl_utils_resize(img, pixels):
    """qwen-vl-utils ``smart_resize`` (factor 28, min = max = ``pixels``) + PIL bicubic, from its source."""
    w, h = img.size
    hb, wb = max(28, round(h / 28) * 28), max(28, round(w / 28) * 28)
    if hb * wb > pixels:
        beta = math.sqrt(h * w / pixels)
        hb, wb = math.floor(h / beta / 28) * 28, math.floor(w / beta / 28) * 28
    elif hb * wb < pixels:
        beta = math.sqrt(pixels / (h * w))
        hb, wb = math.ceil(h * beta / 28) * 28, math.ceil(w * beta / 28) * 28
    return img.resize((wb, hb), Image.BICUBIC)


def _reference(published, image, prompt, *, hpsv3_positions=True):
    """(mu, sigma) of one sample, step by step."""
    _, _, model, head, processor = published
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": hpsv3_text(prompt)}]}]
    text = processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    batch = processor(text=[text], images=[_qwen_vl_utils_resize(image, PIXELS)], return_tensors="pt")
    extra = {"position_ids": torch.arange(batch["input_ids"].shape[1])[None]} if hpsv3_positions else {}
    with torch.no_grad():
        hidden = model.model(**batch, **extra).last_hidden_state[0]
    at = (batch["input_ids"][0] == processor.tokenizer.convert_tokens_to_ids("<|Reward|>")).nonzero().flatten()
    assert len(at) == 1
    x = hidden[at[0]]
    lin = [head[0], head[3], head[5]]
    x = torch.relu(x @ lin[0].weight.T + lin[0].bias)
    x = torch.relu(x @ lin[1].weight.T + lin[1].bias)
    x = x @ lin[2].weight.T + lin[2].bias
    return float(x[0].detach()), float(x[1].detach())


def test_matches_step_by_step_reference_per_sample_mixed_sizes(reward, published):
    images = _images(0)
    out = reward(image=images, prompt=PROMPTS)
    expected = np.array([_reference(published, im, p) for im, p in zip(images, PROMPTS)])
    np.testing.assert_allclose(np.asarray(out.rewards), expected[:, 0], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(out.extras["sigma"]), expected[:, 1], atol=1e-5, rtol=0)
    assert np.ptp(expected[:, 0]) > 1e-3  # the inputs give different scores


def test_batched_equals_one_at_a_time(reward):
    images = _images(1)
    batched = np.asarray(reward(image=images, prompt=PROMPTS).rewards)
    single = np.array([float(reward(image=[im], prompt=[p]).rewards[0]) for im, p in zip(images, PROMPTS)])
    np.testing.assert_allclose(batched, single, atol=1e-5, rtol=0)


def test_positions_are_the_published_forwards_not_mrope(reward, published):
    """HPSv3's forward numbers tokens 0..L-1; transformers 5's default 3-D M-RoPE gives other scores."""
    images = _images(2, SIZES[:2])
    ours = np.asarray(reward(image=images, prompt=PROMPTS[:2]).rewards)
    mrope = np.array([_reference(published, im, p, hpsv3_positions=False)[0] for im, p in zip(images, PROMPTS[:2])])
    assert np.abs(ours - mrope).max() > 1e-4


def test_images_resized_as_hpsv3(reward):
    """Every image goes in at qwen-vl-utils' size for min = max pixels (the image grid the model sees)."""
    from rewardzoo.rewards.models.vlm.reward_models import smart_resize

    for h, w in SIZES + [(1024, 1024), (512, 768)]:
        rh, rw = smart_resize(h, w, min_pixels=256 * 28 * 28, max_pixels=256 * 28 * 28)
        assert _qwen_vl_utils_resize(Image.new("RGB", (w, h)), 256 * 28 * 28).size == (rw, rh)
    assert smart_resize(1024, 1024, min_pixels=200704, max_pixels=200704) == (448, 448)


def test_pth_state_dict_with_model_wrapper_loads_the_same(published, reward, tmp_path):
    """The reference also loads ``.pth`` state dicts (``{"model": ...}`` unwrapped); weights_only loading."""
    from safetensors.torch import load_file

    base, ckpt, *_ = published
    path = tmp_path / "HPSv3_7B.pth"
    torch.save({"model": load_file(str(ckpt))}, path)
    images = _images(3, SIZES[:2])
    a = np.asarray(
        HPSv3(model_path=str(path), base_model=str(base), pixels=PIXELS)(image=images, prompt=PROMPTS[:2]).rewards
    )
    b = np.asarray(reward(image=images, prompt=PROMPTS[:2]).rewards)
    np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


def test_both_key_layouts_load_to_the_same_scores(published, reward, tmp_path):
    """HPSv3's trainer (MizzenAI/HPSv3 d232ff8, hpsv3/model/qwen2vl_trainer.py) addresses
    ``self.model.language_model.embed_tokens``: the transformers >= 4.52 layout, whose state dict keys are
    ``model.visual.*`` / ``model.language_model.*`` (transformers 5's, saved here as they come); the older
    layout (``visual.*`` / ``model.layers.*``, the fixture's file) must load to the same weights."""
    from safetensors.torch import save_file

    base, _, model, head, _ = published
    state = {k: v.clone().contiguous() for k, v in model.state_dict().items()}
    assert "model.language_model.embed_tokens.weight" in state and "model.visual.patch_embed.proj.weight" in state
    state.update({f"rm_head.{k}": v.clone().contiguous() for k, v in head.state_dict().items()})
    save_file(state, str(tmp_path / "HPSv3.safetensors"))
    new = HPSv3(model_path=str(tmp_path / "HPSv3.safetensors"), base_model=str(base), pixels=PIXELS)
    for (name, a), (_, b) in zip(new.vlm.model.state_dict().items(), reward.vlm.model.state_dict().items()):
        assert torch.equal(a, b), name
    images = _images(7, SIZES[:3])
    np.testing.assert_array_equal(
        np.asarray(new(image=images, prompt=PROMPTS[:3]).rewards),
        np.asarray(reward(image=images, prompt=PROMPTS[:3]).rewards),
    )


def test_checkpoint_that_does_not_fit_is_a_config_error(published, tmp_path):
    from safetensors.torch import load_file, save_file

    base, ckpt, *_ = published
    state = load_file(str(ckpt))
    missing = dict(state)
    missing.pop("model.layers.1.mlp.up_proj.weight")
    save_file(missing, str(tmp_path / "missing.safetensors"))
    with pytest.raises(ConfigError, match="missing key"):
        HPSv3(model_path=str(tmp_path / "missing.safetensors"), base_model=str(base))
    headless = {k: v for k, v in state.items() if not k.startswith("rm_head.5")}
    save_file(headless, str(tmp_path / "headless.safetensors"))
    with pytest.raises(ConfigError, match="ranknet"):
        HPSv3(model_path=str(tmp_path / "headless.safetensors"), base_model=str(base))
    # embeddings of the bare tokenizer (no <|Reward|> row): the wrong base model for this checkpoint
    rows = {
        k: (v[:-1].contiguous() if k in ("model.embed_tokens.weight", "lm_head.weight") else v)
        for k, v in state.items()
    }
    save_file(rows, str(tmp_path / "rows.safetensors"))
    with pytest.raises(ConfigError, match="token embeddings"):
        HPSv3(model_path=str(tmp_path / "rows.safetensors"), base_model=str(base))
    with pytest.raises(ConfigError, match="pixels"):
        HPSv3(model_path=str(ckpt), base_model=str(base), pixels=10)


def test_bad_inputs_are_input_errors(reward):
    images = _images(4, SIZES[:2])
    with pytest.raises(InputError, match="prompt") as info:
        reward(image=images, prompt=["a cat", None])
    assert info.value.sample == 1 and info.value.field == "prompt"
    with pytest.raises(InputError, match="empty"):
        reward(image=images, prompt=["a cat", "  "])
    with pytest.raises(InputError, match="<\\|Reward\\|>") as info:
        reward(image=images, prompt=["a cat", "a dog <|Reward|>"])
    assert info.value.sample == 1
    with pytest.raises(InputError, match="image_pad"):
        reward(image=images, prompt=["<|image_pad|> a cat", "a dog"])
    with pytest.raises(InputError, match="aspect ratio") as info:
        reward(image=[images[0], Image.new("RGB", (3000, 10))], prompt=["a cat", "a dog"])
    assert info.value.sample == 1 and info.value.field == "image"
    with pytest.raises(InputError):
        reward(image=images, prompt=["a cat"])
    with pytest.raises(InputError, match="context") as info:  # no silent truncation
        reward(image=images, prompt=["a cat", "a red car " * 3000])
    assert info.value.sample == 1


def test_loads_through_the_registry_card(published):
    import rewardzoo

    base, ckpt, *_ = published
    r = rewardzoo.load_reward(
        {"name": "hpsv3", "model_path": str(ckpt), "kwargs": {"base_model": str(base), "pixels": PIXELS}}
    )
    assert r.info.name == "hpsv3" and r.info.higher_is_better
    images = _images(5, SIZES[:1])
    assert np.isfinite(np.asarray(r(image=images, prompt=PROMPTS[:1]).rewards)).all()


def test_card_states_the_exact_prompt_template():
    from pathlib import Path

    card = (Path(__file__).parents[2] / "rewardzoo" / "model_cards" / "hpsv3.md").read_text(encoding="utf-8")
    assert card.split("```text\n", 1)[1].split("```", 1)[0] == hpsv3_text("{prompt}")


def test_bfloat16_backbone_with_float32_head(published, reward):
    """The reference's dtype split: backbone in bf16, head in float32; scores agree with fp32 to bf16 precision."""
    base, ckpt, *_ = published
    bf16 = HPSv3(model_path=str(ckpt), base_model=str(base), pixels=PIXELS, dtype="bfloat16")
    assert next(bf16.vlm.model.parameters()).dtype == torch.bfloat16 and bf16.head[0].weight.dtype == torch.float32
    images = _images(6, SIZES[:3])
    a = np.asarray(bf16(image=images, prompt=PROMPTS[:3]).rewards)
    b = np.asarray(reward(image=images, prompt=PROMPTS[:3]).rewards)
    assert np.isfinite(a).all() and np.abs(a - b).max() < 1e-2


def test_plan_counts_what_the_reward_holds(published, reward):
    """`rewardzoo plan` = the bytes the loaded reward holds: the backbone at the entry dtype without the lm_head it
    drops, the head in float32 (at HPSv3's real size the file's lm_head alone is 1.09 GB the plan counted)."""
    from rewardzoo.core.memory_plan import plan_config
    from rewardzoo.core.resolve import resolve_config

    base, ckpt, *_ = published
    for path in (ckpt, ckpt.parent):  # the file, or the directory holding it
        entry = {"name": "hpsv3", "model_path": str(path), "kwargs": {"base_model": str(base), "pixels": PIXELS}}
        planned = plan_config(resolve_config({"rewards": [entry]})).models[0]
        held = {id(t): t for m in (reward.vlm.model, reward.head) for t in m.state_dict().values()}
        assert planned.weights == sum(t.numel() * t.element_size() for t in held.values())
