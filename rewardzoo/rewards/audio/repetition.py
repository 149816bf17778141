"""Repetition (loops) in generated speech, model-free: self-similarity of log-mel frames.

A TTS model that loops says a stretch of audio again; the later copy's frames then match the earlier
ones at a constant lag. Per clip (16 kHz mono): log-mel frames ``X`` (torchaudio ``MelSpectrogram``,
``n_fft`` 512, hop 320 = 20 ms, 64 mels, power 2, in dB with a 1e-10 floor); voiced frames are those whose
energy (dB of the summed mel power) is within ``floor_db`` (25) of the clip's loudest frame. The voiced frames'
mean is subtracted per mel bin and each frame scaled to unit norm, so ``S[t, u]`` is the cosine of frames
``t`` and ``u``. For each lag ``L >= min_lag`` (0.3 s), ``d_L(t) = S[t, t + L]`` (0 unless both frames are
voiced), averaged over ``window`` (0.4 s) consecutive frames; where that mean is at least ``threshold``
(0.8), the window's frames at ``t + L`` are repeats. ``repeated = |repeat frames & voiced| / |voiced|``;
``score = 1 - repeated``.

With ``asr`` (an ASR reward entry, e.g. ``asr: asr_wer``: the loader builds it like any entry, so it is the
very instance an ``asr_wer`` stream of the same model uses) the transcript is measured instead: with
``hyp`` and ``ref`` the word ``ngram``-grams (default 2) of the normalised transcript and target text,
``repeated = sum_g max(0, count_hyp(g) - max(1, count_ref(g))) / |hyp|`` (the n-gram occurrences beyond what
the text itself repeats), ``score = 1 - repeated``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from ...errors import ConfigError
from ...shared.audio import prepare_clips
from ...shared.options import positive_float, positive_int
from ..base import Inputs, PointwiseReward, Reward, RewardOutput
from .asr import ASRAccuracy
from .targets import check_text_key, target_texts, text_fields

SAMPLE_RATE = 16000
N_FFT, HOP, N_MELS = 512, 320, 64
FRAME_SECONDS = HOP / SAMPLE_RATE


def log_mel(clip: np.ndarray) -> np.ndarray:
    """(frames, 64) log-mel power in dB of a 16 kHz mono clip ``(time,)``."""
    from torchaudio.transforms import MelSpectrogram

    mel = MelSpectrogram(sample_rate=SAMPLE_RATE, n_fft=N_FFT, hop_length=HOP, n_mels=N_MELS, power=2.0)
    with torch.inference_mode():
        power = mel(torch.from_numpy(np.array(clip, dtype=np.float32))).T.double().numpy()
    return 10.0 * np.log10(power + 1e-10)


def voiced_frames(power_db: np.ndarray, floor_db: float) -> np.ndarray:
    """Frames whose energy (dB of the summed mel power) is within ``floor_db`` of the loudest frame."""
    energy = 10.0 * np.log10(np.sum(10.0 ** (power_db / 10.0), axis=1))
    return energy >= energy.max() - floor_db


def repeated_fraction(
    power_db: np.ndarray, voiced: np.ndarray, min_lag: int, window: int, threshold: float
) -> tuple[float, int]:
    """(share of voiced frames that repeat earlier ones, the lag in frames that found the most; 0 if none)."""
    n = power_db.shape[0]
    if not voiced.any() or n < min_lag + window:
        return 0.0, 0
    x = power_db - power_db[voiced].mean(axis=0)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    sim = x @ x.T
    repeat = np.zeros(n, dtype=bool)
    best, best_lag = 0, 0
    kernel = np.full(window, 1.0 / window)
    for lag in range(min_lag, n - window + 1):
        d = np.where(voiced[: n - lag] & voiced[lag:], np.diagonal(sim, lag), 0.0)
        hits = np.flatnonzero(np.convolve(d, kernel, mode="valid") >= threshold)
        if hits.size == 0:
            continue
        marks = np.zeros(n + 1)
        np.add.at(marks, hits + lag, 1)
        np.add.at(marks, hits + lag + window, -1)
        found = np.cumsum(marks)[:n] > 0
        if found.sum() > best:
            best, best_lag = int(found.sum()), lag
        repeat |= found
    return float((repeat & voiced).sum() / voiced.sum()), best_lag


def repeated_ngrams(hypothesis: Sequence[str], reference: Sequence[str], n: int) -> float:
    """Share of the word n-grams of ``hypothesis`` that occur more often than in ``reference`` (at least once)."""

    def grams(words: Sequence[str]) -> Counter:
        return Counter(tuple(words[k : k + n]) for k in range(len(words) - n + 1))

    hyp, ref = grams(hypothesis), grams(reference)
    total = sum(hyp.values())
    return sum(max(0, c - max(1, ref[g])) for g, c in hyp.items()) / total if total else 0.0


class Repetition(PointwiseReward):
    """Score = ``1 - repeated``, the share of voiced log-mel frames that repeat earlier frames at a constant lag.

    Inputs: ``audio`` (mixed to mono, resampled to 16 kHz; up to 60 s, the frame similarity matrix grows with
    the square of the length). Options: ``min_lag`` (seconds, 0.3), ``window`` (seconds, 0.4), ``threshold``
    (cosine, 0.8), ``floor_db`` (25). Range [0, 1]. Extras: ``repeated`` and ``lag`` (seconds between the
    copies that repeat the most; 0 when none do).

    With ``asr`` (an ASR reward: a registry name such as ``asr_wer`` or a mapping of entry fields), the
    transcript's repeated word ``ngram``-grams beyond the target text's (``prompt``, or ``metadata[text_key]``)
    instead; extras ``repeated`` and the text extra ``transcript``.
    """

    inputs = Inputs(("audio",), sample_rate=SAMPLE_RATE, max_seconds=60.0)

    @classmethod
    def inner_rewards(
        cls, kwargs: dict[str, Any], *, model_path: str | None, device: str, dtype: str
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The ``asr`` option as a reward entry (inheriting this entry's device and dtype)."""
        asr = kwargs.pop("asr", None)
        if asr is None:
            return kwargs, {}
        if not isinstance(asr, (str, Mapping)):
            raise ConfigError(
                f"repetition: 'asr' must be a reward name or a mapping, got {type(asr).__name__}", field="kwargs.asr"
            )
        entry = {"reward_model": asr} if isinstance(asr, str) else dict(asr)
        entry.setdefault("device", device)
        entry.setdefault("dtype", dtype)
        return kwargs, {"asr": entry}

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        *,
        min_lag: float = 0.3,
        window: float = 0.4,
        threshold: float = 0.8,
        floor_db: float = 25.0,
        asr: Reward | None = None,
        ngram: int = 2,
        text_key: str | None = None,
    ) -> None:
        super().__init__(model_path, device, dtype)
        if model_path is not None:
            raise ConfigError(f"{self.name} is model-free; model_path must be null", field="model_path")
        self.min_lag = max(1, round(positive_float(min_lag, "kwargs.min_lag") / FRAME_SECONDS))
        self.window = max(1, round(positive_float(window, "kwargs.window") / FRAME_SECONDS))
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not -1.0 < threshold <= 1.0:
            raise ConfigError(
                f"{self.name} threshold must be a cosine in (-1, 1], got {threshold!r}", field="kwargs.threshold"
            )
        self.threshold = float(threshold)
        self.floor_db = positive_float(floor_db, "kwargs.floor_db")
        self.ngram = positive_int(ngram, "kwargs.ngram")
        self.text_key = check_text_key(text_key, self.name)
        self.asr: ASRAccuracy | None = None
        if asr is not None:
            if not isinstance(asr, ASRAccuracy):
                raise ConfigError(
                    f"{self.name}: 'asr' must be an ASR reward (asr_wer, asr_cer), got '{asr.name}'", field="kwargs.asr"
                )
            self.asr = asr
            self.inputs = replace(
                self.inputs,
                fields=("audio", *text_fields(self.text_key)),
                sample_rate=asr.inputs.sample_rate,
                max_seconds=asr.inputs.max_seconds,
            )
            self.thread_safe = asr.thread_safe

    def __call__(
        self, audio: Sequence[Any], audio_sample_rate: Sequence[int] | None = None, **fields: Any
    ) -> RewardOutput:
        if self.asr is not None:
            return self._transcript_repeats(
                self.asr, audio, audio_sample_rate, fields.get("prompt"), fields.get("metadata")
            )
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=SAMPLE_RATE, mono=True)
        repeated, lags = [], []
        for clip in clips:
            power_db = log_mel(clip[0])
            share, lag = repeated_fraction(
                power_db, voiced_frames(power_db, self.floor_db), self.min_lag, self.window, self.threshold
            )
            repeated.append(share)
            lags.append(lag * FRAME_SECONDS)
        repeated_arr = np.asarray(repeated)
        return RewardOutput(1.0 - repeated_arr, extras={"repeated": repeated_arr, "lag": np.asarray(lags)})

    def _transcript_repeats(
        self,
        asr: ASRAccuracy,
        audio: Sequence[Any],
        audio_sample_rate: Sequence[int] | None,
        prompt: Sequence[Any] | None,
        metadata: Sequence[Any] | None,
    ) -> RewardOutput:
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=asr.inputs.sample_rate, mono=True)
        targets = target_texts(prompt, metadata, self.text_key, len(clips))
        transcripts = asr.transcribe_voiced([c[0] for c in clips])
        repeated = np.asarray(
            [
                repeated_ngrams(asr.normalize(h).split(), asr.normalize(t).split(), self.ngram)
                for h, t in zip(transcripts, targets)
            ]
        )
        return RewardOutput(1.0 - repeated, extras={"repeated": repeated, "transcript": transcripts})
