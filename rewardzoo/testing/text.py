"""Tiny text models on disk: a word-level tokenizer with a chat template, GPT-2 / Llama configs over it, and
saved causal LMs and sequence classifiers (``save_pretrained`` directories).

These are the backbones :mod:`rewardzoo.rewards.text` (sequence rewards, implicit PRMs) and the TRL adapter
load by path. Imports: the standard library at module level; torch, tokenizers and transformers inside the
builders.
"""

from __future__ import annotations

from pathlib import Path

WORDS = (
    "the a cat dog sat on mat ran fast slow good bad answer is yes no one two three four five six seven eight "
    "nine ten what why how because so then <user> <assistant> question reward model"
).split()
SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]
VOCAB = {tok: i for i, tok in enumerate(SPECIALS + WORDS)}
CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m.role }}> {{ m.content }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant> {% endif %}"
)


def word_tokenizer(bos: bool = True):
    """A word-level ``PreTrainedTokenizerFast`` over :data:`VOCAB` (whitespace split, offline).

    Ids: ``<pad>`` 0, ``<unk>`` 1, ``<bos>`` 2, ``<eos>`` 3, then :data:`WORDS` in order; unknown
    words map to ``<unk>``. With ``bos=True`` a template post-processor prepends ``<bos>`` when special
    tokens are added (the default of ``tokenizer(text)``). :data:`CHAT_TEMPLATE` is set, rendering
    messages as ``<role> content`` and the generation prompt as ``<assistant>``. A new object each call.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab=VOCAB, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<bos> $A", special_tokens=[("<bos>", VOCAB["<bos>"])]
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>", eos_token="<eos>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def gpt2_config(**overrides):
    """A tiny ``GPT2Config`` matching :func:`word_tokenizer`, with keyword ``overrides`` applied on top.

    Defaults: vocabulary ``len(VOCAB)``, 64 positions, width 32, 2 layers, 4 heads, BOS 2 / EOS 3 /
    pad 0 (the word tokenizer's ids) and all dropouts 0 so train and eval forwards agree. Any
    ``GPT2Config`` field can be overridden, e.g. ``num_labels=1`` for a sequence classifier or
    ``vocab_size=4096, n_embd=128`` for a benchmark model.
    """
    from transformers import GPT2Config

    base = dict(
        vocab_size=len(VOCAB),
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=2,
        eos_token_id=3,
        pad_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    base.update(overrides)
    return GPT2Config(**base)


def llama_config(**overrides):
    """A tiny ``LlamaConfig`` matching :func:`word_tokenizer`, with keyword ``overrides`` applied on top.

    Defaults: vocabulary ``len(VOCAB)``, width 32, MLP 64, 2 layers, 4 attention heads with 2
    key/value heads (grouped-query attention), 64 positions, BOS 2 / EOS 3 / pad 0. Any
    ``LlamaConfig`` field can be overridden.
    """
    from transformers import LlamaConfig

    base = dict(
        vocab_size=len(VOCAB),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=2,
        eos_token_id=3,
        pad_token_id=0,
    )
    base.update(overrides)
    return LlamaConfig(**base)


def _save_pretrained(model, tokenizer, path: Path) -> str:
    """Save ``model`` and ``tokenizer`` into ``path`` (a hub-style directory) and return it as a string."""
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def tiny_text_models(root, *, seed: int = 0, tokenizer=None) -> dict[str, str]:
    """Save tiny random-init text models with the word tokenizer under ``root``; return their paths by name.

    Keys (each a ``save_pretrained`` directory ``root / key`` with model and tokenizer files):
    ``gpt2_policy`` and ``gpt2_ref`` (``GPT2LMHeadModel``), ``llama_policy`` and ``llama_ref``
    (``LlamaForCausalLM``), ``gpt2_cls`` and ``gpt2_cls3`` (``GPT2ForSequenceClassification`` with 1
    and 3 labels). ``torch.manual_seed(seed)`` is called once and the models are built in that order,
    so policy and reference differ. ``tokenizer`` defaults to ``word_tokenizer()``.
    """
    import torch
    from transformers import GPT2ForSequenceClassification, GPT2LMHeadModel, LlamaForCausalLM

    root = Path(root)
    tokenizer = word_tokenizer() if tokenizer is None else tokenizer
    torch.manual_seed(seed)
    return {
        "gpt2_policy": _save_pretrained(GPT2LMHeadModel(gpt2_config()), tokenizer, root / "gpt2_policy"),
        "gpt2_ref": _save_pretrained(GPT2LMHeadModel(gpt2_config()), tokenizer, root / "gpt2_ref"),
        "llama_policy": _save_pretrained(LlamaForCausalLM(llama_config()), tokenizer, root / "llama_policy"),
        "llama_ref": _save_pretrained(LlamaForCausalLM(llama_config()), tokenizer, root / "llama_ref"),
        "gpt2_cls": _save_pretrained(
            GPT2ForSequenceClassification(gpt2_config(num_labels=1)), tokenizer, root / "gpt2_cls"
        ),
        "gpt2_cls3": _save_pretrained(
            GPT2ForSequenceClassification(gpt2_config(num_labels=3)), tokenizer, root / "gpt2_cls3"
        ),
    }
