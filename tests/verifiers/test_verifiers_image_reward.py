"""ImageReward against the `image-reward` package's own model code, built with the same tiny random weights.

The package (1.5) does not import as published with transformers 5: ``ImageReward/__init__`` imports OpenAI's
``clip`` (not on PyPI) and ``ReFL`` (diffusers), and ``models/BLIP/med.py`` imports three helpers that
transformers 5 moved or removed and calls methods it removed. The reference here is the package's own
``vit.py``, ``med.py`` and ``ImageReward.py`` (its ``score`` method, preprocessing and MLP), imported without the
package ``__init__`` and with those helpers supplied (``apply_chunking_to_forward``/``prune_linear_layer`` from
``transformers.pytorch_utils``; ``invert_attention_mask`` and ``get_head_mask`` as transformers 4 defined them;
``init_weights`` skipped, the weights are loaded right after). Needs ``pip install --no-deps image-reward
fairscale`` (the package pins timm==0.6.13).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from PIL import Image  # noqa: E402

from rewardzoo.errors import ConfigError, InputError  # noqa: E402
from rewardzoo.rewards.image.image_reward import RAW_MEAN, RAW_STD, ImageReward, convert_to_safetensors  # noqa: E402

WORDS = ("a photo of the red blue green dog cat on table with two three under sky over sea big small "
         "cube ball tree house car and in an painting style very detailed").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
PROMPTS = ["a photo of a red dog", "two cats on a table",
           " ".join(["a very detailed painting of a big red house"] * 5),  # > 35 tokens: truncated
           "blue sky over the sea"]
SIZE, WIDTH, TEXT = 32, 128, 64


class Unpicklable:
    pass


def _reference_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("ImageReward", "fairscale", "timm"))


needs_reference = pytest.mark.skipif(not _reference_available(), reason="pip install --no-deps image-reward fairscale")


@pytest.fixture(scope="module")
def reference_modules():
    """The package's vit / med / ImageReward modules (see the module docstring for what is supplied)."""
    import transformers.modeling_utils as mu
    import transformers.pytorch_utils as pu

    root = Path(importlib.util.find_spec("ImageReward").submodule_search_locations[0])
    with pytest.MonkeyPatch.context() as mp:
        for name in ("apply_chunking_to_forward", "prune_linear_layer"):
            if not hasattr(mu, name):
                mp.setattr(mu, name, getattr(pu, name), raising=False)
        if not hasattr(mu, "find_pruneable_heads_and_indices"):  # only used by prune_heads
            mp.setattr(mu, "find_pruneable_heads_and_indices", lambda *a, **k: None, raising=False)
        for name, sub in (("ImageReward", ""), ("ImageReward.models", "models"),
                          ("ImageReward.models.BLIP", "models/BLIP")):
            pkg = types.ModuleType(name)
            pkg.__path__ = [str(root / sub)]
            mp.setitem(sys.modules, name, pkg)
        from ImageReward import ImageReward as ir
        from ImageReward.models.BLIP import med, vit
    if not hasattr(med.BertModel, "invert_attention_mask"):
        def invert_attention_mask(self, mask):  # transformers 4.x ModuleUtilsMixin
            ext = mask[:, None, None, :] if mask.dim() == 2 else mask[:, None, :, :]
            ext = ext.to(dtype=self.dtype)
            return (1.0 - ext) * torch.finfo(self.dtype).min
        med.BertModel.invert_attention_mask = invert_attention_mask
    if not hasattr(med.BertModel, "get_head_mask"):
        med.BertModel.get_head_mask = lambda self, head_mask, n, is_attention_chunked=False: [None] * n
    med.BertModel.init_weights = lambda self: None  # transformers 5's init needs post_init(); weights are loaded
    return vit, med, ir


def _tokenizer(path: Path):
    from transformers import BertTokenizer

    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    tok = BertTokenizer(str(path / "vocab.txt"))
    tok.save_pretrained(str(path))
    tok.add_special_tokens({"bos_token": "[DEC]"})
    tok.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
    return tok


