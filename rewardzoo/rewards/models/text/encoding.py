"""Prompt + completion tokenisation shared by the text rewards.

The prompt is tokenised with the tokenizer's special tokens (BOS, ...), the completion without, and the
two id lists are concatenated, so the boundary between them is exact (``prompt_length``). With
``chat_template=True`` the tokenizer's chat template renders a user turn (the prompt, with the generation
prompt) and an assistant turn (the completion); the completion part is what the full rendering adds.
Too long pairs lose prompt tokens from the left first, then completion tokens from the right.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ....errors import ConfigError, InputError


@dataclass
class EncodedBatch:
    """A right-padded batch: ``input_ids``/``attention_mask`` (B, n); ``prompt_lengths`` (B,) real prompt
    tokens; ``response_mask`` (B, n) True on completion tokens."""

    input_ids: Tensor
    attention_mask: Tensor
    prompt_lengths: Tensor
    response_mask: Tensor


class PairEncoder:
    """Tokenises (prompt, completion) pairs with a Hugging Face tokenizer (thread-safe)."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        max_length: int | None = None,
        separator: str = "",
        chat_template: bool = False,
        pad_token_id: int | None = None,
        add_special_tokens: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.add_special_tokens = add_special_tokens  # for the prompt; TRL's reward-model path uses none
        self.separator = separator
        self.chat_template = chat_template
        if chat_template and not getattr(tokenizer, "chat_template", None):
            raise ConfigError("chat_template: true, but the tokenizer has no chat template")
        self.max_length = max_length
        candidates = (pad_token_id, getattr(tokenizer, "pad_token_id", None), getattr(tokenizer, "eos_token_id", None))
        self.pad_token_id = int(next((c for c in candidates if c is not None), 0))
        self._lock = threading.Lock()  # fast tokenizers may not be shared by threads

    def _ids(self, text: str, special: bool) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def pair_ids(self, prompt: str, completion: str) -> tuple[list[int], list[int]]:
        """(prompt ids, completion ids) of one pair, before truncation."""
        with self._lock:
            if not self.chat_template:
                completion_ids = self._ids(self.separator + completion, False) if completion else []
                return self._ids(prompt, self.add_special_tokens), completion_ids
            head, turn = self.chat_turn(prompt, completion)
            return self._ids(head, False), self._ids(turn, False)

    def chat_turn(self, prompt: str, completion: str) -> tuple[str, str]:
        """(the rendered user turn with its generation prompt, the rendered assistant turn after it)."""
        head = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        full = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}], tokenize=False
        )
        if not full.startswith(head):
            raise InputError(
                "the chat template renders the assistant turn in a way that does not extend the "
                "prompt; use chat_template: false",
                field="completion",
            )
        return head, full[len(head) :]

    def truncate(self, prompt: list[int], completion: list[int]) -> tuple[list[int], list[int]]:
        if self.max_length is None or len(prompt) + len(completion) <= self.max_length:
            return prompt, completion
        keep_prompt = max(self.max_length - len(completion), 0)
        prompt = prompt[len(prompt) - keep_prompt :] if keep_prompt else []
        return prompt, completion[: self.max_length - len(prompt)]

    def __call__(self, prompts: Sequence[str], completions: Sequence[str], device: Any = "cpu") -> EncodedBatch:
        if len(prompts) != len(completions):
            raise InputError(f"got {len(prompts)} prompts and {len(completions)} completions", field="completion")
        rows: list[tuple[list[int], int]] = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions)):
            p, c = self.truncate(*self.pair_ids(prompt, completion))
            if not p and not c:
                raise InputError("prompt and completion give no tokens", field="completion", sample=i)
            rows.append((p + c, len(p)))
        n = max(len(ids) for ids, _ in rows)
        input_ids = torch.full((len(rows), n), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), n), dtype=torch.bool)
        response_mask = torch.zeros((len(rows), n), dtype=torch.bool)
        for i, (ids, plen) in enumerate(rows):
            input_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            attention_mask[i, : len(ids)] = True
            response_mask[i, plen : len(ids)] = True
        prompt_lengths = torch.tensor([plen for _, plen in rows], dtype=torch.long)
        return EncodedBatch(
            input_ids.to(device), attention_mask.to(device), prompt_lengths.to(device), response_mask.to(device)
        )


def default_max_length(tokenizer: Any, config: Any) -> int | None:
    """The longest sequence the model takes: the config's position limit, else the tokenizer's."""
    for value in (
        getattr(config, "max_position_embeddings", None),
        getattr(config, "n_positions", None),
        getattr(tokenizer, "model_max_length", None),
    ):
        if isinstance(value, int) and 0 < value < 1_000_000:
            return value
    return None


def load_tokenizer(path: str, trust_remote_code: bool = False) -> Any:
    """``AutoTokenizer`` from ``path`` (a hub id or local directory)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
