"""Silence padding and long pauses, from the Silero VAD segments of ``speech_presence`` (model-free beyond the
VAD whose weights ship in the silero-vad wheel): a guard against TTS output padded with or broken by silence.

From the speech segments of a clip (silero-vad's ``get_speech_timestamps`` with ``speech_presence``'s
options): ``leading`` = silence before the first segment, ``trailing`` = after the last, ``pauses`` = the
gaps between segments (all in seconds; a clip without speech is one leading silence). The silence beyond
what is allowed, ``excess = max(0, leading - max_edge) + max(0, trailing - max_edge) + sum_g max(0, g -
max_pause)`` (the whole clip when it has no speech), over the clip's duration: ``silence_ratio = excess / seconds``; ``score = 1 - silence_ratio``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..base import RewardOutput
from ..options import Field, Number
from .vad import SAMPLE_RATE, SpeechPresence


def silences(segments: Sequence[dict], num_samples: int, rate: int) -> tuple[float, float, list[float]]:
    """(leading, trailing, internal pauses) in seconds for silero-vad's sorted, disjoint ``segments``."""
    if not segments:
        return num_samples / rate, 0.0, []
    starts = [int(s["start"]) for s in segments]
    ends = [int(s["end"]) for s in segments]
    pauses = [(b - a) / rate for a, b in zip(ends[:-1], starts[1:])]
    return starts[0] / rate, (num_samples - ends[-1]) / rate, pauses


def excess_silence(
    leading: float, trailing: float, pauses: Sequence[float], max_edge: float, max_pause: float
) -> float:
    """Seconds of silence beyond ``max_edge`` at each end and ``max_pause`` per internal pause."""
    return max(0.0, leading - max_edge) + max(0.0, trailing - max_edge) + sum(max(0.0, p - max_pause) for p in pauses)


class SilenceRatio(SpeechPresence):
    """Score = ``1 - excess / seconds``: the share of the clip that is not silence beyond the allowance
    (``max_edge`` seconds at each end, ``max_pause`` per internal pause).

    Inputs: ``audio`` (mixed to mono, resampled to 16 kHz), at least 512 samples at 16 kHz. Options:
    :class:`Options` (the VAD options are ``speech_presence``'s). Range [0, 1]; a clip without speech scores 0. Extras: ``silence_ratio``, ``leading``,
    ``trailing``, ``internal`` (seconds; ``internal`` sums the pauses) and ``longest_pause``.
    """

    class Options(SpeechPresence.Options):
        max_edge: Number = Field(0.3, ge=0)
        """Seconds of silence allowed at each end of the clip."""
        max_pause: Number = Field(0.75, ge=0)
        """Seconds of silence allowed per internal pause."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        self.max_edge, self.max_pause = self.options.max_edge, self.options.max_pause

    def __call__(self, audio: Sequence[Any], audio_sample_rate: Sequence[int] | None = None, **_: Any) -> RewardOutput:
        extras: dict[str, list[float]] = {
            k: [] for k in ("silence_ratio", "leading", "trailing", "internal", "longest_pause")
        }
        for clip, found in zip(*self.speech_segments(audio, audio_sample_rate)):
            leading, trailing, pauses = silences(found, clip.shape[0], SAMPLE_RATE)
            seconds = clip.shape[0] / SAMPLE_RATE
            excess = excess_silence(leading, trailing, pauses, self.max_edge, self.max_pause) if found else seconds
            extras["silence_ratio"].append(excess / seconds)
            extras["leading"].append(leading)
            extras["trailing"].append(trailing)
            extras["internal"].append(sum(pauses))
            extras["longest_pause"].append(max(pauses, default=0.0))
        out = {k: np.asarray(v) for k, v in extras.items()}
        return RewardOutput(np.clip(1.0 - out["silence_ratio"], 0.0, 1.0), extras=out)
