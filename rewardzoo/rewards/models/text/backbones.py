"""Token-sequence backbones for the sequence reward models.

A backbone is an ``nn.Module`` with three entry points (the :class:`Backbone` protocol):

- ``embed(input_ids) -> (B, n, d)``: token embeddings (the reward model adds segment embeddings here);
- ``hidden_states(input_ids=None, attention_mask=None, *, inputs_embeds=None) -> (B, n, d)``: final hidden
  states (after the final norm), for reward heads;
- ``logits(input_ids, attention_mask=None) -> (B, n, V)``: next-token logits, for the implicit PRM;

plus the attributes ``dim`` (d) and ``vocab_size`` (V), and optionally ``lora_targets`` (the projection names
a LoRA scope wraps by default). ``attention_mask`` is (B, n), 1/True for real tokens, 0/False for padding;
left and right padding both work (positions count real tokens only), and a padded row gives the same values
on its real tokens as the sequence alone.

Three implementations: :class:`TinyTransformer` (built-in, for tests and smoke scripts), :class:`HFBackbone`
(wraps a Hugging Face ``AutoModel`` / ``AutoModelForCausalLM``; transformers is imported only when one is loaded
from a path) and :class:`PaLMBackbone` (wraps a palm-rlhf-pytorch ``PaLM``; imported only when one is used).
"""

from __future__ import annotations

import inspect
import math
import sys
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from ....errors import ConfigError, InputError


def embedded(backbone: nn.Module, input_ids: Tensor | None, inputs_embeds: Tensor | None) -> Tensor:
    """``inputs_embeds`` when given, else the backbone's embedding of ``input_ids``."""
    if inputs_embeds is not None:
        return inputs_embeds
    if input_ids is None:
        raise InputError("pass input_ids or inputs_embeds", field="input_ids")
    return backbone.embed(input_ids)


