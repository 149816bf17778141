"""Implicit process reward model (PRIME, Cui et al. 2025) and its YAML-facing reward.

Dense reward of the target token ``x_{t+1}``: ``r_t = beta * (log pi(x_{t+1} | x_<=t) - log pi_ref(x_{t+1} | x_<=t))``,
shape (B, n - 1), zero where masked. Outcome reward: ``Q = sum_t mask_t * r_t``. PRIME trains ``pi`` with
``BCE(sigmoid(Q), label)`` (verl ``compute_ce_dpo_loss_rm``), so label 1 raises ``Q`` and label 0 lowers it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...errors import ConfigError, InputError
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.text.backbones import HFBackbone, as_backbone, full_mask
from ..models.text.encoding import PairEncoder, default_max_length, load_tokenizer
from ..options import PositiveInt, PositiveNumber, RewardOptions, WeightPath, model_validator


def token_log_probs(
    backbone: nn.Module, input_ids: Tensor, attention_mask: Tensor, keep: Tensor | None = None
) -> Tensor:
    """``log p(x_{t+1} | x_<=t)`` for t = 0 .. n-2, shape (B, n - 1), in float32; 0 where ``keep`` (B, n - 1) is
    False (the vocabulary softmax runs on kept positions only, so padding costs no softmax)."""
    logits = backbone.logits(input_ids, attention_mask)[:, :-1]
    targets = input_ids[:, 1:]
    if keep is None:
        return logits.float().log_softmax(-1).gather(-1, targets[..., None]).squeeze(-1)
    picked = logits[keep].float()
    out = torch.zeros(targets.shape, dtype=picked.dtype, device=picked.device)
    out[keep] = picked.gather(-1, targets[keep][:, None]).squeeze(-1) - picked.logsumexp(-1)
    return out


def _check_labels(labels: Any, batch: int, device: torch.device) -> Tensor:
    labels = torch.as_tensor(labels, device=device)
    if tuple(labels.shape) != (batch,):
        raise InputError(
            f"labels must have shape ({batch},) (one outcome label per sequence), got {tuple(labels.shape)}",
            field="labels",
        )
    labels = labels.float()
    if bool(((labels < 0) | (labels > 1)).any()):
        raise InputError("labels are outcome probabilities in [0, 1] (1 = correct)", field="labels")
    return labels


@dataclass
class ImplicitPRMOutput:
    """``process_rewards`` (B, n - 1), ``outcome_rewards`` (B,), ``mask`` (B, n - 1), ``loss`` with labels."""

    process_rewards: Tensor
    outcome_rewards: Tensor
    mask: Tensor
    loss: Tensor | None = None


class ImplicitPRM(nn.Module):
    """Implicit PRM over a trainable causal model and a frozen reference.

    ``r_t = beta * (log pi(x_{t+1}|x_<=t) - log pi_ref(x_{t+1}|x_<=t))`` for each target token; the mask keeps
    targets that are real tokens with a real source (``attention_mask``) and, when given, lie in the response
    (``response_mask`` (B, n), aligned with ``input_ids``). Outcome ``Q = sum_t mask_t r_t``.
    Loss (PRIME): ``mean_b BCE(sigmoid(Q_b), y_b)``; per-token variant: masked mean of ``BCE(sigmoid(r_t), y_b)``.

    ``model`` (a :class:`~rewardzoo.rewards.models.text.backbones.Backbone`, a transformers causal LM or a
    palm-rlhf-pytorch ``PaLM``) is the one that trains; ``ref_model`` defaults to a deep copy of it. The
    reference is frozen (no gradients, eval mode, run under no_grad). Range: unbounded.
    """

    def __init__(self, model: nn.Module, ref_model: nn.Module | None = None, beta: float = 0.1) -> None:
        super().__init__()
        if ref_model is not None and ref_model is model:
            raise ConfigError("ref_model is the trainable model itself; pass a separate (frozen) reference or None")
        self.model = as_backbone(model)
        self.ref_model = copy.deepcopy(self.model) if ref_model is None else as_backbone(ref_model)
        self.ref_model.requires_grad_(False)
        self.ref_model.eval()
        if not beta > 0:
            raise ConfigError(f"beta must be > 0, got {beta!r}")
        self.beta = float(beta)

    def train(self, mode: bool = True) -> ImplicitPRM:
        super().train(mode)
        self.ref_model.eval()  # the reference never drops out
        return self

    def trainable_parameters(self) -> Iterator[nn.Parameter]:
        """The trainable model's parameters (never the reference's)."""
        return (p for p in self.model.parameters() if p.requires_grad)

    def token_mask(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, response_mask: Tensor | None = None
    ) -> Tensor:
        """(B, n - 1) bool: target token t+1 is scored."""
        mask = full_mask(input_ids, attention_mask)
        if input_ids.shape[1] < 2:
            raise InputError("sequences need at least 2 tokens for a next-token reward", field="input_ids")
        keep = mask[:, 1:] & mask[:, :-1]
        if response_mask is not None:
            response_mask = torch.as_tensor(response_mask, device=input_ids.device)
            if tuple(response_mask.shape) != tuple(input_ids.shape):
                raise InputError(
                    f"response_mask must be aligned with input_ids {tuple(input_ids.shape)}, got "
                    f"{tuple(response_mask.shape)}",
                    field="response_mask",
                )
            keep = keep & response_mask[:, 1:].bool()
        return keep

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        response_mask: Tensor | None = None,
        labels: Tensor | None = None,
        per_token: bool = False,
    ) -> ImplicitPRMOutput:
        mask = self.token_mask(input_ids, attention_mask, response_mask)
        full = full_mask(input_ids, attention_mask)
        logp = token_log_probs(self.model, input_ids, full, mask)
        with torch.no_grad():
            logp_ref = token_log_probs(self.ref_model, input_ids, full, mask)
        rewards = (self.beta * (logp - logp_ref)).masked_fill(~mask, 0.0)
        outcome = rewards.sum(-1)
        loss = None
        if labels is not None:
            y = _check_labels(labels, input_ids.shape[0], input_ids.device)
            loss = self.token_loss(rewards, mask, y) if per_token else self.prime_loss(outcome, y)
        return ImplicitPRMOutput(rewards, outcome, mask, loss)

    def process_rewards(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, response_mask: Tensor | None = None
    ) -> Tensor:
        """Dense rewards (B, n - 1), zero where masked."""
        return self(input_ids, attention_mask, response_mask).process_rewards

    def outcome_reward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, response_mask: Tensor | None = None
    ) -> Tensor:
        """``Q = sum_t mask_t r_t`` (B,)."""
        return self(input_ids, attention_mask, response_mask).outcome_rewards

    def loss(
        self,
        input_ids: Tensor,
        labels: Tensor,
        attention_mask: Tensor | None = None,
        response_mask: Tensor | None = None,
        per_token: bool = False,
    ) -> Tensor:
        """PRIME cross-entropy loss (or its per-token variant) for outcome labels in [0, 1]."""
        return self(input_ids, attention_mask, response_mask, labels=labels, per_token=per_token).loss

    @staticmethod
    def prime_loss(outcome: Tensor, labels: Tensor) -> Tensor:
        """``mean BCE(sigmoid(Q), y)``: minimising it raises Q for y = 1 and lowers it for y = 0."""
        return F.binary_cross_entropy_with_logits(outcome, labels.to(outcome.dtype))

    @staticmethod
    def token_loss(rewards: Tensor, mask: Tensor, labels: Tensor) -> Tensor:
        """Masked mean over scored tokens of ``BCE(sigmoid(r_t), y_b)``."""
        target = labels.to(rewards.dtype)[:, None].expand_as(rewards)
        per_token = F.binary_cross_entropy_with_logits(rewards, target, reduction="none")
        weights = mask.to(rewards.dtype)
        return (per_token * weights).sum() / weights.sum().clamp(min=1.0)


class CompletionSpanEncoder(PairEncoder):
    """:class:`PairEncoder` whose chat-template completion span stops where the completion text ends.

    With ``chat_template=True`` the base encoder takes everything the assistant turn adds after the generation
    prompt, end-of-turn tokens included. PRIME (verl) scores the generated response tokens only, so here the
    text after the completion (the template's end-of-turn tokens) is dropped, unless ``score_end_of_turn``.
    Dropping the tail equals masking it: the model is causal, later tokens do not change earlier log-probs.
    """

    def __init__(self, tokenizer: Any, *, score_end_of_turn: bool = False, **kwargs: Any) -> None:
        super().__init__(tokenizer, **kwargs)
        self.score_end_of_turn = bool(score_end_of_turn)

    def pair_ids(self, prompt: str, completion: str) -> tuple[list[int], list[int]]:
        if not self.chat_template or self.score_end_of_turn:
            return super().pair_ids(prompt, completion)
        with self._lock:
            head, rest = self.chat_turn(prompt, completion)
            if not completion:
                return self._ids(head, False), []
            start = rest.find(completion)
            if start < 0:
                raise InputError(
                    "the chat template changes the completion text, so its end cannot be found; "
                    "set score_end_of_turn: true to score the whole assistant turn",
                    field="completion",
                )
            return self._ids(head, False), self._ids(rest[: start + len(completion)], False)


class ImplicitPRMReward(PointwiseReward):
    """Implicit process reward of a completion: ``beta * sum_t log(pi(y_t|x, y_<t) / pi_ref(y_t|x, y_<t))`` over
    the completion tokens.

    ``model_path``: the PRM policy (causal LM + tokenizer, e.g. PRIME's EurusPRM); options: :class:`Options`
    (``ref_model_path`` required). Inputs: ``prompt``, ``completion`` (strings); the completion tokens are the
    response mask (with ``chat_template``, the assistant turn up to the end of the completion text: the
    template's end-of-turn tokens are not scored, as in PRIME / verl, unless ``score_end_of_turn``). Extras:
    ``num_completion_tokens``, ``min_token_reward`` (0 for an empty completion). Range: unbounded (higher is
    better).
    """

    inputs = Inputs(("prompt", "completion"))

    class Options(RewardOptions):
        ref_model_path: WeightPath | None = None
        """The reference causal LM ``pi_ref`` (hub id or local directory); required."""
        beta: PositiveNumber = 0.1
        """Scale of the log-ratio (PRIME's ``beta``)."""
        max_length: PositiveInt | None = None
        """Most tokens of prompt + completion; default: the model's position limit."""
        separator: str = ""
        """Text put between the prompt and the completion."""
        chat_template: bool = False
        """Render a user / assistant turn with the tokenizer's chat template instead."""
        score_end_of_turn: bool = False
        """With ``chat_template``: score the template's end-of-turn tokens too."""
        trust_remote_code: bool = False
        """Let transformers run the checkpoint's own code."""

        @model_validator(mode="after")
        def _needs_reference(self) -> ImplicitPRMReward.Options:
            if not self.ref_model_path:
                raise ConfigError(
                    "implicit_prm needs kwargs.ref_model_path: the reference causal LM", field="kwargs.ref_model_path"
                )
            return self

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        if not model_path:  # before the options: a missing model names model_path first
            raise ConfigError(
                "implicit_prm needs model_path: the PRM causal LM (with its tokenizer)", field="model_path"
            )
        super().__init__(model_path, device, dtype, **options)
        opts = self.options
        ref_model_path, trust_remote_code = str(opts.ref_model_path), opts.trust_remote_code
        tokenizer = load_tokenizer(model_path, trust_remote_code)
        policy = HFBackbone.from_pretrained(
            model_path, causal_lm=True, dtype=self.dtype, trust_remote_code=trust_remote_code
        )
        ref = HFBackbone.from_pretrained(
            ref_model_path, causal_lm=True, dtype=self.dtype, trust_remote_code=trust_remote_code
        )
        if ref.vocab_size != policy.vocab_size:
            raise ConfigError(
                f"policy ({policy.vocab_size}) and reference ({ref.vocab_size}) vocabularies differ",
                field="kwargs.ref_model_path",
            )
        self.prm = ImplicitPRM(policy, ref, beta=opts.beta).to(self.device).eval()
        self.encoder = CompletionSpanEncoder(
            tokenizer,
            max_length=opts.max_length or default_max_length(tokenizer, policy.model.config),
            separator=opts.separator,
            chat_template=opts.chat_template,
            score_end_of_turn=opts.score_end_of_turn,
        )

    @torch.no_grad()
    def __call__(self, prompt: Sequence[str], completion: Sequence[str], **_: object) -> RewardOutput:
        batch = self.encoder(prompt, completion, device=self.device)
        out = self.prm(batch.input_ids, batch.attention_mask, batch.response_mask)
        counts = out.mask.sum(-1)
        lowest = out.process_rewards.masked_fill(~out.mask, float("inf")).min(-1).values
        lowest = torch.where(counts > 0, lowest, torch.zeros_like(lowest))
        return RewardOutput(
            out.outcome_rewards.cpu().numpy(),
            extras={"num_completion_tokens": counts.cpu().numpy(), "min_token_reward": lowest.cpu().numpy()},
        )
