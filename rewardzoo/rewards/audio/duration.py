"""Speech duration against the text: a guard against truncated and padded TTS output, model-free.

``expected = units(text) / rate``, with ``units`` the words (whitespace-separated) or the characters
(letters and digits) of the target text and ``rate`` the speaking rate in those units per second;
``ratio = seconds / expected``; ``score = min(1, ratio / low, high / ratio)`` for the tolerance band
``[low, high]``: 1 inside the band, falling as ``ratio`` leaves it (``1/2`` at half of ``low`` or twice
``high``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ...errors import ConfigError, InputError
from ...shared.audio import prepare_clips
from ...shared.options import choice, positive_float
from ..base import Inputs, PointwiseReward, RewardOutput
from .targets import check_text_key, target_texts, text_fields

UNITS = ("word", "character")
#: Speaking rates (units per second) used when ``rate`` is not set: 150 words a minute, the usual figure for
#: conversational English, and the ~5 letters of an English word.
DEFAULT_RATES = {"word": 2.5, "character": 12.5}


def text_units(text: str, unit: str) -> int:
    """Words (whitespace-separated) or characters (letters and digits) of ``text``."""
    return len(text.split()) if unit == "word" else sum(ch.isalnum() for ch in text)


def band_score(ratio: np.ndarray, low: float, high: float) -> np.ndarray:
    """``min(1, ratio / low, high / ratio)``: 1 inside ``[low, high]``."""
    ratio = np.asarray(ratio, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.minimum(1.0, np.minimum(ratio / low, np.where(ratio > 0, high / ratio, np.inf)))


class SpeechDurationRatio(PointwiseReward):
    """Score = ``min(1, ratio / low, high / ratio)`` with ``ratio = seconds / (units(text) / rate)``.

    Inputs: ``audio`` (any rate; its length in seconds) and the target text, ``prompt`` or
    ``metadata[text_key]``. Options: ``unit`` (``word`` | ``character``), ``rate`` (units per second;
    default 2.5 words or 12.5 characters), ``band`` ``[low, high]`` (default ``[0.7, 1.5]``), ``text_key``.
    Range [0, 1]. Extras: ``ratio``, ``expected_seconds``. A text without units is an InputError.
    """

    inputs = Inputs(("audio", "prompt"))

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        *,
        unit: str = "word",
        rate: float | None = None,
        band: Sequence[float] = (0.7, 1.5),
        text_key: str | None = None,
    ) -> None:
        super().__init__(model_path, device, dtype)
        if model_path is not None:
            raise ConfigError(f"{self.name} is model-free; model_path must be null", field="model_path")
        self.unit = choice(unit, "kwargs.unit", UNITS)
        self.rate = DEFAULT_RATES[self.unit] if rate is None else positive_float(rate, "kwargs.rate")
        try:
            low, high = (positive_float(b, "kwargs.band") for b in band)
        except (TypeError, ValueError):
            raise ConfigError(f"{self.name} band must be [low, high], got {band!r}", field="kwargs.band") from None
        if not low < high:
            raise ConfigError(f"{self.name} band must have low < high, got {list(band)!r}", field="kwargs.band")
        self.band = (low, high)
        self.text_key = check_text_key(text_key, self.name)
        self.inputs = replace(self.inputs, fields=("audio", *text_fields(self.text_key)))

    def __call__(
        self,
        audio: Sequence[Any],
        audio_sample_rate: Sequence[int] | None = None,
        prompt: Sequence[Any] | None = None,
        metadata: Sequence[Any] | None = None,
        **_: Any,
    ) -> RewardOutput:
        clips, rates = prepare_clips(audio, audio_sample_rate, mono=True)
        texts = target_texts(prompt, metadata, self.text_key, len(clips))
        expected = np.empty(len(clips))
        for i, text in enumerate(texts):
            units = text_units(text, self.unit)
            if units == 0:
                raise InputError(
                    f"the target text has no {self.unit}s to time: {text!r}",
                    field="metadata" if self.text_key else "prompt",
                    sample=i,
                )
            expected[i] = units / self.rate
        seconds = np.asarray([c.shape[1] / r for c, r in zip(clips, rates)])
        ratio = seconds / expected
        return RewardOutput(band_score(ratio, *self.band), extras={"ratio": ratio, "expected_seconds": expected})
