"""ASR accuracy rewards: transcribe with a transformers ASR model, ``score = 1 - min(WER, 1)`` (or CER).

The target text is the sample's ``prompt`` (TTS: the text that was to be spoken) or, with
``text_key``, a key of its ``metadata``. Both the target and the transcript are normalised before
scoring: with Whisper's ``EnglishTextNormalizer`` (the checkpoint's spelling mapping) when the model is
a Whisper model and ``normalizer: auto``, else with transformers' ``BasicTextNormalizer`` (lower case,
bracketed text removed, punctuation and symbols to spaces, whitespace collapsed). WER and CER are
computed per sample by ``jiwer`` (``jiwer.wer`` / ``jiwer.cer``), then clipped at 1.

Models: Whisper (``WhisperForConditionalGeneration`` + ``WhisperProcessor``; batched ``generate``,
greedy, short form: up to 30 s), any other seq2seq ASR checkpoint (``AutoModelForSpeechSeq2Seq`` +
``AutoProcessor``) and CTC checkpoints (``AutoModelForCTC``: greedy argmax, ``batch_decode``). Audio
is mixed to mono and resampled to the processor's rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal, get_args

import numpy as np
import torch

from ...errors import InputError
from ...shared.audio import prepare_clips
from ..base import Inputs, PointwiseReward, RewardOutput
from ..options import PositiveInt, RewardOptions
from .targets import TextKey, target_texts, text_fields

DEFAULT_MODEL = "openai/whisper-large-v3-turbo"
Metric = Literal["wer", "cer"]
METRICS: tuple[str, ...] = get_args(Metric)
#: Shortest clip transcribed (seconds); shorter is an InputError.
MIN_SECONDS = 0.1
#: A clip whose peak |sample| is below this counts as silence: its transcript is "" without running the
#: model (Whisper hallucinates text on silence).
SILENCE_PEAK = 1e-5


def error_rate(reference: str, hypothesis: str, metric: str) -> float:
    """jiwer's WER or CER of one normalised pair (jiwer's own definition, also for empty strings)."""
    import jiwer

    return float(jiwer.wer(reference, hypothesis) if metric == "wer" else jiwer.cer(reference, hypothesis))


def accuracy(reference: str, hypothesis: str, metric: str) -> float:
    """``1 - min(rate, 1)`` for normalised texts. An empty reference follows jiwer: its rate is the number
    of hypothesised words (characters for CER), so it scores 1 when the hypothesis is empty too, else 0."""
    return 1.0 - min(error_rate(reference, hypothesis, metric), 1.0)


class ASRAccuracy(PointwiseReward):
    """Score = ``1 - min(WER, 1)`` (``metric: wer``) or ``1 - min(CER, 1)`` (``metric: cer``) between the
    normalised transcript of ``audio`` and the normalised target text.

    ``model_path``: a Whisper, other seq2seq or CTC ASR checkpoint (hub id or local dir); default
    ``openai/whisper-large-v3-turbo``. Inputs: ``audio`` (mono, resampled to the processor's rate, at
    least 0.1 s; Whisper up to 30 s) and ``prompt`` (or ``metadata`` with ``text_key``); options:
    :class:`Options`. Range [0, 1]. Extra: ``error_rate`` (jiwer's, unclipped; for an empty
    reference the count of hypothesised words or characters). The transcripts are the text extra ``transcript``; :meth:`transcribe`
    returns them for clips without a target.
    """

    inputs = Inputs(("audio", "prompt"), sample_rate=16000, max_seconds=30.0)
    metric_default = "wer"
    default_model: ClassVar[str] = DEFAULT_MODEL

    class Options(RewardOptions):
        metric: Metric | None = None
        """``wer`` (word error rate) or ``cer`` (character error rate); default: the reward's own (``asr_wer``:
        wer, ``asr_cer``: cer)."""
        text_key: TextKey | None = None
        """A ``metadata`` key holding the target text; default: the ``prompt`` is the target."""
        normalizer: Literal["auto", "whisper", "basic", "none"] = "auto"
        """Text normalisation of target and transcript: ``auto`` (Whisper's English normaliser for a Whisper model,
        else transformers' basic one), ``whisper``, ``basic`` or ``none``."""
        language: str | None = None
        """Whisper's decoding language (e.g. ``en``); default: Whisper detects it."""
        task: str | None = None
        """Whisper's task (``transcribe`` or ``translate``); default: Whisper's own."""
        max_new_tokens: PositiveInt = 128
        """Most tokens generated per clip (seq2seq models)."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        opts = self.options
        metric = opts.metric or self.metric_default
        text_key, language, task = opts.text_key, opts.language, opts.task
        from transformers import AutoConfig, AutoProcessor

        path = model_path or DEFAULT_MODEL
        self.metric, self.text_key, self.language, self.task = metric, text_key, language, task
        self.max_new_tokens = opts.max_new_tokens
        config = AutoConfig.from_pretrained(path)
        self.is_whisper = config.model_type == "whisper"
        self.processor = AutoProcessor.from_pretrained(path)
        if self.is_whisper:
            from transformers import WhisperForConditionalGeneration as model_cls

            self.ctc = False
        elif getattr(config, "architectures", None) and any("CTC" in a for a in config.architectures):
            from transformers import AutoModelForCTC as model_cls

            self.ctc = True
        else:
            from transformers import AutoModelForSpeechSeq2Seq as model_cls

            self.ctc = False
        self.model = model_cls.from_pretrained(path, dtype=self.dtype).to(self.device).eval()
        self.sample_rate = int(self.processor.feature_extractor.sampling_rate)
        fields = ("audio", *text_fields(text_key))
        self.inputs = replace(
            self.inputs, fields=fields, sample_rate=self.sample_rate, max_seconds=30.0 if self.is_whisper else 600.0
        )
        self.normalize = self._normalizer(opts.normalizer)

    def _normalizer(self, name: str):
        from transformers.models.whisper.english_normalizer import (
            BasicTextNormalizer,
            EnglishTextNormalizer,
        )

        if name == "none":
            return lambda text: text
        if name == "whisper" or (name == "auto" and self.is_whisper):
            tokenizer = getattr(self.processor, "tokenizer", None)
            return EnglishTextNormalizer(getattr(tokenizer, "english_spelling_normalizer", None) or {})
        return BasicTextNormalizer()

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        """Raw transcripts of mono clips ``(time,)`` at the processor's rate, in one batch."""
        if not clips:
            return []
        padding = {} if self.is_whisper else {"padding": True}  # Whisper pads every clip to 30 s itself
        feats = self.processor(list(clips), sampling_rate=self.sample_rate, return_tensors="pt", **padding)
        with torch.inference_mode():
            if self.ctc:
                values = feats["input_values"].to(self.device, self.dtype)
                mask = feats.get("attention_mask")
                kwargs = {} if mask is None else {"attention_mask": mask.to(self.device)}
                ids = self.model(input_values=values, **kwargs).logits.argmax(dim=-1).cpu()
                lengths = [c.shape[0] for c in clips]
                frames = self.model._get_feat_extract_output_lengths(torch.tensor(lengths)).tolist()
                # each clip's own frames only: the padded tail of a shorter clip would add letters
                return [self.processor.decode(row[:n], skip_special_tokens=True) for row, n in zip(ids, frames)]
            inputs = feats["input_features"].to(self.device, self.dtype)
            options: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": False, "num_beams": 1}
            if self.is_whisper:
                if self.language:
                    options["language"] = self.language
                if self.task:
                    options["task"] = self.task
            ids = self.model.generate(inputs, **options)
        return list(self.processor.batch_decode(ids.cpu(), skip_special_tokens=True))

    def transcribe_voiced(self, clips: Sequence[np.ndarray]) -> list[str]:
        """The transcripts a call scores: mono clips ``(time,)`` at the processor's rate checked (at least
        :data:`MIN_SECONDS`, at most the model's limit; InputError naming the sample), then :meth:`transcribe`,
        with ``""`` for a silent clip (peak below :data:`SILENCE_PEAK`) without running the model on it."""
        limit = self.inputs.max_seconds
        for i, clip in enumerate(clips):
            seconds = clip.shape[0] / self.sample_rate
            if seconds < MIN_SECONDS:
                raise InputError(
                    f"ASR needs at least {MIN_SECONDS:g} s of audio, got {seconds:.3f} s", field="audio", sample=i
                )
            if limit is not None and seconds > limit:
                raise InputError(
                    f"audio of {seconds:.1f} s is longer than this model's {limit:g} s", field="audio", sample=i
                )
        voiced = [i for i, clip in enumerate(clips) if float(np.abs(clip).max()) >= SILENCE_PEAK]
        transcripts = [""] * len(clips)
        for i, text in zip(voiced, self.transcribe([clips[i] for i in voiced])):
            transcripts[i] = text
        return transcripts

    def __call__(
        self,
        audio: Sequence[Any],
        audio_sample_rate: Sequence[int] | None = None,
        prompt: Sequence[Any] | None = None,
        metadata: Sequence[Any] | None = None,
        **_: Any,
    ) -> RewardOutput:
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=self.sample_rate, mono=True)
        targets = target_texts(prompt, metadata, self.text_key, len(clips))
        transcripts = self.transcribe_voiced([c[0] for c in clips])
        refs = [self.normalize(t) for t in targets]
        hyps = [self.normalize(t) for t in transcripts]
        rates = np.asarray([error_rate(r, h, self.metric) for r, h in zip(refs, hyps)])
        scores = 1.0 - np.minimum(rates, 1.0)
        return RewardOutput(scores, extras={"error_rate": rates, "transcript": transcripts})


class ASRWordAccuracy(ASRAccuracy):
    """``asr_wer``: :class:`ASRAccuracy` with ``metric: wer``, score ``1 - min(WER, 1)`` in [0, 1]."""

    metric_default = "wer"


class ASRCharAccuracy(ASRAccuracy):
    """``asr_cer``: :class:`ASRAccuracy` with ``metric: cer``, score ``1 - min(CER, 1)`` in [0, 1]."""

    metric_default = "cer"
