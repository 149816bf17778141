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
from ..base import InnerReward, Inputs, PointwiseReward, Reward, RewardOutput
from ..options import Field, Number, PositiveInt, PositiveNumber, RewardOptions
from .asr import ASRAccuracy
from .targets import TextKey, target_texts, text_fields

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
    the square of the length); options: :class:`Options`. Range [0, 1]. Extras: ``repeated`` and ``lag``
    (seconds between the copies that repeat the most; 0 when none do).

    With ``asr``, the transcript's repeated word ``ngram``-grams beyond the target text's (``prompt``, or
    ``metadata[text_key]``) instead; extras ``repeated`` and the text extra ``transcript``.
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

    class Options(RewardOptions):
        min_lag: PositiveNumber = 0.3
        """Shortest lag (seconds) between a frame and the earlier frame it repeats."""
        window: PositiveNumber = 0.4
        """Seconds of frames that must repeat together at one lag to count."""
        threshold: Number = Field(0.8, gt=-1, le=1)
        """Cosine similarity of log-mel frames at or above which a frame repeats another, in (-1, 1]."""
        floor_db: PositiveNumber = 25.0
        """Frames more than this many dB below the clip's loudest are unvoiced and never count."""
        asr: InnerReward = None
        """An ASR reward (``asr_wer``, ``asr_cer``: a registry name or a mapping of entry fields) to score
        repeated words of the transcript instead of repeated frames."""
        ngram: PositiveInt = 2
        """With ``asr``: the word n-gram length counted."""
        text_key: TextKey | None = None
        """With ``asr``: a ``metadata`` key holding the target text; default: the ``prompt``."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        if model_path is not None:
            raise ConfigError(f"{self.name} is model-free; model_path must be null", field="model_path")
        opts = self.options
        self.min_lag = max(1, round(opts.min_lag / FRAME_SECONDS))
        self.window = max(1, round(opts.window / FRAME_SECONDS))
        self.threshold, self.floor_db, self.ngram = opts.threshold, opts.floor_db, opts.ngram
        self.text_key = opts.text_key
        asr: Reward | None = opts.asr
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