MED = dict(vocab_size=64, hidden_size=TEXT, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
           max_position_embeddings=64, hidden_act="gelu", layer_norm_eps=1e-12, pad_token_id=0,
           hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, add_cross_attention=True, encoder_width=WIDTH)


#: ImageRewardModel names -> the published ImageReward.pt names (timm's ViT, BLIP's med.py, the MLP's Sequential)
PUBLISHED = [
    (r"^visual_encoder\.embeddings\.class_embedding$", "blip.visual_encoder.cls_token"),
    (r"^visual_encoder\.embeddings\.position_embedding$", "blip.visual_encoder.pos_embed"),
    (r"^visual_encoder\.embeddings\.patch_embedding\.", "blip.visual_encoder.patch_embed.proj."),
    (r"^visual_encoder\.encoder\.layers\.(\d+)\.layer_norm1\.", r"blip.visual_encoder.blocks.\1.norm1."),
    (r"^visual_encoder\.encoder\.layers\.(\d+)\.layer_norm2\.", r"blip.visual_encoder.blocks.\1.norm2."),
    (r"^visual_encoder\.encoder\.layers\.(\d+)\.self_attn\.qkv\.", r"blip.visual_encoder.blocks.\1.attn.qkv."),
    (r"^visual_encoder\.encoder\.layers\.(\d+)\.self_attn\.projection\.", r"blip.visual_encoder.blocks.\1.attn.proj."),
    (r"^visual_encoder\.encoder\.layers\.(\d+)\.mlp\.", r"blip.visual_encoder.blocks.\1.mlp."),
    (r"^visual_encoder\.post_layernorm\.", "blip.visual_encoder.norm."),
    (r"^text_encoder\.", "blip.text_encoder."),
    (r"^mlp\.", "mlp.layers."),
]


def published_state(seed: int = 0) -> dict:
    """A tiny random model in the ImageReward.pt layout (plus BLIP's unused projections and position ids)."""
    import re

    from transformers import BlipTextConfig, BlipVisionConfig

    from rewardzoo.rewards.image.image_reward import ImageRewardModel

    torch.manual_seed(seed)
    vision = BlipVisionConfig(hidden_size=WIDTH, intermediate_size=4 * WIDTH, num_hidden_layers=2, num_attention_heads=2,
                              image_size=SIZE, patch_size=16, layer_norm_eps=1e-6)
    text = BlipTextConfig(**{k: v for k, v in MED.items() if k not in ("add_cross_attention", "encoder_width")},
                          encoder_hidden_size=WIDTH)
    model = ImageRewardModel(vision, text)
    state = {}
    for key, value in model.state_dict().items():
        # random values of a trained model's scale (the default init leaves biases 0, LayerNorms 1, the MLP ~0)
        value = torch.randn_like(value) * (0.08 if key.startswith("mlp.") else 0.2) + (1.0 if "norm" in key.lower()
                                                                                        and key.endswith("weight") else 0)
        for pattern, repl in PUBLISHED:
            if re.search(pattern, key):
                state[re.sub(pattern, repl, key)] = value
                break
        else:
            raise AssertionError(f"no published name for {key}")
    state["blip.text_encoder.embeddings.position_ids"] = torch.arange(MED["max_position_embeddings"])[None]
    state.update({"blip.vision_proj.weight": torch.randn(8, WIDTH), "blip.vision_proj.bias": torch.zeros(8),
                  "blip.text_proj.weight": torch.randn(8, TEXT), "blip.text_proj.bias": torch.zeros(8)})
    return state


def write_tiny_checkpoint(path: Path, seed: int = 0) -> dict:
    """A tiny ImageReward checkpoint directory as published (ImageReward.pt, med_config.json) plus the
    word-level BERT vocabulary; returns the state dict it saved. Also used by tests/image/test_image_differentiable.py."""
    _tokenizer(path)
    state = published_state(seed)
    torch.save(state, path / "ImageReward.pt")
    (path / "med_config.json").write_text(json.dumps(MED))
    return state


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("imagereward")
    return path, write_tiny_checkpoint(path)


