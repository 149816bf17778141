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
from typing import Any, Literal

import numpy as np

from ...errors import ConfigError, InputError
from ...shared.audio import prepare_clips
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import Field, PositiveNumber, RewardOptions, field_validator
from .targets import TextKey, target_texts, text_fields

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
    ``metadata[text_key]``; options: :class:`Options`. Range [0, 1]. Extras: ``ratio``, ``expected_seconds``. A text without units is an InputError.
    """

    inputs = Inputs(("audio", "prompt"))

    class Options(RewardOptions):
        unit: Literal["word", "character"] = "word"
        """What is counted in the text: words (whitespace-separated) or characters (letters and digits)."""
        rate: PositiveNumber | None = None
        """Speaking rate in units per second; default 2.5 words (150 a minute, conversational English) or 12.5
        characters."""
        band: tuple[PositiveNumber, PositiveNumber] = Field((0.7, 1.5), strict=False)
        """The tolerance band ``[low, high]`` of ``ratio`` that scores 1 (``low < high``)."""
        text_key: TextKey | None = None
        """A ``metadata`` key holding the target text; default: the ``prompt``."""

        @field_validator("band")
        @classmethod
        def _ordered(cls, band: tuple[float, float]) -> tuple[float, float]:
            if not band[0] < band[1]:
                raise ValueError(f"band must have low < high, got {list(band)!r}")
            return band

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        if model_path is not None:
            raise ConfigError(f"{self.name} is model-free; model_path must be null", field="model_path")
        self.unit = self.options.unit
        self.rate = DEFAULT_RATES[self.unit] if self.options.rate is None else self.options.rate
        self.band = self.options.band
        self.text_key = self.options.text_key
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
