"""Text flagship at its real size (a case for ``scripts/scale_check.py``; interface in ``common.py``).

``sequence_reward`` on a 1B decoder reward model in the published form of Skywork/Skywork-Reward-V2-Llama-3.2-1B:
``LlamaForSequenceClassification`` (``num_labels`` 1) with Llama-3.2-1B's config, bfloat16 weights in one
``model.safetensors`` (what the hub ships), loaded at the card's dtype (float32 on the CPU). The tokenizer is a
real-sized stand-in: a byte-level BPE trained on English text, padded to Llama 3's 128,000 regular tokens, then its
256 special tokens at their ids, with a Llama-3 chat template.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scale.common import Case

LLAMA3_REGULAR = 128000
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
PROMPT = (
    "Explain to a first-year student why the sky is blue during the day and red at sunset. Use a simple analogy, "
    "mention Rayleigh scattering by name, say how the wavelength of light matters, and finish with one experiment "
    "they can try at home with a glass of water, a torch and a few drops of milk."
)
PARAGRAPH = (
    "Sunlight looks white, but it is a mixture of every colour, from red light with long waves to blue and violet "
    "light with short waves. When that light enters the atmosphere it meets molecules of nitrogen and oxygen that "
    "are far smaller than the waves themselves. Such small particles scatter short waves much more strongly than "
    "long ones: the effect grows with the inverse fourth power of the wavelength, which is what Rayleigh worked "
    "out, so blue light is scattered about five times more than red. "
)


def completion() -> str:
    """About 1,000 tokens of answer (the length RLHF completions are scored at)."""
    return " ".join([PARAGRAPH] * 12)


def llama3_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    trained = Tokenizer(models.BPE())
    trained.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=3000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    trained.train_from_iterator([PROMPT, PARAGRAPH] * 4, trainer)
    state = json.loads(trained.to_str())["model"]
    vocab = dict(state["vocab"])
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    for i in range(len(vocab), LLAMA3_REGULAR):
        vocab[f"<filler{i}>"] = i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]  # fmt: skip
    specials += [f"<|reserved_special_token_{i}|>" for i in range(3, 3 + 256 - len(specials))]
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.add_special_tokens({"additional_special_tokens": specials})  # in id order
    fast.add_special_tokens(
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<|finetune_right_pad_id|>"}
    )
    assert fast.convert_tokens_to_ids("<|begin_of_text|>") == LLAMA3_REGULAR and len(fast) == 128256
    fast.chat_template = LLAMA3_TEMPLATE
    return fast


def build_sequence_reward(folder: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, LlamaConfig
    from transformers.initialization import no_init_weights

    tokenizer = llama3_tokenizer()
    config = LlamaConfig(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128009, pad_token_id=128004, num_labels=1,
    )  # fmt: skip
    config.architectures = ["LlamaForSequenceClassification"]
    torch.manual_seed(0)
    with no_init_weights():
        model = AutoModelForSequenceClassification.from_config(config, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02) if p.dim() >= 2 else p.fill_(1.0)
    model.save_pretrained(folder)  # one model.safetensors (2.47 GB in bf16), as the hub repository
    tokenizer.save_pretrained(folder)


def reference_sequence_reward(folder: Path) -> Any:
    """transformers' own loader at the card's dtype (float32)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32).eval()


CASES = [
    Case(
        name="sequence_reward",
        reward="sequence_reward",
        build=build_sequence_reward,
        entry=lambda folder: {"model_path": str(folder), "kwargs": {"chat_template": True}},
        reference=reference_sequence_reward,
        samples=lambda: [{"prompt": PROMPT, "completion": completion()}],
        imports=("torch", "transformers", "safetensors.torch"),
        dtype="float32",
        layout="transformers save_pretrained: config.json + one model.safetensors in bfloat16 + tokenizer "
        "(Skywork/Skywork-Reward-V2-Llama-3.2-1B)",
        notes="Llama-3.2-1B's config (1.24B parameters) as LlamaForSequenceClassification; read at float32 (the "
        "card's CPU dtype) from a bf16 file; a ~1,000-token completion; stand-in tokenizer of the real size",
    ),
]