@pytest.fixture(scope="module")
def reference(checkpoint, reference_modules):
    """The package's ImageReward (its score method, preprocessing, ViT, med.py BERT, MLP) with the same weights,
    loaded strictly: the published names are exactly the package's own."""
    vit, med, ir = reference_modules
    path, state = checkpoint
    blip = torch.nn.Module()
    blip.visual_encoder = vit.VisionTransformer(img_size=SIZE, patch_size=16, embed_dim=WIDTH, depth=2, num_heads=2)
    blip.text_encoder = med.BertModel(med.BertConfig(**MED), add_pooling_layer=False)
    blip.vision_proj, blip.text_proj = torch.nn.Linear(WIDTH, 8), torch.nn.Linear(TEXT, 8)
    blip.tokenizer = _tokenizer(path)
    model = ir.ImageReward.__new__(ir.ImageReward)
    torch.nn.Module.__init__(model)
    model.device, model.blip, model.mlp = "cpu", blip, ir.MLP(TEXT)
    model.preprocess = ir._transform(SIZE)
    model.mean, model.std = 0.16717362830052426, 1.0333394966054072
    model.load_state_dict(state, strict=True)
    return model.eval()


@pytest.fixture(scope="module")
def reward(checkpoint):
    return ImageReward(str(checkpoint[0]))


def _images(size, n=4, seed=0):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)) for _ in range(n)]


@needs_reference
def test_equals_reference_package_per_sample(reward, reference):
    images = _images((SIZE, SIZE))
    out = reward(image=images, prompt=PROMPTS)
    with torch.no_grad():
        expected = [reference.score(p, img) for p, img in zip(PROMPTS, images)]
    np.testing.assert_allclose(np.asarray(out.rewards), expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(out.extras["raw"]), np.asarray(expected) * RAW_STD + RAW_MEAN, atol=1e-5)
    assert np.std(expected) > 1e-3  # the prompts and images really change the score


@needs_reference
def test_resizing_matches_the_reference_transform_within_rounding(reward, reference):
    """Larger, non-square images: the batched torch resize gives the reference's PIL pixels to one 8-bit level."""
    images = _images((48, 40), seed=1)
    from rewardzoo.shared.image_ops import preprocess_images

    ours = preprocess_images(images, reward.preprocess_config)
    ref = torch.stack([reference.preprocess(img) for img in images])
    levels = ((ours - ref) * torch.tensor(reward.preprocess_config.std).view(1, 3, 1, 1) * 255).abs()
    assert ours.shape == ref.shape == (4, 3, SIZE, SIZE)
    assert float(levels.max()) <= 1.0 + 1e-4 and float((levels > 0.5).float().mean()) < 0.02


def test_prompt_is_truncated_to_35_tokens(reward):
    assert reward.tokenizer(PROMPTS[2], truncation=True, max_length=35)["input_ids"].__len__() == 35
    long = reward(image=_images((SIZE, SIZE), 1), prompt=[PROMPTS[2]]).rewards[0]
    longer = reward(image=_images((SIZE, SIZE), 1), prompt=[PROMPTS[2] + " with a tree"]).rewards[0]
    assert float(long) == float(longer)


def test_safetensors_conversion_scores_the_same(reward, checkpoint, tmp_path):
    path = tmp_path / "converted"
    path.mkdir()
    convert_to_safetensors(checkpoint[0] / "ImageReward.pt", path / "ImageReward.safetensors")
    for name in ("med_config.json", "vocab.txt"):
        (path / name).write_text((checkpoint[0] / name).read_text())
    images = _images((SIZE, SIZE))
    np.testing.assert_array_equal(np.asarray(ImageReward(str(path))(image=images, prompt=PROMPTS).rewards),
                                  np.asarray(reward(image=images, prompt=PROMPTS).rewards))


def test_pickled_objects_are_refused(checkpoint, tmp_path):
    path = tmp_path / "bad"
    path.mkdir()
    state = dict(checkpoint[1])
    state["extra"] = Unpicklable()  # an arbitrary class: torch.load(weights_only=True) must refuse it
    torch.save(state, path / "ImageReward.pt")
    (path / "med_config.json").write_text(json.dumps(MED))
    with pytest.raises(ConfigError, match="refusing to unpickle"):
        ImageReward(str(path), tokenizer_path=str(checkpoint[0]))


