"""Sequence reward models: a scalar or binned head over a token backbone, and its YAML-facing reward.

:class:`SequenceRewardModel` (training side) scores token sequences; :class:`SequenceReward` (registry name
``sequence_reward``) scores ``prompt`` + ``completion`` texts with a model loaded from ``model_path``.
Losses: :func:`mse_loss`, :func:`cross_entropy_loss`, :func:`bradley_terry_loss`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...errors import ConfigError, InputError
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.text.backbones import HFBackbone, TinyTransformer, as_backbone, full_mask, position_ids
from ..models.text.encoding import PairEncoder, default_max_length, load_tokenizer
from ..models.text.lora import add_lora, lora_parameters
from ..options import Field, PositiveInt, RewardOptions

CONFIG_NAME = "rewardzoo_reward.json"
WEIGHTS_NAME = "rewardzoo_reward.safetensors"


# ----------------------------------------------------------------------------------------------- losses
def _check_batch(t: Tensor, what: str) -> None:
    if t.dim() != 1:
        raise InputError(f"{what} must be a 1-D tensor (batch,), got shape {tuple(t.shape)}", field=what)


def mse_loss(rewards: Tensor, labels: Tensor) -> Tensor:
    """``mean((r - y)^2)``; ``labels`` must be a floating tensor shaped like ``rewards`` (B,)."""
    _check_batch(rewards, "rewards")
    labels = torch.as_tensor(labels, device=rewards.device)
    if not labels.is_floating_point():
        raise InputError(
            f"a scalar reward head needs float labels (B,), got dtype {labels.dtype}; integer class "
            "ids belong to a binned head (num_bins > 1)",
            field="labels",
        )
    if tuple(labels.shape) != tuple(rewards.shape):
        raise InputError(
            f"labels have shape {tuple(labels.shape)}, rewards {tuple(rewards.shape)}: a scalar head "
            "takes one float label per sequence, shape (B,)",
            field="labels",
        )
    return F.mse_loss(rewards, labels.to(rewards.dtype))


def cross_entropy_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Cross-entropy of bin ``logits`` (B, K) against class ids (B,) (integer) or probabilities (B, K)."""
    if logits.dim() != 2:
        raise InputError(f"logits must be (batch, bins), got shape {tuple(logits.shape)}", field="logits")
    b, k = logits.shape
    labels = torch.as_tensor(labels, device=logits.device)
    if labels.dtype == torch.bool:
        raise InputError(
            "bool labels are ambiguous; pass integer class ids (B,) or probabilities (B, K)", field="labels"
        )
    if not labels.is_floating_point() and not labels.is_complex():
        if tuple(labels.shape) != (b,):
            raise InputError(
                f"integer class-id labels must have shape ({b},), got {tuple(labels.shape)}", field="labels"
            )
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= k):
            raise InputError(
                f"class ids must lie in [0, {k}), got [{int(labels.min())}, {int(labels.max())}]", field="labels"
            )
        return F.cross_entropy(logits, labels.long())
    if tuple(labels.shape) != (b, k):
        raise InputError(
            f"float labels for a binned head are probabilities of shape ({b}, {k}), got "
            f"{tuple(labels.shape)}; pass integer class ids (B,) for hard labels",
            field="labels",
        )
    probs = labels.to(logits.dtype)
    if bool((probs < 0).any()) or not torch.allclose(probs.sum(-1), torch.ones_like(probs[:, 0]), atol=1e-4):
        raise InputError("probability labels must be non-negative and sum to 1 over the bins", field="labels")
    return F.cross_entropy(logits, probs)


def bradley_terry_loss(
    chosen: Tensor, rejected: Tensor, margin: Tensor | float | None = None, center_coef: float = 0.0
) -> Tensor:
    """``mean(-log sigmoid(r_c - r_r - margin)) + center_coef * mean((r_c + r_r)^2)`` (TRL RewardTrainer)."""
    _check_batch(chosen, "chosen")
    if tuple(rejected.shape) != tuple(chosen.shape):
        raise InputError(
            f"chosen {tuple(chosen.shape)} and rejected {tuple(rejected.shape)} rewards must have the same shape",
            field="rejected",
        )
    diff = chosen - rejected
    if margin is not None:
        m = torch.as_tensor(margin, dtype=diff.dtype, device=diff.device)
        if m.dim() > 0 and tuple(m.shape) != tuple(chosen.shape):
            raise InputError(
                f"margin must be a number or shaped like the rewards {tuple(chosen.shape)}, got {tuple(m.shape)}",
                field="margin",
            )
        diff = diff - m
    loss = -F.logsigmoid(diff).mean()
    if center_coef:
        loss = loss + center_coef * ((chosen + rejected) ** 2).mean()
    return loss


