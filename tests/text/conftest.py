"""Tiny offline text fixtures: a word-level tokenizer and random-init HF models saved to temp dirs.

The builders live in :mod:`rewardzoo.testing`; these fixtures choose the paths and seeds.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    collect_ignore_glob = ["test_text_*.py"]  # the `text` extra is not installed

from rewardzoo.testing import (  # noqa: F401  (re-exported for the text tests)
    CHAT_TEMPLATE,
    SPECIALS,
    VOCAB,
    WORDS,
    gpt2_config,
    llama_config,
)
from rewardzoo.testing import word_tokenizer as build_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="session")
def text_models(tmp_path_factory, tokenizer):
    """Paths of tiny saved models: gpt2 / llama causal LMs (policy, ref), a gpt2 sequence classifier."""
    from rewardzoo.testing import tiny_text_models

    return tiny_text_models(tmp_path_factory.mktemp("text_models"), seed=0, tokenizer=tokenizer)


def _padded(seqs, pad=0, left=False):
    """(input_ids, attention_mask) for a list of id lists, padded right (or left) with ``pad``."""
    import torch

    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.bool)
    for i, s in enumerate(seqs):
        sl = slice(n - len(s), n) if left else slice(0, len(s))
        ids[i, sl] = torch.tensor(s)
        mask[i, sl] = True
    return ids, mask


@pytest.fixture(scope="session")
def padded():
    """The padding helper: padded(list_of_id_lists, pad=0, left=False) -> (input_ids, attention_mask)."""
    return _padded


@pytest.fixture(scope="session")
def hf_configs():
    """Config builders by name (tiny GPT-2 / Llama)."""
    return {"gpt2": gpt2_config, "llama": llama_config}


@pytest.fixture(scope="session")
def make_tokenizer():
    """The tokenizer builder: make_tokenizer(bos=True) -> PreTrainedTokenizerFast."""
    return build_tokenizer