@pytest.mark.parametrize("change, match", [
    (lambda s: s.update({"blip.something_else.weight": torch.zeros(1)}), "unexpected keys"),
    (lambda s: s.pop("mlp.layers.0.weight"), "does not fit"),
])
def test_wrong_checkpoints_are_named(checkpoint, tmp_path, change, match):
    state = dict(checkpoint[1])
    change(state)
    torch.save(state, tmp_path / "ImageReward.pt")
    (tmp_path / "med_config.json").write_text(json.dumps(MED))
    with pytest.raises(ConfigError, match=match):
        ImageReward(str(tmp_path), tokenizer_path=str(checkpoint[0]))


def test_score_pixels_is_differentiable_and_matches(reward):
    g = torch.Generator().manual_seed(0)
    pixels = torch.rand(3, 3, 40, 48, generator=g).requires_grad_(True)
    score = reward.score_pixels(pixels, PROMPTS[:3])
    score.sum().backward()
    assert pixels.grad is not None and torch.isfinite(pixels.grad).all() and pixels.grad.abs().sum() > 0
    assert all(p.grad is None for p in reward.model.parameters())
    again = pixels.detach().clone().requires_grad_(True)
    reward.score_pixels(again, PROMPTS[:3], gradient_checkpointing=True).sum().backward()
    torch.testing.assert_close(again.grad, pixels.grad, atol=1e-6, rtol=1e-5)
    # on 8-bit-valued pixels at the model's size nothing is resized or rounded: the two paths agree
    exact = torch.randint(0, 256, (3, 3, SIZE, SIZE), generator=g).float() / 255
    plain = torch.as_tensor(reward(image=list(exact), prompt=PROMPTS[:3]).rewards)
    torch.testing.assert_close(reward.score_pixels(exact, PROMPTS[:3]).detach(), plain, atol=1e-5, rtol=0)


def test_float64_gradient_matches_finite_differences(checkpoint):
    reward = ImageReward(str(checkpoint[0]), dtype="float64")
    g = torch.Generator().manual_seed(5)
    pixels = torch.rand(1, 3, 40, 48, generator=g, dtype=torch.float64).requires_grad_(True)
    reward.score_pixels(pixels, PROMPTS[:1]).sum().backward()
    v = torch.randn(pixels.shape, generator=g, dtype=torch.float64)
    eps = 1e-5
    with torch.no_grad():
        diff = (reward.score_pixels(pixels + eps * v, PROMPTS[:1]) - reward.score_pixels(pixels - eps * v, PROMPTS[:1]))
    numeric = float(diff.sum()) / (2 * eps)
    assert float((pixels.grad * v).sum()) == pytest.approx(numeric, rel=1e-5)


def test_mismatched_counts_name_the_field(reward):
    with pytest.raises(InputError, match="prompt"):
        reward(image=_images((SIZE, SIZE), 2), prompt=PROMPTS[:1])


@needs_reference
def test_through_the_processor_equals_the_reference(checkpoint, reference):
    from rewardzoo import RewardProcessor, Sample

    images = _images((SIZE, SIZE), 2, seed=4)
    proc = RewardProcessor([{"name": "ir", "reward_model": "image_reward", "model_path": str(checkpoint[0])}])
    res = proc([Sample(image=np.asarray(img), prompt=p) for img, p in zip(images, PROMPTS)])
    with torch.no_grad():
        expected = [reference.score(p, img) for p, img in zip(PROMPTS, images)]
    np.testing.assert_allclose(res.rewards["ir"], expected, atol=1e-5, rtol=0)


def test_rewardzoo_differentiable_drives_it(checkpoint, reward):
    import rewardzoo

    f = rewardzoo.differentiable({"rewards": [{"name": "image_reward", "model_path": str(checkpoint[0])}]})
    pixels = torch.rand(2, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(2)).requires_grad_(True)
    total = f(pixels, PROMPTS[:2])
    total.sum().backward()
    assert pixels.grad is not None and pixels.grad.abs().sum() > 0
    torch.testing.assert_close(total.detach(), reward.score_pixels(pixels.detach(), PROMPTS[:2]), atol=1e-6, rtol=0)
