"""Speech presence from Silero VAD (real weights shipped in the ``silero-vad`` wheel, MIT).

Per clip (16 kHz mono): Silero's speech probability for every 512-sample window (the last one
zero-padded), computed for all clips of a call in one batch (the model keeps a state per batch row, so
each row sees only its own clip; rows of shorter clips are padded after their end, which cannot
change their earlier windows); then silero-vad's own ``get_speech_timestamps_from_probs`` turns the
probabilities into speech segments with the configured thresholds, exactly as
``get_speech_timestamps`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ...errors import ConfigError, InputError
from ...shared.audio import prepare_clips
from ...shared.checkpoints import Checkpoint, package_file
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import Field, Number, RewardOptions

SAMPLE_RATE = 16000
WINDOW = 512
#: the model file ``silero_vad.load_silero_vad(onnx=False)`` loads from the wheel's ``data`` folder
SILERO_FILE = "silero_vad.jit"


def presence(segments: Sequence[dict], num_samples: int, rate: int) -> tuple[float, float]:
    """(fraction of samples inside speech segments, longest gap without speech in seconds).

    ``segments`` are silero-vad's ``{"start", "end"}`` sample indices, sorted and disjoint; the gaps
    include the lead-in before the first and the tail after the last segment (the whole clip when
    there is none).
    """
    speech = sum(int(s["end"]) - int(s["start"]) for s in segments)
    edges = [0] + [v for s in segments for v in (int(s["start"]), int(s["end"]))] + [num_samples]
    gaps = [edges[k + 1] - edges[k] for k in range(0, len(edges), 2)]
    return speech / num_samples, max(gaps) / rate


class SpeechPresence(PointwiseReward):
    """Score = fraction of the clip that Silero VAD marks as speech, ``sum(end - start) / len``.

    Inputs: ``audio`` (mixed to mono, resampled to 16 kHz), at least 512 samples at 16 kHz (32 ms).
    Options: :class:`Options` (passed to silero-vad). Range [0, 1]; silence scores 0 (a
    valid answer, not an error). Extra: ``longest_silence`` (seconds, the longest gap without speech,
    lead-in and tail included).
    """

    inputs = Inputs(("audio",), sample_rate=SAMPLE_RATE, max_seconds=600.0)
    thread_safe = False  # the model keeps its recurrent state between windows

    class Options(RewardOptions):
        threshold: Number = Field(0.5, gt=0, lt=1)
        """Silero speech probability above which a window is speech, in (0, 1)."""
        min_speech_duration_ms: int = Field(250, ge=0)
        """Speech segments shorter than this (ms) are dropped."""
        min_silence_duration_ms: int = Field(100, ge=0)
        """Silence shorter than this (ms) does not end a speech segment."""
        speech_pad_ms: int = Field(30, ge=0)
        """Each speech segment is padded by this many ms on both sides."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        opts = self.options
        if model_path is not None:
            raise ConfigError(
                "speech_presence uses the Silero VAD weights of the silero-vad wheel; model_path must be null",
                field="model_path",
            )
        import warnings

        from silero_vad import load_silero_vad

        with warnings.catch_warnings():  # the wheel loads its file with torch.jit.load, which torch 2.9+ deprecates
            warnings.filterwarnings("ignore", r"`torch\.jit\.load` is deprecated", FutureWarning)
            self.model = load_silero_vad(onnx=False)
        self.hold(self.model)  # the wheel's TorchScript file: a drop keeps it in the private file
        self.vad_settings = dict(
            threshold=opts.threshold,
            min_speech_duration_ms=opts.min_speech_duration_ms,
            min_silence_duration_ms=opts.min_silence_duration_ms,
            speech_pad_ms=opts.speech_pad_ms,
        )

    @classmethod
    def weight_files(cls, model_path: str | None, kwargs: Mapping[str, Any]) -> list[Checkpoint]:
        """The TorchScript file ``load_silero_vad(onnx=False)`` loads: the wheel's ``data/silero_vad.jit``."""
        return [package_file("silero_vad", "data", SILERO_FILE)]

    def probabilities(self, clips: Sequence[np.ndarray]) -> list[list[float]]:
        """Silero speech probability per 512-sample window of each 16 kHz clip ``(time,)``, batched."""
        counts = [-(-c.shape[0] // WINDOW) for c in clips]
        batch = torch.zeros(len(clips), max(counts) * WINDOW)
        for i, c in enumerate(clips):
            batch[i, : c.shape[0]] = torch.from_numpy(np.array(c, dtype=np.float32))  # a writable copy
        self.model.reset_states()
        probs = []
        with torch.inference_mode():
            for k in range(max(counts)):
                probs.append(self.model(batch[:, k * WINDOW : (k + 1) * WINDOW], SAMPLE_RATE)[:, 0])
        table = torch.stack(probs, dim=1).tolist()
        return [row[:n] for row, n in zip(table, counts)]

    def speech_segments(
        self, audio: Sequence[Any], audio_sample_rate: Sequence[int] | None = None
    ) -> tuple[list[np.ndarray], list[list[dict]]]:
        """The 16 kHz mono clips ``(time,)`` of a call and silero-vad's speech segments of each
        (``{"start", "end"}`` sample indices), from ``get_speech_timestamps_from_probs`` with this reward's options."""
        from silero_vad import get_speech_timestamps_from_probs

        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=SAMPLE_RATE, mono=True)
        for i, clip in enumerate(clips):
            if clip.shape[1] < WINDOW:
                raise InputError(
                    f"{self.name} needs at least {WINDOW} samples at 16 kHz ({WINDOW / SAMPLE_RATE * 1000:.0f}"
                    f" ms, one Silero window); got {clip.shape[1]}",
                    field="audio",
                    sample=i,
                )
        mono = [c[0] for c in clips]
        segments = [
            get_speech_timestamps_from_probs(
                probs, sampling_rate=SAMPLE_RATE, audio_length_samples=clip.shape[0], **self.vad_settings
            )
            for clip, probs in zip(mono, self.probabilities(mono))
        ]
        return mono, segments

    def __call__(self, audio: Sequence[Any], audio_sample_rate: Sequence[int] | None = None, **_: Any) -> RewardOutput:
        scores, silences = [], []
        for clip, found in zip(*self.speech_segments(audio, audio_sample_rate)):
            fraction, silence = presence(found, clip.shape[0], SAMPLE_RATE)
            scores.append(fraction)
            silences.append(silence)
        return RewardOutput(np.asarray(scores), extras={"longest_silence": np.asarray(silences)})
