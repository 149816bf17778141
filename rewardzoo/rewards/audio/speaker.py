"""Speaker similarity: cosine between x-vector speaker embeddings (transformers' ``WavLMForXVector``).

``score = cos(E(audio), E(condition_audio))`` where ``E`` is the checkpoint's ``embeddings`` output
(the x-vector head after statistics pooling), computed from the checkpoint's own feature extractor on
mono audio at the checkpoint's rate (16 kHz for ``microsoft/wavlm-base-plus-sv``). Clips of equal
length are batched together; clips of different lengths run in separate forwards, because the WavLM
convolutional front end normalises over the whole (padded) input, so padding would change the
embedding of the shorter clip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from ...errors import InputError
from ...shared.audio import prepare_clips
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import PositiveInt, RewardOptions

DEFAULT_MODEL = "microsoft/wavlm-base-plus-sv"
#: A clip whose peak |sample| is below this (-100 dBFS) counts as silence (no speaker to compare).
SILENCE_PEAK = 1e-5


class SpeakerSimilarity(PointwiseReward):
    """Score = ``cos(E(audio), E(condition_audio))`` of WavLM x-vector speaker embeddings.

    ``model_path``: a ``WavLMForXVector`` checkpoint with its feature extractor (hub id or local dir);
    default ``microsoft/wavlm-base-plus-sv``. Inputs: ``audio`` and ``condition_audio`` (the reference
    speaker's clip), mixed to mono and resampled to the checkpoint's rate; each at least as long as the
    x-vector TDNN's receptive field (:attr:`min_samples`); options: :class:`Options`. Range [-1, 1]; identical
    clips score 1.
    """

    inputs = Inputs(("audio", "condition_audio"), sample_rate=16000, max_seconds=600.0)

    class Options(RewardOptions):
        max_batch: PositiveInt = 16
        """Most clips per forward pass."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        from transformers import AutoFeatureExtractor, WavLMForXVector

        path = model_path or DEFAULT_MODEL
        self.extractor = AutoFeatureExtractor.from_pretrained(path)
        self.model = WavLMForXVector.from_pretrained(path, dtype=self.dtype).to(self.device).eval()
        self.sample_rate = int(self.extractor.sampling_rate)
        self.inputs = replace(self.inputs, sample_rate=self.sample_rate)
        self.max_batch = self.options.max_batch
        cfg = self.model.config
        frames = 1 + sum((k - 1) * d for k, d in zip(cfg.tdnn_kernel, cfg.tdnn_dilation))
        self.min_samples = self._samples_for_frames(frames)

    def _samples_for_frames(self, frames: int) -> int:
        """The fewest input samples whose conv front end yields ``frames`` frames."""
        lo, hi = 1, 1 << 22
        while lo < hi:
            mid = (lo + hi) // 2
            got = int(self.model._get_feat_extract_output_lengths(torch.tensor(mid)))
            lo, hi = (mid + 1, hi) if got < frames else (lo, mid)
        return lo

    def embed(self, clips: Sequence[np.ndarray]) -> torch.Tensor:
        """Speaker embeddings ``(N, D)`` (float32, CPU) of mono clips ``(time,)`` at the checkpoint's rate."""
        out = torch.empty(len(clips), self.model.config.xvector_output_dim)
        by_length: dict[int, list[int]] = {}
        for i, c in enumerate(clips):
            by_length.setdefault(c.shape[0], []).append(i)
        with torch.inference_mode():
            for members in by_length.values():
                for first in range(0, len(members), self.max_batch):
                    part = members[first : first + self.max_batch]
                    feats = self.extractor(
                        [clips[i] for i in part], sampling_rate=self.sample_rate, return_tensors="pt"
                    )
                    values = feats["input_values"].to(self.device, self.dtype)
                    out[part] = self.model(input_values=values).embeddings.float().cpu()
        return out

    def __call__(
        self,
        audio: Sequence[Any],
        audio_sample_rate: Sequence[int] | None = None,
        condition_audio: Sequence[Any] | None = None,
        condition_audio_sample_rate: Sequence[int] | None = None,
        **_: Any,
    ) -> RewardOutput:
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=self.sample_rate, mono=True)
        if condition_audio is None or len(list(condition_audio)) != len(clips):
            raise InputError(
                "needs one condition_audio clip (the reference speaker) per audio clip", field="condition_audio"
            )
        refs, _ref_rates = prepare_clips(
            condition_audio,
            condition_audio_sample_rate,
            target_rate=self.sample_rate,
            mono=True,
            field="condition_audio",
        )
        for fld, group in (("audio", clips), ("condition_audio", refs)):
            for i, c in enumerate(group):
                if c.shape[1] < self.min_samples:
                    raise InputError(
                        f"speaker_similarity needs at least {self.min_samples} samples "
                        f"({self.min_samples / self.sample_rate:.3f} s) per clip; got {c.shape[1]}",
                        field=fld,
                        sample=i,
                    )
                if float(np.abs(c).max()) < SILENCE_PEAK:
                    raise InputError(
                        f"{fld} is silent (peak below {SILENCE_PEAK:g}): no speaker to compare", field=fld, sample=i
                    )
        emb = self.embed([c[0] for c in clips] + [r[0] for r in refs])
        n = len(clips)
        cos = torch.nn.functional.cosine_similarity(emb[:n].double(), emb[n:].double(), dim=-1)
        return RewardOutput(cos.clamp(-1.0, 1.0).numpy())
