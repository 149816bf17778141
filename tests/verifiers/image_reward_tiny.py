"""The tiny ImageReward of the tests: a checkpoint in the published layout with random weights, and the
``image-reward`` package's own model (its ``score`` method, preprocessing, ViT, med.py BERT and MLP) built around
it, in the dev environment or in an environment of its own.

The package (1.5) does not import as published with transformers 5: ``ImageReward/__init__`` imports OpenAI's
``clip`` (not on PyPI under that name) and ``ReFL`` (diffusers), and ``models/BLIP/med.py`` imports three helpers
that transformers 5 moved or removed and calls methods it removed. Where ``import ImageReward`` fails,
:func:`package_modules` imports the package's own ``vit.py``, ``med.py`` and ``ImageReward.py`` without the
package ``__init__`` and with those helpers supplied (``apply_chunking_to_forward``/``prune_linear_layer`` from
``transformers.pytorch_utils``; ``invert_attention_mask`` and ``get_head_mask`` as transformers 4 defined them;
``init_weights`` skipped, the weights are loaded right after); that needs ``pip install --no-deps image-reward
fairscale`` (the package pins timm==0.6.13). In the reference's own environment (transformers 4, openai-clip)
the package imports as published and nothing is supplied.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest
import torch

from rewardzoo.rewards.references.image_reward import ReferenceImageReward

WORDS = (
    "a photo of the red blue green dog cat on table with two three under sky over sea big small "
    "cube ball tree house car and in an painting style very detailed"
).split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
SIZE, WIDTH, TEXT = 32, 128, 64


def reference_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("ImageReward", "fairscale", "timm"))


def package_modules() -> tuple[types.ModuleType, types.ModuleType, types.ModuleType]:
    """The package's vit / med / ImageReward modules: as published where they import, else supplied as the
    module docstring says."""
    names = ("ImageReward.models.BLIP.vit", "ImageReward.models.BLIP.med", "ImageReward.ImageReward")
    try:
        import ImageReward  # noqa: F401  (the package as published: its own environment)
    except ImportError:
        if names[2] not in sys.modules:
            _import_without_the_package_init()
    return tuple(importlib.import_module(n) for n in names)


def _import_without_the_package_init() -> None:
    import transformers.modeling_utils as mu
    import transformers.pytorch_utils as pu

    root = Path(importlib.util.find_spec("ImageReward").submodule_search_locations[0])
    with pytest.MonkeyPatch.context() as mp:
        for name in ("apply_chunking_to_forward", "prune_linear_layer"):
            if not hasattr(mu, name):
                mp.setattr(mu, name, getattr(pu, name), raising=False)
        if not hasattr(mu, "find_pruneable_heads_and_indices"):  # only used by prune_heads
            mp.setattr(mu, "find_pruneable_heads_and_indices", lambda *a, **k: None, raising=False)
        for name, sub in (
            ("ImageReward", ""),
            ("ImageReward.models", "models"),
            ("ImageReward.models.BLIP", "models/BLIP"),
        ):
            pkg = types.ModuleType(name)
            pkg.__path__ = [str(root / sub)]
            mp.setitem(sys.modules, name, pkg)
        importlib.import_module("ImageReward.ImageReward")
        med = importlib.import_module("ImageReward.models.BLIP.med")
        importlib.import_module("ImageReward.models.BLIP.vit")
    if not hasattr(med.BertModel, "invert_attention_mask"):

        def invert_attention_mask(self, mask):  # transformers 4.x ModuleUtilsMixin
            ext = mask[:, None, None, :] if mask.dim() == 2 else mask[:, None, :, :]
            ext = ext.to(dtype=self.dtype)
            return (1.0 - ext) * torch.finfo(self.dtype).min

        med.BertModel.invert_attention_mask = invert_attention_mask
    if not hasattr(med.BertModel, "get_head_mask"):
        med.BertModel.get_head_mask = lambda self, head_mask, n, is_attention_chunked=False: [None] * n
    med.BertModel.init_weights = lambda self: None  # transformers 5's init needs post_init(); weights are loaded


def tokenizer(path: Path):
    from transformers import BertTokenizer

    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    tok = BertTokenizer(str(path / "vocab.txt"))
    tok.save_pretrained(str(path))
    tok.add_special_tokens({"bos_token": "[DEC]"})
    tok.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
    return tok


MED = dict(
    vocab_size=64,
    hidden_size=TEXT,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=128,
    max_position_embeddings=64,
    hidden_act="gelu",
    layer_norm_eps=1e-12,
    pad_token_id=0,
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
    add_cross_attention=True,
    encoder_width=WIDTH,
)


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
    vision = BlipVisionConfig(
        hidden_size=WIDTH,
        intermediate_size=4 * WIDTH,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=SIZE,
        patch_size=16,
        layer_norm_eps=1e-6,
    )
    text = BlipTextConfig(
        **{k: v for k, v in MED.items() if k not in ("add_cross_attention", "encoder_width")}, encoder_hidden_size=WIDTH
    )
    model = ImageRewardModel(vision, text)
    state = {}
    for key, value in model.state_dict().items():
        # random values of a trained model's scale (the default init leaves biases 0, LayerNorms 1, the MLP ~0)
        value = torch.randn_like(value) * (0.08 if key.startswith("mlp.") else 0.2) + (
            1.0 if "norm" in key.lower() and key.endswith("weight") else 0
        )
        for pattern, repl in PUBLISHED:
            if re.search(pattern, key):
                state[re.sub(pattern, repl, key)] = value
                break
        else:
            raise AssertionError(f"no published name for {key}")
    state["blip.text_encoder.embeddings.position_ids"] = torch.arange(MED["max_position_embeddings"])[None]
    state.update(
        {
            "blip.vision_proj.weight": torch.randn(8, WIDTH),
            "blip.vision_proj.bias": torch.zeros(8),
            "blip.text_proj.weight": torch.randn(8, TEXT),
            "blip.text_proj.bias": torch.zeros(8),
        }
    )
    return state


def write_tiny_checkpoint(path: Path, seed: int = 0) -> dict:
    """A tiny ImageReward checkpoint directory as published (ImageReward.pt, med_config.json) plus the
    word-level BERT vocabulary; returns the state dict it saved. Also used by tests/image/test_image_differentiable.py
    and tests/verifiers/test_verifiers_references.py."""
    tokenizer(path)
    state = published_state(seed)
    torch.save(state, path / "ImageReward.pt")
    (path / "med_config.json").write_text(json.dumps(MED))
    return state


def build_reference(path: Path, state: dict, device: str = "cpu") -> torch.nn.Module:
    """The package's ImageReward (its score method, preprocessing, ViT, med.py BERT, MLP) around the tiny
    architecture with ``state``, loaded strictly: the published names are exactly the package's own. (The
    package's ``ImageReward.load`` builds BLIP's ViT-L at 224 pixels, which the tiny weights do not fit.)"""
    vit, med, ir = package_modules()
    blip = torch.nn.Module()
    blip.visual_encoder = vit.VisionTransformer(img_size=SIZE, patch_size=16, embed_dim=WIDTH, depth=2, num_heads=2)
    blip.text_encoder = med.BertModel(med.BertConfig(**MED), add_pooling_layer=False)
    blip.vision_proj, blip.text_proj = torch.nn.Linear(WIDTH, 8), torch.nn.Linear(TEXT, 8)
    blip.tokenizer = tokenizer(path)
    model = ir.ImageReward.__new__(ir.ImageReward)
    torch.nn.Module.__init__(model)
    model.device, model.blip, model.mlp = device, blip, ir.MLP(TEXT)
    model.preprocess = ir._transform(SIZE)
    model.mean, model.std = 0.16717362830052426, 1.0333394966054072
    model.load_state_dict(state, strict=True)
    return model.eval().to(device)


class TinyReferenceImageReward(ReferenceImageReward):
    """rewardzoo's reference wrapper (its calls of the package's ``score``) over the tiny model of
    :func:`build_reference`, read from the checkpoint directory ``model_path``."""

    def load_model(self, model_path, device):
        state = torch.load(Path(model_path) / "ImageReward.pt", map_location="cpu", weights_only=True)
        return build_reference(Path(model_path), state, device)
