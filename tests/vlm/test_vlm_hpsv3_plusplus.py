"""hpsv3 ``version: v3++``: HPSv3++'s published checkpoint layout onto a tiny Qwen3-VL, against its forward re-done.

The fixture builds what HPSv3++ publishes, at toy size: a Qwen3-VL "base model" directory (config, tokenizer, chat
template, image processor; no weights) and ``hpsv3++.pth``, a ``{"model": state}`` file of
``Qwen3VLRewardModelFiLMHybrid``'s state dict (PlantPotatoOnMoon/HPSv3-PlusPlus 7bdbebc
``hpsv3/model/qwen3vl_rm.py``): ``model.visual.*``, ``model.language_model.*``, ``lm_head.weight``, the ranknet
``rm_head.{0,3,5}.*``, ``cond_encoder.{0,2}.*``, ``film_gen.{0,2}.*`` and ``cap_encoder.{proj,pool_attn,out_proj}.*``
(random, not the reference's zero init of ``film_gen``'s last layer, so the conditioning changes the score).
The reference re-computes each score on its own, step by step as ``qwen3vl_rm.py`` 393-556 and ``inference.py``
119-192 do: qwen-vl-utils' resize (factor 28, its formula), the Qwen3-VL processor on its own bounds, transformers'
``Qwen3VLModel`` with its M-RoPE positions, the hidden state at ``<|Reward|>``, ``CapabilityEncoder`` over the one
image (``proj``, softmax attention pool over one member, ``sigmoid(out_proj)``), ``cond_encoder([cap, iter])``,
``film_gen`` -> ``(gamma, beta)``, ``h * (1 + gamma) + beta`` and the head, all by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

import rewardzoo
from rewardzoo.errors import ConfigError
from rewardzoo.rewards.vlm.hpsv3 import HPSv3, hpsv3_text
from rewardzoo.testing import tiny_vlm_config, tiny_vlm_processor

PIXELS = 112 * 112
SIZES = [(64, 80), (100, 60), (56, 56)]
PROMPTS = ["a cat on a mat", "a photo of a dog", "two cats"]
COND_DIM = 8


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(base dir, checkpoint, reference model, {module: parameters})."""
    from transformers import Qwen3VLForConditionalGeneration

    root = tmp_path_factory.mktemp("hpsv3pp")
    processor = tiny_vlm_processor("qwen3_vl", min_pixels=32 * 32, max_pixels=32 * 32 * 64)
    config = tiny_vlm_config("qwen3_vl", vocab_size=len(processor.tokenizer))
    base = root / "Qwen3-VL-tiny"
    processor.save_pretrained(base)
    config.save_pretrained(base)
    processor.tokenizer.add_special_tokens({"additional_special_tokens": ["<|Reward|>"]})
    config.text_config.vocab_size = len(processor.tokenizer)
    torch.manual_seed(7)
    model = Qwen3VLForConditionalGeneration(config).eval()
    d = config.text_config.hidden_size
    g = torch.Generator().manual_seed(11)
    shapes = {
        "rm_head.0": (1024, d),
        "rm_head.3": (16, 1024),
        "rm_head.5": (2, 16),
        "cond_encoder.0": (COND_DIM, 2),
        "cond_encoder.2": (COND_DIM, COND_DIM),
        "film_gen.0": (d, COND_DIM),
        "film_gen.2": (2 * d, d),
        "cap_encoder.proj": (COND_DIM, d),
        "cap_encoder.pool_attn": (1, COND_DIM),
        "cap_encoder.out_proj": (1, COND_DIM),
    }
    parts = {
        name: (torch.randn(shape, generator=g) * (0.5 / math.sqrt(shape[1])), torch.randn(shape[0], generator=g) * 0.1)
        for name, shape in shapes.items()
    }
    state = {k: v.clone().contiguous() for k, v in model.state_dict().items()}
    for name, (w, b) in parts.items():
        state[f"{name}.weight"], state[f"{name}.bias"] = w, b
    assert "model.visual.patch_embed.proj.weight" in state and "model.language_model.embed_tokens.weight" in state
    ckpt = root / "hpsv3++.pth"
    torch.save({"model": state}, ckpt)
    return base, ckpt, model, parts, processor


def _resize(img, pixels):
    """qwen-vl-utils ``smart_resize`` (factor 28, min = max = ``pixels``) + PIL bicubic (HPSv3++'s
    ``dataset/utils.py`` ``fetch_image``), from its formula."""
    w, h = img.size
    hb, wb = max(28, round(h / 28) * 28), max(28, round(w / 28) * 28)
    if hb * wb > pixels:
        beta = math.sqrt(h * w / pixels)
        hb, wb = math.floor(h / beta / 28) * 28, math.floor(w / beta / 28) * 28
    elif hb * wb < pixels:
        beta = math.sqrt(pixels / (h * w))
        hb, wb = math.ceil(h * beta / 28) * 28, math.ceil(w * beta / 28) * 28
    return img.resize((wb, hb), Image.BICUBIC)


