"""A tiny random-init mPLUG-Owl2 (Q-Align / DeQA-Score's network) on disk, as the hub's ``q-future/one-align``
directory is laid out: ``config.json`` (``model_type: mplug_owl2`` with its ``visual_config``),
``model.safetensors``, a Llama tokenizer and a ``CLIPImageProcessor`` config.

The network is pyiqa's own class (``pyiqa.archs.q_align``), so the builder runs where that code runs (transformers
< 5.17 and ``icecream``: :data:`rewardzoo.rewards.image.iqa_qalign.REQUIREMENTS`); ``python -m
rewardzoo.testing.qalign DIR [SEED]`` writes one from such an environment. The tokenizer is a byte-fallback BPE
whose merges spell the prompt's words, the five level words among them, each one token.

Imports: the standard library at module level; the reward module (torch), transformers inside the builders.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from unittest import mock

from .common import made_dir, save_safetensors

#: Words of the prompt spelled by single tokens (the level words are added from the reward's own list).
_PROMPT_WORDS = tuple("USER ASSISTANT How would you rate the quality aesthetics aesthetic of this image The is".split())
#: Vision tower and abstractor sized for a 28-pixel image (patch 14: 4 patches), 4 learned queries.
_VISUAL = {
    "visual_model": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "projection_dim": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 28,
        "patch_size": 14,
    },
    "visual_abstractor": {
        "num_learnable_queries": 4,
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "encoder_hidden_size": 32,
        "grid_size": 2,
    },
}
_PREPROCESS = {
    "size": {"shortest_edge": 28},
    "crop_size": {"height": 28, "width": 28},
    "do_center_crop": True,
    "resample": 3,
    "image_std": [0.26862954, 0.26130258, 0.27577711],
}


def tiny_llama_tokenizer() -> Any:
    """A ``LlamaTokenizer`` (BOS added) over bytes, letters, the level words and the prompt words (each
    ``▁word`` one token)."""
    from transformers import LlamaTokenizer

    from ..rewards.image import iqa_qalign

    words = (*iqa_qalign.LEVELS, *_PROMPT_WORDS)

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{i:02X}>": 3 + i for i in range(256)}}
    for ch in ["▁", *sorted(set("".join(words)) | set("?:.<>|"))]:
        vocab.setdefault(ch, len(vocab))
    merges: list[tuple[str, str]] = []
    for word in words:
        piece = "▁"
        for ch in word:
            if (piece, ch) not in merges:
                merges.append((piece, ch))
            piece += ch
            vocab.setdefault(piece, len(vocab))
    return LlamaTokenizer(vocab=vocab, merges=merges)


def tiny_qalign_dir(path: str | Path, *, seed: int = 0) -> Path:
    """Write the tiny mPLUG-Owl2 directory (Llama: width 32, 2 layers, 4 heads; weights N(0, 0.2))."""
    import torch
    from transformers import CLIPImageProcessor

    from ..rewards.image import iqa_qalign

    path = made_dir(path)
    tokenizer = tiny_llama_tokenizer()
    processor = CLIPImageProcessor(**_PREPROCESS, image_mean=list(iqa_qalign.CLIP_MEAN))
    with iqa_qalign.pyiqa_owl2() as owl2:
        config = owl2.MPLUGOwl2Config(
            visual_config=_VISUAL,
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=128,
            initializer_range=0.2,
        )
        torch.manual_seed(seed)
        with (
            mock.patch.object(owl2, "LlamaTokenizer", iqa_qalign.Given(tokenizer)),
            mock.patch.object(owl2, "CLIPImageProcessor", iqa_qalign.Given(processor)),
        ):
            model = owl2.MPLUGOwl2LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in name and name.endswith("weight") else 0.0))
    save_safetensors(model.state_dict(), path / "model.safetensors")
    config.save_pretrained(path)
    tokenizer.save_pretrained(path)
    processor.save_pretrained(path)
    return path


if __name__ == "__main__":
    tiny_qalign_dir(sys.argv[1], seed=int(sys.argv[2]) if len(sys.argv) > 2 else 0)
