"""Reference-based (intrusive) audio quality: SI-SDR, PESQ and STOI of ``audio`` against ``condition_audio``.

``condition_audio`` is the clean reference of each sample (one clip: a path, or an array/tensor with
``condition_audio_sample_rate``). Both clips are mixed to mono and resampled to the metric's rate
(SI-SDR: the output's own rate, the reference resampled to it when they differ; PESQ: 16 kHz
wide band or 8 kHz narrow band; STOI: 10 kHz, pystoi's internal rate). After resampling both must have
the same number of samples, otherwise an :class:`~rewardzoo.errors.InputError` is raised, unless
``align: trim`` cuts both to the shorter one. A silent clip (peak below :data:`SILENCE_PEAK`) or a
missing reference is an InputError naming the reward's field and sample: these metrics are undefined
there and must not turn into an arbitrary number.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch

from ...errors import InputError
from ...shared.audio import prepare_clips, resample
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import RewardOptions

#: A clip whose peak |sample| is below this (-100 dBFS) counts as silence.
SILENCE_PEAK = 1e-5


def si_sdr(preds: torch.Tensor, target: torch.Tensor, zero_mean: bool = True) -> torch.Tensor:
    """Scale-invariant SDR in dB over the last axis (Le Roux et al. 2019), batched.

    ``alpha = <s_hat, s> / (||s||^2 + eps)``, ``e = s_hat - alpha s``,
    ``SI-SDR = 10 log10((||alpha s||^2 + eps) / (||e||^2 + eps))`` with ``eps`` the dtype's machine
    epsilon (the same stabilisation as torchmetrics); with ``zero_mean`` both signals are centred first.
    Zero-padding both signals of a pair (after centring) leaves the value unchanged.
    """
    eps = torch.finfo(preds.dtype).eps
    if zero_mean:
        preds = preds - preds.mean(dim=-1, keepdim=True)
        target = target - target.mean(dim=-1, keepdim=True)
    alpha = ((preds * target).sum(-1, keepdim=True) + eps) / (target.square().sum(-1, keepdim=True) + eps)
    scaled = alpha * target
    noise = preds - scaled
    return 10.0 * torch.log10((scaled.square().sum(-1) + eps) / (noise.square().sum(-1) + eps))


class _ReferenceReward(PointwiseReward):
    """Shared pairing of ``audio`` with its ``condition_audio`` reference (see the module docstring)."""

    inputs = Inputs(("audio", "condition_audio"))
    #: Shortest clip (seconds, at the metric's rate) the metric is defined for.
    min_seconds: float = 0.0

    class Options(RewardOptions):
        align: Literal["error", "trim"] = "error"
        """Clips of different lengths: ``error`` refuses the pair (an InputError), ``trim`` cuts both to the
        shorter."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.align = self.options.align

    def pairs(
        self,
        audio: Sequence[Any],
        audio_sample_rate: Sequence[int] | None,
        condition_audio: Sequence[Any] | None,
        condition_audio_sample_rate: Sequence[int] | None,
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
        """Mono float32 ``(time,)`` outputs and references at a common rate, checked and aligned."""
        target = self.inputs.sample_rate
        clips, rates = prepare_clips(audio, audio_sample_rate, target_rate=target, mono=True)
        if condition_audio is None:
            raise InputError("needs condition_audio (the clean reference clip)", field="condition_audio")
        if len(list(condition_audio)) != len(clips):
            raise InputError(
                f"got {len(clips)} audio clips but {len(list(condition_audio))} condition_audio clips",
                field="condition_audio",
            )
        refs, ref_rates = prepare_clips(
            condition_audio, condition_audio_sample_rate, target_rate=target, mono=True, field="condition_audio"
        )
        outs, cleans = [], []
        for i, (clip, rate, ref, ref_rate) in enumerate(zip(clips, rates, refs, ref_rates)):
            if ref_rate != rate:
                ref = resample(ref, ref_rate, rate)
            x, s = clip[0], ref[0]
            if x.shape[0] != s.shape[0]:
                if self.align != "trim":
                    raise InputError(
                        f"audio has {x.shape[0]} samples but condition_audio {s.shape[0]} at {rate} Hz "
                        f"({x.shape[0] / rate:.3f} s vs {s.shape[0] / rate:.3f} s); give clips of equal "
                        "length or set `kwargs: {align: trim}`",
                        field="audio",
                        sample=i,
                    )
                n = min(x.shape[0], s.shape[0])
                x, s = x[:n], s[:n]
            if x.shape[0] < self.min_seconds * rate:
                raise InputError(
                    f"needs at least {self.min_seconds:g} s of audio, got {x.shape[0] / rate:.3f} s",
                    field="audio",
                    sample=i,
                )
            for fld, sig in (("audio", x), ("condition_audio", s)):
                if float(np.abs(sig).max()) < SILENCE_PEAK:
                    raise InputError(
                        f"{fld} is silent (peak below {SILENCE_PEAK:g}); the metric is undefined", field=fld, sample=i
                    )
            outs.append(x)
            cleans.append(s)
        return outs, cleans, rates

    def __call__(
        self,
        audio: Sequence[Any],
        audio_sample_rate: Sequence[int] | None = None,
        condition_audio: Sequence[Any] | None = None,
        condition_audio_sample_rate: Sequence[int] | None = None,
        **_: Any,
    ) -> RewardOutput:
        outs, refs, rates = self.pairs(audio, audio_sample_rate, condition_audio, condition_audio_sample_rate)
        return RewardOutput(self.score_pairs(outs, refs, rates))

    def score_pairs(self, outs: list[np.ndarray], refs: list[np.ndarray], rates: list[int]) -> np.ndarray:
        """Scores of checked, aligned (output, reference) pairs; by default one pair at a time."""
        return np.asarray([self.score_pair(x, s, rate, i) for i, (x, s, rate) in enumerate(zip(outs, refs, rates))])

    def score_pair(self, x: np.ndarray, s: np.ndarray, rate: int, index: int) -> float:
        """The metric of one output ``x`` against its reference ``s`` (sample ``index`` of the call)."""
        raise NotImplementedError


class SISDR(_ReferenceReward):
    """Score = SI-SDR in dB of ``audio`` against ``condition_audio`` (:func:`si_sdr`, zero-mean).

    Inputs: ``audio`` and ``condition_audio`` at any rate (the reference is resampled to the output's
    rate), equal lengths unless ``align: trim``. Range (-inf, inf) dB, above 150 dB for a perfect copy
    (the float64 epsilon bounds it). Computed in float64 on the reward's device, clips zero-padded
    into one batch.
    """

    def score_pairs(self, outs: list[np.ndarray], refs: list[np.ndarray], rates: list[int]) -> np.ndarray:
        length = max(x.shape[0] for x in outs)
        preds = torch.zeros(len(outs), length, dtype=torch.float64)
        target = torch.zeros_like(preds)
        for i, (x, s) in enumerate(zip(outs, refs)):  # centre each clip, then pad: padding adds nothing
            preds[i, : x.shape[0]] = torch.from_numpy(x.astype(np.float64) - x.astype(np.float64).mean())
            target[i, : s.shape[0]] = torch.from_numpy(s.astype(np.float64) - s.astype(np.float64).mean())
        with torch.inference_mode():
            scores = si_sdr(preds.to(self.device), target.to(self.device), zero_mean=False).cpu()
        return scores.numpy()


PESQ_MODES = {"wb": 16000, "nb": 8000}


class PESQ(_ReferenceReward):
    """Score = PESQ MOS-LQO (ITU-T P.862.2 wide band, or P.862 / P.862.1 narrow band) from the ``pesq``
    package, ``pesq(rate, reference, audio, mode)``.

    Inputs: ``audio`` and ``condition_audio`` (clean reference), at least 0.25 s, equal lengths unless
    ``align: trim``; options: :class:`Options`. Range about [1, 4.64] (wb) / [1, 4.55] (nb); declared [0.999, 5.0], the bounds of the
    MOS-LQO mapping.
    """

    inputs = Inputs(("audio", "condition_audio"), sample_rate=16000)
    min_seconds = 0.25

    class Options(_ReferenceReward.Options):
        mode: Literal["wb", "nb"] = "wb"
        """``wb``: wide band, 16 kHz (P.862.2); ``nb``: narrow band, 8 kHz (P.862 / P.862.1). Both clips are
        resampled to that rate."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        import pesq  # noqa: F401  (fail at load time when the package is missing)

        mode = self.mode = self.options.mode
        self.inputs = Inputs(("audio", "condition_audio"), sample_rate=PESQ_MODES[mode])

    def score_pair(self, x: np.ndarray, s: np.ndarray, rate: int, index: int) -> float:
        import pesq

        try:
            return float(pesq.pesq(rate, s.astype(np.float64), x.astype(np.float64), self.mode))
        except pesq.PesqError as exc:
            raise InputError(
                f"PESQ cannot score this pair: {type(exc).__name__}: {exc}", field="audio", sample=index
            ) from None


STOI_RATE = 10000  # pystoi's internal rate


class STOI(_ReferenceReward):
    """Score = STOI (Taal et al. 2011), or extended STOI (Jensen & Taal 2016) with ``extended: true``,
    from ``pystoi.stoi(reference, audio, 10000)``.

    Inputs: ``audio`` and ``condition_audio`` resampled to 10 kHz (pystoi's own rate, so it does not
    resample again), equal lengths unless ``align: trim``. pystoi drops silent frames (40 dB below the
    loudest); fewer than 30 frames left (about 0.4 s of active signal) is an InputError. Options:
    :class:`Options`. Range [-1, 1] (in practice 0-1; higher is more intelligible).
    """

    inputs = Inputs(("audio", "condition_audio"), sample_rate=STOI_RATE)
    min_seconds = 0.4

    class Options(_ReferenceReward.Options):
        extended: bool = False
        """Extended STOI (Jensen & Taal 2016) instead of STOI."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        import pystoi  # noqa: F401

        self.extended = self.options.extended

    def score_pair(self, x: np.ndarray, s: np.ndarray, rate: int, index: int) -> float:
        from pystoi import stoi

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = float(stoi(s.astype(np.float64), x.astype(np.float64), rate, extended=self.extended))
        if any("Not enough STFT frames" in str(w.message) for w in caught) or not np.isfinite(value):
            raise InputError(
                "STOI needs at least 30 frames (about 0.4 s) of non-silent reference signal",
                field="audio",
                sample=index,
            )
        return value