# ------------------------------------------------------------------------------------------------ model
@dataclass
class SequenceRewardOutput:
    """``rewards`` (B,) (the expected bin value for a binned head); ``logits`` (B, K) for a binned head;
    ``bin_ids`` (B,) only when sampling was requested; ``loss`` when labels were given."""

    rewards: Tensor
    logits: Tensor | None = None
    bin_ids: Tensor | None = None
    loss: Tensor | None = None


class SequenceRewardModel(nn.Module):
    """A reward head over a deep copy of a token backbone.

    ``h = backbone(embed(x) + s)`` with ``s`` a learned prompt / response segment embedding (zero at
    init; added only when a prompt indicator is given); ``p = pool(h)`` (``last``: the last real token;
    ``mean``: masked mean over real tokens). Scalar head: ``r = w.p + b``. Binned head (``num_bins=K``):
    ``logits = W p + b`` (B, K), ``r = sum_k softmax(logits)_k * bin_values_k``.

    Inputs: ``input_ids`` (B, n) with ``attention_mask`` (B, n) for padding (left or right); the prompt
    as ``prompt_mask`` (B, n) or ``prompt_lengths`` (B,) (real prompt tokens from the first real token),
    never both. Range: unbounded for a scalar head; [min(bin_values), max(bin_values)] for a binned head.

    The caller's backbone is never mutated. ``dropout`` (optional) sets the rate of every ``nn.Dropout`` of the
    copy. With ``lora_scope`` the copy gets a LoRA scope (``lora_r``, ``lora_alpha``, ``lora_targets``: names
    of the projections; default: the backbone's ``lora_targets``, else common attention projection names) and
    only the LoRA weights, the head and the segment embeddings train (:meth:`trainable_parameters`); otherwise
    the whole copy does. The model is built in eval mode (call ``.train()`` to train), so inference is
    deterministic by default. ``backbone``: a :class:`~rewardzoo.rewards.models.text.backbones.Backbone`, a
    transformers model or a palm-rlhf-pytorch ``PaLM``.
    """

    def __init__(
        self,
        backbone: nn.Module,
        *,
        num_bins: int = 0,
        bin_values: Sequence[float] | Tensor | None = None,
        pooling: str = "last",
        dropout: float | None = None,
        lora_scope: str | None = None,
        lora_r: int = 8,
        lora_alpha: float | None = None,
        lora_targets: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        if pooling not in ("last", "mean"):
            raise ConfigError(f"pooling must be 'last' or 'mean', got {pooling!r}")
        if not isinstance(num_bins, int) or num_bins < 0 or num_bins == 1:
            raise ConfigError(f"num_bins must be 0 (scalar head) or an integer >= 2, got {num_bins!r}")
        self.backbone = as_backbone(copy.deepcopy(backbone))
        if dropout is not None:
            for module in self.backbone.modules():
                if isinstance(module, nn.Dropout):
                    module.p = float(dropout)
        self.pooling, self.num_bins = pooling, num_bins
        self.lora_scope = lora_scope
        self.lora_config = None
        if lora_scope is not None:
            if lora_targets is None:  # the backbone's own default (e.g. PaLM's fused projections), else common names
                lora_targets = getattr(self.backbone, "lora_targets", None)
            targets = add_lora(self.backbone, lora_scope, r=lora_r, alpha=lora_alpha, targets=lora_targets)
            self.lora_config = {
                "scope": lora_scope,
                "r": lora_r,
                "alpha": lora_alpha,
                "targets": sorted({t.rsplit(".", 1)[-1] for t in targets}),
            }
        dim = self.backbone.dim
        self.prompt_embed = nn.Parameter(torch.zeros(dim))
        self.response_embed = nn.Parameter(torch.zeros(dim))
        self.head = nn.Linear(dim, num_bins if num_bins else 1)
        if num_bins:
            values = (
                torch.arange(num_bins, dtype=torch.float32)
                if bin_values is None
                else torch.as_tensor(bin_values, dtype=torch.float32)
            )
            if tuple(values.shape) != (num_bins,):
                raise ConfigError(f"bin_values must hold num_bins={num_bins} numbers, got shape {tuple(values.shape)}")
            self.register_buffer("bin_values", values)
        elif bin_values is not None:
            raise ConfigError("bin_values needs a binned head (num_bins >= 2)")
        ref = next(self.backbone.parameters())
        self.to(ref.device)
        if lora_scope is not None:
            trainable = {id(p) for p in self.trainable_parameters()}
            for p in self.parameters():
                p.requires_grad_(id(p) in trainable)
        self.eval()

    # -- parameters
    def trainable_parameters(self) -> Iterator[nn.Parameter]:
        """Head, segment embeddings, and the LoRA scope (with LoRA) or the whole backbone copy (without)."""
        yield from self.head.parameters()
        yield self.prompt_embed
        yield self.response_embed
        if self.lora_scope is not None:
            yield from lora_parameters(self.backbone, self.lora_scope)
        else:
            yield from self.backbone.parameters()

    # -- pieces
    def prompt_indicator(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        prompt_mask: Tensor | None,
        prompt_lengths: Tensor | Sequence[int] | None,
    ) -> Tensor | None:
        """The (B, n) bool prompt mask from either indicator (None when neither is given)."""
        if prompt_mask is not None and prompt_lengths is not None:
            raise InputError("pass either prompt_mask or prompt_lengths, not both", field="prompt_mask/prompt_lengths")
        if prompt_mask is not None:
            prompt_mask = torch.as_tensor(prompt_mask, device=input_ids.device)
            if tuple(prompt_mask.shape) != tuple(input_ids.shape):
                raise InputError(
                    f"prompt_mask has shape {tuple(prompt_mask.shape)}, input_ids {tuple(input_ids.shape)}",
                    field="prompt_mask",
                )
            return prompt_mask.bool() & attention_mask
        if prompt_lengths is not None:
            lengths = torch.as_tensor(prompt_lengths, device=input_ids.device)
            if lengths.is_floating_point() or tuple(lengths.shape) != (input_ids.shape[0],):
                raise InputError(
                    f"prompt_lengths must be integers of shape ({input_ids.shape[0]},), got "
                    f"{tuple(lengths.shape)} {lengths.dtype}",
                    field="prompt_lengths",
                )
            real = attention_mask.sum(-1)
            if bool((lengths < 0).any()) or bool((lengths > real).any()):
                raise InputError("prompt_lengths must lie in [0, number of real tokens]", field="prompt_lengths")
            return (position_ids(attention_mask) < lengths[:, None]) & attention_mask
        return None

    def pool(self, hidden: Tensor, attention_mask: Tensor) -> Tensor:
        """(B, d) pooled hidden states: last real token, or masked mean over real tokens."""
        if self.pooling == "mean":
            weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
            return (hidden * weights).sum(1) / weights.sum(1)
        positions = torch.arange(hidden.shape[1], device=hidden.device)
        last = (positions * attention_mask.long()).argmax(-1)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        prompt_mask: Tensor | None = None,
        prompt_lengths: Tensor | Sequence[int] | None = None,
        labels: Tensor | None = None,
        sample_bins: bool = False,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> SequenceRewardOutput:
        mask = full_mask(input_ids, attention_mask)
        empty = ~mask.any(-1)
        if bool(empty.any()):
            raise InputError(
                f"sequence(s) {torch.nonzero(empty).flatten().tolist()} have no real tokens", field="attention_mask"
            )
        embeds = self.backbone.embed(input_ids)
        in_prompt = self.prompt_indicator(input_ids, mask, prompt_mask, prompt_lengths)
        if in_prompt is not None:
            segment = torch.where(in_prompt.unsqueeze(-1), self.prompt_embed, self.response_embed)
            embeds = embeds + segment.to(embeds.dtype)
        pooled = self.pool(self.backbone.hidden_states(attention_mask=mask, inputs_embeds=embeds), mask)
        out = self.head(pooled.to(self.head.weight.dtype))
        if not self.num_bins:
            rewards = out.squeeze(-1)
            return SequenceRewardOutput(rewards, loss=None if labels is None else mse_loss(rewards, labels))
        rewards = out.float().softmax(-1) @ self.bin_values.float()
        bin_ids = self.sample_bins(out, temperature, generator) if sample_bins else None
        loss = None if labels is None else cross_entropy_loss(out, labels)
        return SequenceRewardOutput(rewards, logits=out, bin_ids=bin_ids, loss=loss)

    @staticmethod
    def sample_bins(logits: Tensor, temperature: float = 1.0, generator: torch.Generator | None = None) -> Tensor:
        """Bin ids drawn from ``softmax(logits / temperature)`` (argmax when temperature is 0)."""
        if temperature < 0:
            raise InputError(f"temperature must be >= 0, got {temperature}", field="temperature")
        if temperature == 0:
            return logits.argmax(-1)
        probs = (logits.detach().float() / temperature).softmax(-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    @torch.no_grad()
    def score(self, input_ids: Tensor, attention_mask: Tensor | None = None, **kwargs: Any) -> SequenceRewardOutput:
        """Inference: :meth:`forward` under no_grad with the model in eval mode (its mode is restored)."""
        was_training = self.training
        self.eval()
        try:
            return self(input_ids, attention_mask, **kwargs)
        finally:
            self.train(was_training)

    mse = staticmethod(mse_loss)
    cross_entropy = staticmethod(cross_entropy_loss)
    bradley_terry = staticmethod(bradley_terry_loss)

    # -- persistence
    def save_pretrained(self, directory: str | Path, tokenizer: Any = None) -> None:
        """Write ``rewardzoo_reward.json`` + ``rewardzoo_reward.safetensors`` (+ the HF config / tokenizer)."""
        from safetensors.torch import save_model

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        bb = self.backbone
        if isinstance(bb, HFBackbone):
            bb.model.config.save_pretrained(directory)
            backbone = {"type": "hf", "causal_lm": bb.is_causal_lm}
        elif isinstance(bb, TinyTransformer):
            backbone = {"type": "tiny", **bb.config}
        else:
            raise ConfigError(f"cannot save a {type(bb).__name__} backbone (HFBackbone or TinyTransformer only)")
        config = {
            "format": "rewardzoo.sequence_reward",
            "version": 1,
            "num_bins": self.num_bins,
            "bin_values": self.bin_values.tolist() if self.num_bins else None,
            "pooling": self.pooling,
            "lora": self.lora_config,
            "backbone": backbone,
        }
        (directory / CONFIG_NAME).write_text(json.dumps(config, indent=2))
        save_model(self, str(directory / WEIGHTS_NAME))
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)

    @classmethod
    def from_pretrained(cls, directory: str | Path, *, trust_remote_code: bool = False) -> SequenceRewardModel:
        """Rebuild a model written by :meth:`save_pretrained` (weights via safetensors)."""
        from safetensors.torch import load_model

        directory = Path(directory)
        config = json.loads((directory / CONFIG_NAME).read_text())
        if config.get("format") != "rewardzoo.sequence_reward":
            raise ConfigError(f"'{directory / CONFIG_NAME}' is not a rewardzoo sequence reward config")
        spec = dict(config["backbone"])
        kind = spec.pop("type")
        if kind == "hf":
            from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

            hf_config = AutoConfig.from_pretrained(directory, trust_remote_code=trust_remote_code)
            auto = AutoModelForCausalLM if spec.get("causal_lm") else AutoModel
            backbone: nn.Module = HFBackbone(auto.from_config(hf_config, trust_remote_code=trust_remote_code))
        elif kind == "tiny":
            backbone = TinyTransformer(**spec)
        else:
            raise ConfigError(f"unknown backbone type {kind!r} in '{directory / CONFIG_NAME}'")
        lora = config.get("lora") or {}
        model = cls(
            backbone,
            num_bins=config["num_bins"],
            bin_values=config.get("bin_values"),
            pooling=config["pooling"],
            lora_scope=lora.get("scope"),
            lora_r=lora.get("r", 8),
            lora_alpha=lora.get("alpha"),
            lora_targets=lora.get("targets"),
        )
        load_model(model, str(directory / WEIGHTS_NAME), strict=True)
        return model


# --------------------------------------------------------------------------------------- YAML-facing reward
class SequenceReward(PointwiseReward):
    """Reward of a sequence reward model over ``prompt + completion`` tokens.

    ``model_path`` is a local directory or hub id holding a tokenizer and either
    (a) a Hugging Face ``AutoModelForSequenceClassification`` with ``num_labels=1`` (the common published
    form): score = ``logits[:, 0]`` (the model's own pooling, the last non-pad token for decoders); or
    (b) (local directories only) a :class:`SequenceRewardModel` written by ``save_pretrained``
    (``rewardzoo_reward.json``): score =
    its reward with the prompt tokens marked (expected bin value for a binned head).

    Options: :class:`Options`. Inputs: ``prompt``, ``completion`` (strings). Range: unbounded (higher is better).
    """

    inputs = Inputs(("prompt", "completion"))

    class Options(RewardOptions):
        max_length: PositiveInt | None = None
        """Most tokens of prompt + completion; default: the model's position limit."""
        separator: str = ""
        """Text put before the completion."""
        chat_template: bool = False
        """Render a user / assistant turn with the tokenizer's chat template instead."""
        pad_token_id: int | None = Field(None, ge=0)
        """HF classifier form: the id the model pools by; default: its config's, else the tokenizer's pad, else
        EOS."""
        add_special_tokens: bool = True
        """Put the tokenizer's BOS etc. before the prompt; false scores as TRL's own reward-model path, which
        tokenizes the rendered text without them."""
        trust_remote_code: bool = False
        """Let transformers run the checkpoint's own code."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        opts = self.options
        trust_remote_code, pad_token_id = opts.trust_remote_code, opts.pad_token_id
        if not model_path:
            raise ConfigError(
                "sequence_reward needs model_path: a directory or hub id with a reward model and its tokenizer",
                field="model_path",
            )
        tokenizer = load_tokenizer(model_path, trust_remote_code)
        if Path(model_path, CONFIG_NAME).is_file():
            self.model: nn.Module = SequenceRewardModel.from_pretrained(model_path, trust_remote_code=trust_remote_code)
            self.format = "rewardzoo"
            backbone = self.model.backbone
            # the position limit: the HF config's, or the built-in transformer's max_len
            hf_config = (
                backbone.model.config
                if isinstance(backbone, HFBackbone)
                else SimpleNamespace(max_position_embeddings=getattr(backbone, "max_len", None))
            )
            pad = None
        else:
            from transformers import AutoConfig, AutoModelForSequenceClassification

            hf_config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
            if not any(a.endswith("ForSequenceClassification") for a in (hf_config.architectures or [])):
                raise ConfigError(
                    f"'{model_path}' holds neither a rewardzoo sequence reward ({CONFIG_NAME}) nor a "
                    f"*ForSequenceClassification model (architectures: {hf_config.architectures})",
                    field="model_path",
                )
            if hf_config.num_labels != 1:
                raise ConfigError(
                    f"'{model_path}' is a classifier with num_labels={hf_config.num_labels}; a reward "
                    "model has num_labels=1",
                    field="model_path",
                )
            self.model = AutoModelForSequenceClassification.from_pretrained(
                model_path, dtype=self.dtype, trust_remote_code=trust_remote_code
            )
            self.format = "hf"
            # the classifier pools at the last token that is not pad_token_id, so padding must use exactly that id
            pad = next(
                (
                    p
                    for p in (pad_token_id, hf_config.pad_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id)
                    if p is not None
                ),
                None,
            )
            if pad is None:
                raise ConfigError(
                    f"'{model_path}': neither the model config nor the tokenizer defines a pad or EOS "
                    "token; set kwargs.pad_token_id",
                    field="kwargs.pad_token_id",
                )
            self.model.config.pad_token_id = int(pad)
        self.model.to(device=self.device, dtype=self.dtype).eval()
        self.encoder = PairEncoder(
            tokenizer,
            max_length=opts.max_length or default_max_length(tokenizer, hf_config),
            separator=opts.separator,
            chat_template=opts.chat_template,
            pad_token_id=pad,
            add_special_tokens=opts.add_special_tokens,
        )

    @torch.no_grad()
    def __call__(self, prompt: Sequence[str], completion: Sequence[str], **_: object) -> RewardOutput:
        batch = self.encoder(prompt, completion, device=self.device)
        if self.format == "hf":
            scores = self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask.long()).logits[:, 0]
        else:
            scores = self.model(batch.input_ids, batch.attention_mask, prompt_lengths=batch.prompt_lengths).rewards
        return RewardOutput(
            scores.float().cpu().numpy(), extras={"num_tokens": batch.attention_mask.sum(-1).cpu().numpy()}
        )