@runtime_checkable
class Backbone(Protocol):
    """What :class:`SequenceRewardModel` and :class:`ImplicitPRM` need from a token model."""

    dim: int
    vocab_size: int

    def embed(self, input_ids: Tensor) -> Tensor: ...

    def hidden_states(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        inputs_embeds: Tensor | None = None,
    ) -> Tensor: ...

    def logits(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor: ...


def full_mask(input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
    """``attention_mask`` as a bool (B, n) tensor (all True when None), with its shape checked."""
    if input_ids.dim() != 2:
        raise InputError(f"input_ids must be (batch, seq_len), got shape {tuple(input_ids.shape)}", field="input_ids")
    if attention_mask is None:
        return torch.ones(input_ids.shape, dtype=torch.bool, device=input_ids.device)
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise InputError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, input_ids "
            f"{tuple(input_ids.shape)}; they must match",
            field="attention_mask",
        )
    return attention_mask.to(device=input_ids.device).bool()


def position_ids(mask: Tensor) -> Tensor:
    """Positions counting real tokens only (0 for the first real token), so left padding shifts nothing."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def check_ids(input_ids: Tensor, vocab_size: int) -> None:
    """InputError unless every id lies in [0, vocab_size) (padding too: it is marked by the mask, not the id)."""
    if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab_size):
        raise InputError(
            f"token ids must lie in [0, {vocab_size}); got [{int(input_ids.min())}, "
            f"{int(input_ids.max())}] (pad with a valid id and mark padding in attention_mask)",
            field="input_ids",
        )


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, allowed: Tensor) -> Tensor:
        b, n, d = x.shape

        def split(t: Tensor) -> Tensor:
            return t.view(b, n, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(self.to_q(x)), split(self.to_k(x)), split(self.to_v(x))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(~allowed[:, None], torch.finfo(scores.dtype).min)
        attn = self.dropout(scores.softmax(-1))
        return self.to_out((attn @ v).transpose(1, 2).reshape(b, n, d))


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = _Attention(dim, heads, dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(dropout))

    def forward(self, x: Tensor, allowed: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x), allowed)
        return x + self.ff(self.norm2(x))


class TinyTransformer(nn.Module):
    """A small causal pre-norm transformer implementing :class:`Backbone` (tests, smoke scripts).

    Learned absolute positions counted over real tokens; attention is causal and ignores padded keys.
    Attention projections are named ``to_q``, ``to_k``, ``to_v``, ``to_out`` (LoRA targets).
    """

    def __init__(
        self,
        vocab_size: int = 64,
        dim: int = 32,
        depth: int = 2,
        heads: int = 4,
        max_len: int = 128,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if dim % heads:
            raise ConfigError(f"dim ({dim}) must be divisible by heads ({heads})")
        self.dim, self.vocab_size, self.max_len = dim, vocab_size, max_len
        self.config = {
            "vocab_size": vocab_size,
            "dim": dim,
            "depth": depth,
            "heads": heads,
            "max_len": max_len,
            "dropout": dropout,
        }
        self.token_emb = nn.Embedding(vocab_size, dim)
        self.pos_emb = nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(_Block(dim, heads, dropout) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.to_logits = nn.Linear(dim, vocab_size, bias=False)

    def embed(self, input_ids: Tensor) -> Tensor:
        check_ids(input_ids, self.vocab_size)
        return self.token_emb(input_ids)

    def hidden_states(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        inputs_embeds: Tensor | None = None,
    ) -> Tensor:
        inputs_embeds = embedded(self, input_ids, inputs_embeds)
        _b, n, _ = inputs_embeds.shape
        if n > self.max_len:
            raise InputError(f"sequence length {n} exceeds max_len {self.max_len}", field="input_ids")
        mask = full_mask(inputs_embeds[..., 0], attention_mask)
        causal = torch.ones(n, n, dtype=torch.bool, device=mask.device).tril()
        # a query may see itself even when padded, so padded rows never softmax over nothing (no NaN)
        allowed = (causal & mask[:, None, :]) | torch.eye(n, dtype=torch.bool, device=mask.device)
        x = inputs_embeds + self.pos_emb(position_ids(mask))
        for block in self.blocks:
            x = block(x, allowed)
        return self.norm(x)

    def logits(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.to_logits(self.hidden_states(input_ids, attention_mask))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.logits(input_ids, attention_mask)


class HFBackbone(nn.Module):
    """:class:`Backbone` over a Hugging Face model (``AutoModel`` for hidden states, ``AutoModelForCausalLM``
    for hidden states and logits).

    Hidden states are the model's last hidden state (after the final norm): a causal LM's inner base model
    runs alone, so reward heads pay nothing for the language-model head. Position ids are passed explicitly (counted
    over real tokens), so left-padded batches match unpadded sequences.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        config = model.config
        self.dim = int(getattr(config, "hidden_size", None) or config.get_text_config().hidden_size)
        self.vocab_size = int(model.get_input_embeddings().num_embeddings)
        self.is_causal_lm = hasattr(model, "get_output_embeddings") and model.get_output_embeddings() is not None

    @classmethod
    def from_pretrained(
        cls, path: str, *, causal_lm: bool = False, dtype: Any = None, trust_remote_code: bool = False
    ) -> HFBackbone:
        """Load ``AutoModelForCausalLM`` (``causal_lm=True``) or ``AutoModel`` from a hub id or local directory."""
        from transformers import AutoModel, AutoModelForCausalLM

        auto = AutoModelForCausalLM if causal_lm else AutoModel
        model = auto.from_pretrained(path, dtype=dtype, trust_remote_code=trust_remote_code)
        return cls(model)

    def embed(self, input_ids: Tensor) -> Tensor:
        check_ids(input_ids, self.vocab_size)
        return self.model.get_input_embeddings()(input_ids)

    def _run(
        self,
        module: nn.Module,
        input_ids: Tensor | None,
        attention_mask: Tensor | None,
        inputs_embeds: Tensor | None,
        **kwargs: Any,
    ):
        inputs_embeds = embedded(self, input_ids, inputs_embeds)
        mask = full_mask(inputs_embeds[..., 0], attention_mask)
        accepted = inspect.signature(module.forward).parameters
        if "position_ids" in accepted:
            kwargs["position_ids"] = position_ids(mask)
        if "use_cache" in accepted:
            kwargs["use_cache"] = False
        return module(inputs_embeds=inputs_embeds, attention_mask=mask.long(), return_dict=True, **kwargs)

    def hidden_states(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        inputs_embeds: Tensor | None = None,
    ) -> Tensor:
        base = self.model.base_model
        if base is not self.model:  # a causal LM's inner model: no language-model head to compute
            return self._run(base, input_ids, attention_mask, inputs_embeds).last_hidden_state
        if self.is_causal_lm:
            return self._run(
                self.model, input_ids, attention_mask, inputs_embeds, output_hidden_states=True
            ).hidden_states[-1]
        return self._run(self.model, input_ids, attention_mask, inputs_embeds).last_hidden_state

    def logits(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        if not self.is_causal_lm:
            raise ConfigError(
                f"{type(self.model).__name__} has no language-model head; load the backbone with "
                "causal_lm=True (AutoModelForCausalLM) for token log-probabilities"
            )
        return self._run(self.model, input_ids, attention_mask, None).logits

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.hidden_states(input_ids, attention_mask)


# ------------------------------------------------------------------------------------- palm-rlhf-pytorch
def _palm_class() -> type[Any]:
    """``palm_rlhf_pytorch.PaLM``, imported on first use."""
    try:
        from palm_rlhf_pytorch.palm import PaLM
    except ImportError as exc:
        raise ConfigError("the PaLM backbone needs palm-rlhf-pytorch: pip install palm-rlhf-pytorch") from exc
    return PaLM


def is_palm(model: Any) -> bool:
    """Whether ``model`` is a palm-rlhf-pytorch ``PaLM`` (without importing the package when it is not loaded)."""
    module = sys.modules.get("palm_rlhf_pytorch.palm")
    return module is not None and isinstance(model, module.PaLM)


def from_negative_padding(input_ids: Tensor) -> tuple[Tensor, Tensor]:
    """``(input_ids, attention_mask)`` for a batch padded palm-rlhf-pytorch style (negative ids = padding):
    padding becomes id 0 and is marked False in the mask, which is what every backbone here takes."""
    mask = input_ids >= 0
    return input_ids.masked_fill(~mask, 0), mask


class PaLMBackbone(nn.Module):
    """:class:`Backbone` over a palm-rlhf-pytorch ``PaLM`` (pass the ``PaLM`` itself: wrapping is automatic).

    Runs PaLM's own token embedding, parallel blocks and final norm, with the attention mask as a key-padding
    mask, so variable-length (left or right padded) batches work; PaLM's own forward has no padding mask for
    causal models, and its negative-id padding crashes the token embedding. Rotary positions are relative, so
    a left-padded row matches the sequence alone. A right-padded causal batch runs without a key mask (the
    causal mask already hides trailing padding), which also keeps PaLM's flash attention usable; flash attention
    cannot combine a key mask with its causal mask, so left padding there is an InputError.

    ``finetune_scope`` applies one of the PaLM's own LoRA scopes (``palm.finetune_modules``), e.g. an actor
    trained with palm-rlhf-pytorch. rewardzoo's LoRA scopes (``lora.add_lora``) wrap ``fused_attn_ff_proj``
    (queries, the shared key / value and the feed-forward input) and ``attn_out`` by default (``lora_targets``).
    """

    lora_targets = ("fused_attn_ff_proj", "attn_out")

    def __init__(self, model: nn.Module, *, finetune_scope: str | None = None) -> None:
        super().__init__()
        palm_class = _palm_class()
        if not isinstance(model, palm_class):
            raise ConfigError(f"PaLMBackbone wraps a palm_rlhf_pytorch.PaLM, got {type(model).__name__}")
        if finetune_scope is not None and finetune_scope not in model.finetune_modules:
            raise ConfigError(
                f"the PaLM has no finetune scope {finetune_scope!r} (it has {sorted(model.finetune_modules)})"
            )
        self.model = model
        self.dim, self.vocab_size = int(model.dim), int(model.num_tokens)
        self.finetune_scope = finetune_scope

    @classmethod
    def create(cls, *, finetune_scope: str | None = None, **palm_kwargs: Any) -> PaLMBackbone:
        """Build a fresh ``PaLM(**palm_kwargs)`` (``num_tokens``, ``dim``, ``depth``, ``heads``, ``dim_head``, ...)."""
        return cls(_palm_class()(**palm_kwargs), finetune_scope=finetune_scope)

    def embed(self, input_ids: Tensor) -> Tensor:
        check_ids(input_ids, self.vocab_size)
        return self.model.token_emb(input_ids)

    def _key_mask(self, mask: Tensor) -> Tensor | None:
        """The key-padding mask the blocks need, or None when attention already ignores the padding."""
        prefix = not bool((mask[:, 1:] & ~mask[:, :-1]).any())  # real tokens first, padding after
        if bool(mask.all()) or (self.model.causal and prefix):
            return None
        if any(getattr(layer.fn, "flash_attn", False) for layer in self.model.layers):
            raise InputError(
                "a PaLM built with flash_attn=True cannot take a key-padding mask together with its "
                "causal mask; pad on the right, or build the PaLM with flash_attn=False",
                field="attention_mask",
            )
        return mask

    def hidden_states(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        inputs_embeds: Tensor | None = None,
    ) -> Tensor:
        inputs_embeds = embedded(self, input_ids, inputs_embeds)
        key_mask = self._key_mask(full_mask(inputs_embeds[..., 0], attention_mask))
        layers = self.model.layers
        scopes = self.model.finetune_modules[self.finetune_scope] if self.finetune_scope else [None] * len(layers)
        # PaLM's residual adds in place when nothing needs a gradient: never write into the caller's tensor
        x = inputs_embeds.clone()
        for layer, lora in zip(layers, scopes):
            x = layer(x, mask=key_mask, finetune_modules=lora)
        return self.model.norm(x)

    def logits(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.model.to_logits(self.hidden_states(input_ids, attention_mask))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.hidden_states(input_ids, attention_mask)


def as_backbone(model: nn.Module) -> nn.Module:
    """``model`` itself when it implements :class:`Backbone`, a :class:`PaLMBackbone` around a palm-rlhf-pytorch
    ``PaLM``, an :class:`HFBackbone` around a transformers ``PreTrainedModel``; a ConfigError otherwise."""
    if isinstance(model, Backbone) and isinstance(model, nn.Module):
        return model
    if is_palm(model):
        return PaLMBackbone(model)
    if isinstance(model, nn.Module) and hasattr(model, "config") and hasattr(model, "get_input_embeddings"):
        return HFBackbone(model)
    raise ConfigError(
        f"{type(model).__name__} is not a backbone: it needs embed(), hidden_states(), logits(), dim "
        "and vocab_size (see rewardzoo.rewards.models.text.backbones), or must be a transformers model or a "
        "palm_rlhf_pytorch.PaLM"
    )
