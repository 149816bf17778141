"""CLAP score: cosine similarity between an audio clip and its prompt (transformers ``ClapModel``).

Preprocessing, made deterministic for use as a reward:

- mono, resampled to the checkpoint's rate (48 kHz for LAION CLAP);
- exactly ``max_length_s`` seconds (10 s for LAION CLAP): a longer clip is cut to its **first**
  10 s (the feature extractor would take a random crop); a shorter clip is *repeat-padded* as LAION
  does (``repeatpad``: the clip repeated a whole number of times, then zeros up to 10 s);
- the checkpoint's own feature extractor turns that into the log-mel input; ``is_longer`` is False for
  every clip (no clip exceeds 10 s after the crop; the extractor would otherwise flag a random clip).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import ClapModel, ClapProcessor

from ...errors import InputError
from ...shared.audio import prepare_clips
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import PositiveInt, RewardOptions

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


class ClapScore(PointwiseReward):
    """Score = ``cos(a, t)`` between the CLAP audio embedding of the clip and the text embedding of the prompt.

    ``model_path``: a transformers CLAP checkpoint (hub id or local directory with the model and its
    ``ClapProcessor``); default ``laion/larger_clap_general``. Inputs: ``audio`` (any rate and
    channels; mixed to mono, resampled to the checkpoint's rate, fitted to its clip length as the
    module docstring says) and ``prompt``; options: :class:`Options`. Range [-1, 1]; higher means a better
    audio-text match.
    """

    inputs = Inputs(("audio", "prompt"), sample_rate=48000)  # the rate is replaced by the checkpoint's
    default_model: ClassVar[str] = DEFAULT_MODEL

    class Options(RewardOptions):
        text_max_length: PositiveInt = TEXT_MAX_LENGTH
        """Prompts are truncated to this many tokens, special tokens included (77: LAION CLAP's)."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.text_max_length = self.options.text_max_length
        path = model_path or DEFAULT_MODEL
        self.processor = ClapProcessor.from_pretrained(path)
        self.model = ClapModel.from_pretrained(path, dtype=self.dtype).to(self.device).eval()
        extractor = self.processor.feature_extractor
        self.sample_rate = int(extractor.sampling_rate)
        self.inputs = replace(self.inputs, sample_rate=self.sample_rate)
        self.clip_samples = int(extractor.nb_max_samples)

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
        self, audio: Sequence[Any], prompt: Sequence[str], audio_sample_rate: Sequence[int] | None = None, **_: Any
    ) -> RewardOutput:
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=self.sample_rate, mono=True)
        prompts = list(prompt)
        if len(prompts) != len(clips):
            raise InputError(f"got {len(clips)} audio clips but {len(prompts)} prompts", field="prompt")
        for i, p in enumerate(prompts):
            if not isinstance(p, str):
                raise InputError(f"expected a string prompt, got {type(p).__name__}", field="prompt", sample=i)
        unique = list(dict.fromkeys(prompts))
        text = self.text_embeddings(unique)
        position = {p: i for i, p in enumerate(unique)}
        index = torch.tensor([position[p] for p in prompts], device=text.device)
        audio_emb = self.audio_embeddings([c[0] for c in clips])
        return (audio_emb * text[index]).sum(dim=-1).clamp(-1.0, 1.0).cpu().numpy()