def _reference(published, image, prompt, iteration=0.0):
    """(mu, sigma, capability) of one image scored alone, as the reference's inferencer scores a batch of one."""
    _, _, model, parts, processor = published

    def linear(name, x):
        w, b = parts[name]
        return x @ w.T + b

    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": hpsv3_text(prompt, "v3++")}]}]
    text = processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    batch = processor(text=[text], images=[_resize(image, PIXELS)], return_tensors="pt")
    with torch.no_grad():
        hidden = model.model(**batch).last_hidden_state[0]
    at = (batch["input_ids"][0] == processor.tokenizer.convert_tokens_to_ids("<|Reward|>")).nonzero().flatten()
    assert len(at) == 1
    h = hidden[at[0]][None]  # [1, d]
    x = linear("cap_encoder.proj", h)  # [k = 1, cond_dim]
    attn = torch.softmax(linear("cap_encoder.pool_attn", x), dim=0)
    cap = torch.sigmoid(linear("cap_encoder.out_proj", (x * attn).sum(dim=0)))[0]
    cond = torch.stack([cap, torch.tensor(float(iteration))])[None]
    emb = linear("cond_encoder.2", torch.nn.functional.gelu(linear("cond_encoder.0", cond)))
    gamma, beta = linear("film_gen.2", torch.relu(linear("film_gen.0", emb))).chunk(2, dim=-1)
    z = h * (1 + gamma) + beta
    z = torch.relu(linear("rm_head.0", z))
    z = torch.relu(linear("rm_head.3", z))
    out = linear("rm_head.5", z)[0]
    return float(out[0]), float(out[1]), float(cap)


@pytest.fixture(scope="module")
def reward(published):
    base, ckpt, *_ = published
    return HPSv3(model_path=str(ckpt), base_model=str(base), pixels=PIXELS, version="v3++")


def _images(seed=0):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in SIZES]


def test_matches_the_references_forward_per_image(reward, published):
    images = _images(0)
    out = reward(image=images, prompt=PROMPTS)
    want = np.array([_reference(published, im, p) for im, p in zip(images, PROMPTS)])
    np.testing.assert_allclose(np.asarray(out.rewards), want[:, 0], atol=1e-4, rtol=0)
    np.testing.assert_allclose(np.asarray(out.extras["sigma"]), want[:, 1], atol=1e-4, rtol=0)
    np.testing.assert_allclose(np.asarray(out.extras["capability"]), want[:, 2], atol=1e-5, rtol=0)
    assert np.ptp(want[:, 0]) > 1e-3
    single = [float(reward(image=[im], prompt=[p]).rewards[0]) for im, p in zip(images, PROMPTS)]
    np.testing.assert_allclose(np.asarray(out.rewards), single, atol=1e-4, rtol=0)  # no score depends on another


def test_the_rl_iteration_conditions_the_score(published):
    base, ckpt, *_ = published
    late = HPSv3(model_path=str(ckpt), base_model=str(base), pixels=PIXELS, version="v3++", rl_iteration=0.8)
    images = _images(1)
    got = np.asarray(late(image=images, prompt=PROMPTS).rewards)
    want = [_reference(published, im, p, 0.8)[0] for im, p in zip(images, PROMPTS)]
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
    assert abs(got[0] - _reference(published, images[0], PROMPTS[0], 0.0)[0]) > 1e-4


def test_the_instruction_is_hpsv3pp_s():
    """HPSv3++'s data_collator_qwen.py INSTRUCTION: HPSv3's without its Text Alignment block."""
    text = hpsv3_text("a fox", "v3++")
    assert "**Text Alignment:**" in hpsv3_text("a fox") and "**Text Alignment:**" not in text
    assert text.endswith(
        "as political, violent, or adult material. If such content is present, the image quality "
        "and satisfaction score should be the lowest possible. \nTextual prompt - a fox\n\n\n"
        "\nPlease provide the overall ratings of this image: <|Reward|>\n\nEND\n"
    )


def test_a_checkpoint_of_the_other_version_is_a_config_error(published, tmp_path):
    base, ckpt, *_ = published
    with pytest.raises(ConfigError, match="HPSv3 is a Qwen2-VL reward model") as err:
        HPSv3(model_path=str(ckpt), base_model=str(base), pixels=PIXELS)  # version v3 on HPSv3++'s base
    assert err.value.field == "kwargs.base_model"
    state = torch.load(ckpt, weights_only=True)["model"]
    plain = tmp_path / "plain.pth"
    torch.save({k: v for k, v in state.items() if not k.startswith(("cap_", "cond_", "film_"))}, plain)
    with pytest.raises(ConfigError, match="not an HPSv3\\+\\+ checkpoint.*version: v3") as err:
        HPSv3(model_path=str(plain), base_model=str(base), pixels=PIXELS, version="v3++")
    assert err.value.field == "kwargs.version"
    with pytest.raises(ConfigError, match="rl_iteration"):
        rewardzoo.load_reward({"name": "hpsv3", "kwargs": {"version": "v3++", "rl_iteration": 1.5}})


def test_plan_counts_what_the_reward_holds(published):
    """The reward holds the backbone and the capability encoder at the entry dtype, the head, cond_encoder and
    film_gen in float32, no lm_head; `rewardzoo plan` counts them from the ``.pth``'s tensor table (read without
    loading: shared/pickle_table), exactly (it counted the file's size, an upper bound, before)."""
    from rewardzoo.core.memory_plan import plan_config
    from rewardzoo.core.resolve import resolve_config

    base, ckpt, *_ = published
    kwargs = {"base_model": str(base), "pixels": PIXELS, "version": "v3++"}
    entry = {"name": "hpsv3", "model_path": str(ckpt), "dtype": "bfloat16", "kwargs": kwargs}
    planned = plan_config(resolve_config({"rewards": [entry]})).models[0]
    loaded = HPSv3(model_path=str(ckpt), dtype="bfloat16", **kwargs)
    held = {id(t): t for m in (loaded.vlm.model, loaded.head, loaded.conditioning) for t in m.state_dict().values()}
    assert loaded.conditioning.cap_encoder["proj"].weight.dtype == torch.bfloat16
    assert loaded.conditioning.film_gen[2].weight.dtype == torch.float32
    assert planned.how.startswith("torch.save tensor table")
    assert planned.weights == sum(t.numel() * t.element_size() for t in held.values()) < ckpt.stat().st_size
