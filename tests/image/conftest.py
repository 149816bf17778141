"""Tiny random-init CLIP models saved the way users hold real weights, loaded through model_path.

The builders live in :mod:`rewardzoo.testing`; these fixtures only choose the paths and seeds:

- ``oc_dir``: an open_clip hub-style directory (open_clip_config.json + open_clip_model.safetensors);
- ``hf_dir``: a transformers CLIPModel directory with tokenizer and image-processor files (its path
  contains "openai" because torchmetrics only accepts such local paths);
- ``hps_ckpt``: an HPS-style checkpoint ({"state_dict": ...}) for the open_clip architecture of
  ``oc_dir`` but with different random weights;
- ``aesthetic_reference`` / ``aesthetic_head_file``: the LAION aesthetic reference head and its .pth.
The tokenizers use open_clip's shipped BPE vocabulary, so everything works offline.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

torch = pytest.importorskip("torch")
open_clip = pytest.importorskip("open_clip")
transformers = pytest.importorskip("transformers")

from rewardzoo import testing as rzt
from rewardzoo.testing import (  # noqa: F401  (re-exported for the image tests)
    CLIP_PREPROCESS,
    EMBED_DIM,
    IMAGE_SIZE,
    TINY_OPEN_CLIP,
    ReferenceAestheticMLP,
)

PREPROCESS = CLIP_PREPROCESS


@pytest.fixture(scope="session")
def oc_dir(tmp_path_factory):
    return rzt.tiny_open_clip_dir(tmp_path_factory.mktemp("oc") / "tiny-open-clip", seed=0)


@pytest.fixture(scope="session")
def oc_reference(oc_dir):
    """open_clip's own loading of the same directory: (model, PIL preprocess, tokenizer)."""
    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{oc_dir}")
    return model.eval(), preprocess, open_clip.get_tokenizer(f"local-dir:{oc_dir}")


@pytest.fixture(scope="session")
def hps_ckpt(tmp_path_factory):
    """(path of HPS_v2.1_compressed.pt, the same open_clip model in eval mode)."""
    return rzt.hps_checkpoint(tmp_path_factory.mktemp("hps") / "HPS_v2.1_compressed.pt", seed=123)


@pytest.fixture(scope="session")
def hf_dir(tmp_path_factory):
    return rzt.tiny_hf_clip_dir(tmp_path_factory.mktemp("hf") / "openai-tiny-clip", seed=1)


@pytest.fixture(scope="session")
def hf_reference(hf_dir):
    from transformers import CLIPModel, CLIPProcessor

    return CLIPModel.from_pretrained(hf_dir).eval(), CLIPProcessor.from_pretrained(hf_dir)


@pytest.fixture(scope="session")
def aesthetic_reference():
    return rzt.reference_aesthetic_head(seed=7)


@pytest.fixture(scope="session")
def aesthetic_head_file(tmp_path_factory, aesthetic_reference):
    """The published head's file name and format (.pth state dict), holding the weights of aesthetic_reference."""
    return rzt.aesthetic_head_file(tmp_path_factory.mktemp("aes") / "sac+logos+ava1-l14-linearMSE.pth", seed=7)


@pytest.fixture(autouse=True)
def transformers_llama_left_as_found():
    """pyiqa's arch lookup falls back to importing every arch module, Q-Align's among them, whose import replaces
    transformers' Llama classes process-wide (``replace_llama_modality_adaptive``); put them back after each test so
    the suite's later Llama builds run transformers' own code."""
    if importlib.util.find_spec("transformers") is None:
        yield
        return
    from rewardzoo.rewards.image.iqa_qalign import llama_left_as_found

    with llama_left_as_found():
        yield
