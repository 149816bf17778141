"""CLAP score: cosine similarity between an audio clip and its prompt (transformers ``ClapModel``).

Preprocessing, made deterministic for use as a reward:

- mono, resampled to the checkpoint's rate (48 kHz for LAION CLAP);
- exactly ``max_length_s`` seconds (10 s for LAION CLAP): a longer clip is cut to its **first**
  10 s (the feature extractor would take a random crop); a shorter clip is *repeat-padded* as LAION
  does (``repeatpad``: the clip repeated a whole number of times, then zeros up to 10 s);
- the checkpoint's own feature extractor turns that into the log-mel input; ``is_longer`` is False for
  every clip (no clip exceeds 10 s after the crop; the extractor would otherwise flag a random clip).

``mode: retrieval_margin`` scores ``cosine_weight * cos(a, t) + margin_weight * (cos(a, t) - max_j cos(a, n_j))``
over each sample's negative captions ``n_j`` (UniRL's composite CLAP reward; :mod:`.clap_margin`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
import torch
from transformers import ClapModel, ClapProcessor

from ...errors import ConfigError, InputError
from ...shared.audio import prepare_clips
from ..base import Inputs, PointwiseReward, RewardOutput
from ..info import RewardInfo
from ..options import Field, Number, PositiveInt, RewardOptions, field_validator, model_validator
from .clap_margin import margin_scores, negatives_for
from .targets import TextKey

DEFAULT_MODEL = "laion/larger_clap_general"


def fit_length(clip: np.ndarray, length: int) -> np.ndarray:
    """Cut ``clip`` (time,) to its first ``length`` samples, or repeat it whole and zero-pad to ``length``."""
    if clip.shape[0] >= length:
        return clip[:length]
    tiled = np.tile(clip, length // clip.shape[0])
    return np.pad(tiled, (0, length - tiled.shape[0]))


def _embedding(output: Any) -> torch.Tensor:
    """``get_*_features`` return a tensor (transformers 4) or an output with ``pooler_output`` (5)."""
    return output.pooler_output if hasattr(output, "pooler_output") else output


TEXT_MAX_LENGTH = 77  # LAION CLAP's text length (its tokenizer call uses max_length=77); the HF tokenizer allows 512
#: A weight of the retrieval-margin composite: a finite number >= 0 (UniRL refuses negative weights).
Weight = Annotated[Number, Field(ge=0.0)]


class ClapScore(PointwiseReward):
    """Score = ``cos(a, t)`` between the CLAP audio embedding of the clip and the text embedding of the prompt;
    with ``mode: retrieval_margin``, ``cosine_weight * cos(a, t) + margin_weight * (cos(a, t) - max_j cos(a, n_j))``
    over the sample's negative captions (``negatives_key`` of its ``metadata``, ``retrieval_prompts``, or with
    ``batch_negatives`` the other prompts of the call), with extras ``matched_cosine``, ``mismatched_cosine``, ``retrieval_margin``,
    ``retrieval_top1``.

    ``model_path``: a transformers CLAP checkpoint (hub id or local directory with the model and its
    ``ClapProcessor``); default ``laion/larger_clap_general``. Inputs: ``audio`` (any rate and
    channels; mixed to mono, resampled to the checkpoint's rate, fitted to its clip length as the
    module docstring says) and ``prompt``; options: :class:`Options`. Range [-1, 1] (``retrieval_margin``:
    ``[-(cosine_weight + 2 * margin_weight), cosine_weight + 2 * margin_weight]``); higher means a better audio-text
    match.
    """

    inputs = Inputs(("audio", "prompt"), sample_rate=48000)  # the rate is replaced by the checkpoint's
    default_model: ClassVar[str] = DEFAULT_MODEL

    class Options(RewardOptions):
        text_max_length: PositiveInt = TEXT_MAX_LENGTH
        """Prompts are truncated to this many tokens, special tokens included (77: LAION CLAP's)."""
        mode: Literal["cosine", "retrieval_margin"] = "cosine"
        """``cosine``: ``cos(a, t)``. ``retrieval_margin``: UniRL's composite, matched cosine plus the margin over the
        hardest negative caption (UniRL PR #475)."""
        cosine_weight: Weight = 1.0
        """``retrieval_margin``: the weight of the matched cosine (UniRL's ``matched_cosine_weight``; PR #475's
        recipe: 1.0)."""
        margin_weight: Weight = 1.0
        """``retrieval_margin``: the weight of ``cos(a, t) - max_j cos(a, n_j)`` (UniRL's ``retrieval_margin_weight``;
        PR #475's recipe: 1.0)."""
        negatives_key: TextKey | None = None
        """``retrieval_margin``: a ``metadata`` key holding each sample's negative captions (a list of strings;
        UniRL's ``negative_prompts_metadata_key``)."""
        batch_negatives: bool = False
        """``retrieval_margin``: a sample with no negatives of its own (no ``negatives_key`` / ``retrieval_prompts``,
        or its metadata lacks the key) takes the other distinct prompts of the call; its score then depends on the
        batch. Off (UniRL's behaviour): such a sample is an InputError."""
        retrieval_prompts: list[str] = []
        """``retrieval_margin``: a fixed candidate set (UniRL's ``retrieval_prompts``): each prompt must be one of
        them and the others are its negatives. Not with ``negatives_key``."""

        @field_validator("retrieval_prompts")
        @classmethod
        def _stripped(cls, value: list[str]) -> list[str]:
            return [p.strip() for p in value]

        @model_validator(mode="after")
        def _consistent(self) -> ClapScore.Options:
            if self.mode == "cosine":
                if self.negatives_key is not None or self.retrieval_prompts or self.batch_negatives:
                    raise ConfigError(
                        "negatives_key / retrieval_prompts / batch_negatives need mode: retrieval_margin",
                        field="kwargs.mode",
                    )
                return self
            if self.cosine_weight == 0 and self.margin_weight == 0:
                raise ConfigError("at least one of cosine_weight, margin_weight must be positive", field="kwargs")
            cleaned = self.retrieval_prompts
            if cleaned and (len(cleaned) < 2 or "" in cleaned or len(set(cleaned)) != len(cleaned)):
                raise ConfigError(
                    "retrieval_prompts must be at least two distinct non-empty captions",
                    field="kwargs.retrieval_prompts",
                )
            if cleaned and self.negatives_key is not None:
                raise ConfigError(
                    "retrieval_prompts and negatives_key are exclusive (as in UniRL)", field="kwargs.retrieval_prompts"
                )
            return self

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.text_max_length = self.options.text_max_length
        self.mode = self.options.mode
        if self.mode == "retrieval_margin" and self.options.negatives_key is not None:
            self.inputs = replace(self.inputs, fields=("audio", "prompt", "metadata"))
        path = model_path or DEFAULT_MODEL
        self.processor = ClapProcessor.from_pretrained(path)
        self.model = ClapModel.from_pretrained(path, dtype=self.dtype).to(self.device).eval()
        self.hold(self.model)
        extractor = self.processor.feature_extractor
        self.sample_rate = int(extractor.sampling_rate)
        self.inputs = replace(self.inputs, sample_rate=self.sample_rate)
        self.clip_samples = int(extractor.nb_max_samples)

    @property
    def info(self) -> RewardInfo:
        """The card's record; with ``retrieval_margin``, the composite's range."""
        card = self.__dict__.get("_info") or RewardInfo.of_class(type(self))
        if self.__dict__.get("mode") != "retrieval_margin":
            return card
        bound = self.options.cosine_weight + 2 * self.options.margin_weight
        return card.refined({"score_range": (-bound, bound)})

    @info.setter
    def info(self, value: RewardInfo) -> None:
        self.__dict__["_info"] = value

    def audio_embeddings(self, clips: Sequence[np.ndarray]) -> torch.Tensor:
        """L2-normalised audio embeddings ``(N, D)`` of mono clips at ``self.sample_rate``."""
        fitted = [fit_length(c, self.clip_samples) for c in clips]
        feats = self.processor.feature_extractor(fitted, sampling_rate=self.sample_rate, return_tensors="pt")
        is_longer = torch.zeros((len(fitted), 1), dtype=torch.bool, device=self.device)
        with torch.inference_mode():
            out = self.model.get_audio_features(
                input_features=feats["input_features"].to(self.device, self.dtype), is_longer=is_longer
            )
        return torch.nn.functional.normalize(_embedding(out).float(), dim=-1)

    def text_embeddings(self, prompts: Sequence[str]) -> torch.Tensor:
        """L2-normalised text embeddings ``(N, D)``."""
        tokens = self.processor.tokenizer(
            list(prompts), padding=True, truncation=True, max_length=self.text_max_length, return_tensors="pt"
        )
        with torch.inference_mode():
            out = self.model.get_text_features(
                input_ids=tokens["input_ids"].to(self.device), attention_mask=tokens["attention_mask"].to(self.device)
            )
        return torch.nn.functional.normalize(_embedding(out).float(), dim=-1)

    def __call__(
        self,
        audio: Sequence[Any],
        prompt: Sequence[str],
        audio_sample_rate: Sequence[int] | None = None,
        metadata: Sequence[Any] | None = None,
        **_: Any,
    ) -> RewardOutput:
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=self.sample_rate, mono=True)
        prompts = list(prompt)
        if len(prompts) != len(clips):
            raise InputError(f"got {len(clips)} audio clips but {len(prompts)} prompts", field="prompt")
        for i, p in enumerate(prompts):
            if not isinstance(p, str):
                raise InputError(f"expected a string prompt, got {type(p).__name__}", field="prompt", sample=i)
        negatives: list[list[str]] = []
        if self.mode == "retrieval_margin":
            opts = self.options
            negatives = negatives_for(
                prompts, metadata, opts.negatives_key, opts.retrieval_prompts, opts.batch_negatives
            )
        unique = list(dict.fromkeys([*prompts, *(n for row in negatives for n in row)]))
        text = self.text_embeddings(unique)
        position = {p: i for i, p in enumerate(unique)}
        index = torch.tensor([position[p] for p in prompts], device=text.device)
        audio_emb = self.audio_embeddings([c[0] for c in clips])
        matched = (audio_emb * text[index]).sum(dim=-1).clamp(-1.0, 1.0)
        if self.mode == "cosine":
            return matched.cpu().numpy()
        negative_cos = [
            (text[[position[n] for n in row]] @ audio_emb[i]).clamp(-1.0, 1.0) for i, row in enumerate(negatives)
        ]
        parts = margin_scores(matched, negative_cos, self.options.cosine_weight, self.options.margin_weight)
        score = parts.pop("score")
        return RewardOutput(score.cpu().numpy(), {k: v.cpu().numpy() for k, v in parts.items()})
