"""Tiny offline text fixtures: a word-level tokenizer and random-init HF models saved to temp dirs."""

from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    collect_ignore_glob = ["test_text_*.py"]  # the `text` extra is not installed

WORDS = ("the a cat dog sat on mat ran fast slow good bad answer is yes no one two three four five six seven eight "
         "nine ten what why how because so then <user> <assistant> question reward model").split()
SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]
VOCAB = {tok: i for i, tok in enumerate(SPECIALS + WORDS)}
CHAT_TEMPLATE = ("{% for m in messages %}<{{ m.role }}> {{ m.content }} {% endfor %}"
                 "{% if add_generation_prompt %}<assistant> {% endif %}")


def build_tokenizer(bos: bool = True):
    """A word-level fast tokenizer (whitespace split) that prepends <bos> when asked for special tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab=VOCAB, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<bos> $A",
                                                           special_tokens=[("<bos>", VOCAB["<bos>"])])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>",
                                   eos_token="<eos>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _save(model, tokenizer, path):
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def gpt2_config(**kw):
    from transformers import GPT2Config

    base = dict(vocab_size=len(VOCAB), n_positions=64, n_embd=32, n_layer=2, n_head=4, bos_token_id=2,
                eos_token_id=3, pad_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    base.update(kw)
    return GPT2Config(**base)


def llama_config(**kw):
    from transformers import LlamaConfig

    base = dict(vocab_size=len(VOCAB), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, bos_token_id=2,
                eos_token_id=3, pad_token_id=0)
    base.update(kw)
    return LlamaConfig(**base)


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest on one thread; restore the caller's setting afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="session")
def text_models(tmp_path_factory, tokenizer):
    """Paths of tiny saved models: gpt2 / llama causal LMs (policy, ref), a gpt2 sequence classifier."""
    import torch
    from transformers import GPT2ForSequenceClassification, GPT2LMHeadModel, LlamaForCausalLM

    root = tmp_path_factory.mktemp("text_models")
    torch.manual_seed(0)
    paths = {
        "gpt2_policy": _save(GPT2LMHeadModel(gpt2_config()), tokenizer, root / "gpt2_policy"),
        "gpt2_ref": _save(GPT2LMHeadModel(gpt2_config()), tokenizer, root / "gpt2_ref"),
        "llama_policy": _save(LlamaForCausalLM(llama_config()), tokenizer, root / "llama_policy"),
        "llama_ref": _save(LlamaForCausalLM(llama_config()), tokenizer, root / "llama_ref"),
        "gpt2_cls": _save(GPT2ForSequenceClassification(gpt2_config(num_labels=1)), tokenizer, root / "gpt2_cls"),
        "gpt2_cls3": _save(GPT2ForSequenceClassification(gpt2_config(num_labels=3)), tokenizer, root / "gpt2_cls3"),
    }
    return paths


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
