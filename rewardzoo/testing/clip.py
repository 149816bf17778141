"""Tiny CLIP backbones on disk: an open_clip hub directory, a transformers ``CLIPModel`` + ``CLIPProcessor``
directory and an HPSv2-style ``{"state_dict": ...}`` checkpoint of an open_clip model.

These are the three layouts :func:`rewardzoo.rewards.models.clip.load_clip_backbone` reads (``local-dir:`` open_clip,
``from_pretrained`` transformers, an open_clip model plus ``checkpoint``), so every CLIP-based reward
(``clip_score``, ``pickscore``, ``hpsv2``, the aesthetic and video rewards' ``clip_model``) loads them through
its ordinary ``model_path``. Imports: the standard library and :mod:`.common` at module level; torch,
open_clip, safetensors and transformers inside the builders.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

from .common import made_dir, save_safetensors

IMAGE_SIZE = 64
EMBED_DIM = 768  # the LAION aesthetic head reads 768-d ViT-L/14 embeddings

TINY_OPEN_CLIP: dict = {
    "embed_dim": EMBED_DIM,
    "vision_cfg": {"image_size": IMAGE_SIZE, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}
# The video tests' variant: the same image tower, one text layer.
TINY_VIDEO_OPEN_CLIP: dict = {
    "embed_dim": EMBED_DIM,
    "vision_cfg": {"image_size": IMAGE_SIZE, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}
CLIP_PREPROCESS: dict = {
    "mean": [0.48145466, 0.4578275, 0.40821073],
    "std": [0.26862954, 0.26130258, 0.27577711],
    "interpolation": "bicubic",
    "resize_mode": "shortest",
}


def tiny_open_clip_model(*, seed: int = 0, model_cfg: dict | None = None):
    """Build the random-init ``open_clip.CLIP`` that :func:`tiny_open_clip_dir` saves, in memory.

    ``torch.manual_seed(seed)`` is called right before ``open_clip.CLIP(**model_cfg)``, so the result
    has exactly the weights of ``tiny_open_clip_dir(path, seed=seed, model_cfg=model_cfg)``; use it as
    the reference a test compares a reward against. ``model_cfg`` defaults to :data:`TINY_OPEN_CLIP`
    (any open_clip ``model_cfg`` works, e.g. ``open_clip.get_model_config("ViT-B-32")`` for a
    full-size benchmark model). The model is returned in train mode, as constructed.
    """
    import open_clip
    import torch

    cfg = copy.deepcopy(TINY_OPEN_CLIP if model_cfg is None else model_cfg)
    torch.manual_seed(seed)
    return open_clip.CLIP(**cfg)


def tiny_open_clip_dir(
    path, *, seed: int = 0, model_cfg: dict | None = None, preprocess_cfg: dict | None = None
) -> Path:
    """Write a random-init open_clip model as a hub-style directory and return the directory.

    The directory holds ``open_clip_config.json`` (``{"model_cfg": ..., "preprocess_cfg": ...}``)
    and ``open_clip_model.safetensors``, the layout of the open_clip models on the Hugging Face hub, so
    it loads with ``open_clip.create_model_and_transforms(f"local-dir:{path}")`` and as the
    ``model_path``/``clip_model`` of the CLIP-based rewards. ``path`` is created (with parents) if
    missing. ``model_cfg`` defaults to :data:`TINY_OPEN_CLIP` and ``preprocess_cfg`` to
    :data:`CLIP_PREPROCESS`; the weights are those of ``tiny_open_clip_model(seed=seed, model_cfg=...)``.
    """
    cfg = TINY_OPEN_CLIP if model_cfg is None else model_cfg
    model = tiny_open_clip_model(seed=seed, model_cfg=cfg)
    path = made_dir(path)
    (path / "open_clip_config.json").write_text(
        json.dumps({"model_cfg": cfg, "preprocess_cfg": CLIP_PREPROCESS if preprocess_cfg is None else preprocess_cfg})
    )
    save_safetensors(model.state_dict(), path / "open_clip_model.safetensors")
    return path


def clip_tokenizer():
    """A transformers ``CLIPTokenizer`` over the BPE vocabulary that open_clip ships (no download).

    The vocabulary (49408 tokens: byte symbols, their ``</w>`` forms, the 48894 merges, then
    ``<|startoftext|>`` and ``<|endoftext|>``) and the merges are rebuilt from open_clip's bundled
    ``bpe_simple_vocab_16e6.txt.gz`` exactly as OpenAI's tokenizer defines them, so token ids agree
    with ``openai/clip-vit-*`` tokenizers and with open_clip's own tokenizer. Needs open_clip and
    transformers; works with ``HF_HUB_OFFLINE=1``.
    """
    from open_clip.tokenizer import bytes_to_unicode, default_bpe
    from transformers import CLIPTokenizer

    with gzip.open(default_bpe()) as f:
        lines = f.read().decode("utf-8").split("\n")
    merges = lines[1 : 49152 - 256 - 2 + 1]
    vocab = list(bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab] + ["".join(m.split()) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    return CLIPTokenizer(vocab={t: i for i, t in enumerate(vocab)}, merges=[tuple(m.split()) for m in merges])


def tiny_hf_clip_config():
    """The tiny transformers ``CLIPConfig`` that :func:`tiny_hf_clip_dir` uses by default.

    Text tower: vocabulary 49408 (the CLIP BPE), width 32, 2 layers, 2 heads, 77 positions, BOS 49406
    and EOS/pad 49407; vision tower: width 32, 1 layer, 2 heads, :data:`IMAGE_SIZE` pixels, patch 16;
    projection 48 and the usual ``logit_scale`` initial value 2.6592. A fresh config object each call.
    """
    from transformers import CLIPConfig

    return CLIPConfig(
        text_config={
            "vocab_size": 49408,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "max_position_embeddings": 77,
            "bos_token_id": 49406,
            "eos_token_id": 49407,
            "pad_token_id": 49407,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": IMAGE_SIZE,
            "patch_size": 16,
        },
        projection_dim=48,
        logit_scale_init_value=2.6592,
    )


def tiny_hf_clip_dir(path, *, seed: int = 1, config=None, image_processor=None) -> Path:
    """Write a random-init transformers ``CLIPModel`` plus its ``CLIPProcessor`` and return the directory.

    The directory is what ``CLIPModel.from_pretrained``/``CLIPProcessor.from_pretrained`` read: model
    config and safetensors weights, the :func:`clip_tokenizer` files and an image-processor config
    (resize and centre-crop to :data:`IMAGE_SIZE` by default). ``torch.manual_seed(seed)`` is called
    before the model is built from ``config`` (default :func:`tiny_hf_clip_config`; pass
    ``transformers.CLIPConfig()`` and ``CLIPImageProcessor()`` for ViT-B/32 sizes). Tip: torchmetrics'
    ``CLIPScore`` only accepts local paths whose name contains ``openai``, so name the directory
    accordingly (e.g. ``tmp / "openai-tiny-clip"``) when comparing against it.
    """
    import torch
    from transformers import CLIPImageProcessor, CLIPModel, CLIPProcessor

    config = tiny_hf_clip_config() if config is None else config
    torch.manual_seed(seed)
    model = CLIPModel(config).eval()
    path = Path(path)
    model.save_pretrained(path)
    if image_processor is None:
        image_processor = CLIPImageProcessor(
            size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
        )
    CLIPProcessor(image_processor=image_processor, tokenizer=clip_tokenizer()).save_pretrained(path)
    return path


def hps_checkpoint(path, *, seed: int = 123, model_cfg: dict | None = None):
    """Save an HPS-style checkpoint ``{"state_dict": ...}`` (``torch.save``) and return ``(path, model)``.

    HPSv2 publishes ``HPS_v2.1_compressed.pt``, a torch checkpoint whose ``state_dict`` holds the
    fine-tuned weights of an open_clip model; this writes one for the open_clip architecture
    ``model_cfg`` (default :data:`TINY_OPEN_CLIP`, i.e. that of :func:`tiny_open_clip_dir`) with random
    weights from ``seed`` (different from the backbone directory's, so a test can tell the checkpoint
    was loaded). ``path`` is the file to write (parents created); ``model`` is the same network in
    eval mode, the reference to compare against.
    """
    import torch

    model = tiny_open_clip_model(seed=seed, model_cfg=model_cfg)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": model.state_dict()}, path)
    return path, model.eval()
