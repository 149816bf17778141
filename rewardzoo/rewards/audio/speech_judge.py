"""SpeechJudge-GRM (AmphionTeam/SpeechJudge): a generative judge of speech naturalness on Qwen2.5-Omni.

The reference's steps (``AmphionTeam/SpeechJudge`` commit 1fbd1c8, ``infer/``):

- **prompt** (``utils.py`` 76-109, ``build_cot_conversation``): the Qwen system turn, then one user turn: the task
  sentence, ``Target text: {text}``, ``Output A:``, audio A, ``Output B:``, audio B, the request to score both
  1-10 and the criteria note ending ``Output A: X, Output B: X.``; the processor's chat template with the
  generation prompt; audio at 16 kHz (``qwen_omni_utils.process_mm_info`` reads files with librosa at 16 kHz);
- **generation** (``main_grm.py`` 40-63 with the thinker class; ``main_grm_vllm.py`` 28-30 for inference-time
  scaling): sampled (``do_sample=True``; vLLM: temperature 1.0, top_p 1.0, top_k 50), up to 1024 new tokens;
- **parse** (``utils.py`` 167-176, ``extract_rating``): ``**`` removed, the last match of ``Output A: (\\d+(\\.\\d+)?)
  .*? Output B: (\\d+(\\.\\d+)?)`` (across lines); no match: no rating;
- **score** (``main_grm_vllm.py`` 98-115): over ``N`` generations, the mean of A's and of B's parsed scores (the
  unparsed ones skipped).

As a reward, each sample's ``audio`` is Output A and its ``condition_audio`` (a reference clip: the ground truth
or a baseline system's) Output B; the score is A's mean score (``score: a``, 1-10 as the model is asked) or A's
minus B's (``score: margin``). The target text is the ``prompt`` (what was to be spoken). Backends as the VLM
judges: ``transformers`` (``Qwen2_5OmniThinkerForConditionalGeneration`` here) or ``openai`` (a chat-completions
server, e.g. vLLM serving the checkpoint: audio as ``input_audio`` parts, base64 WAV).
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from ...errors import ConfigError, InputError
from ...shared.weights import loading
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.vlm.judging import Failure, FailurePolicy
from ..options import Field, RewardOptions

SAMPLE_RATE = 16_000
MODEL_ID = "RMSnow/SpeechJudge-GRM"
SYSTEM = (
    "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving auditory and "
    "visual inputs, as well as generating text and speech."
)
TASK = "We are comparing the naturalness of two Text-to-Speech models' outputs. The models need to generate the target text."
ASK = "Analysis the two output above, and score them with number from 1 to 10."
NOTE = (
    "Note: (1) Please evaluate the naturalness of both audio outputs based on the following criteria: Prosody and "
    "Intonation, Pacing and Rhythm, Articulation and Clarity, and Overall Naturalness. (2) After conducting a "
    "detailed analysis of each criterion, using the following output template to highlight your conclusion: "
    "Output A: X, Output B: X."
)
RATING = re.compile(r"Output A: (\d+(?:\.\d+)?).*?Output B: (\d+(?:\.\d+)?)", re.DOTALL)


def conversation(target_text: str, audio_a: Any, audio_b: Any) -> list[dict[str, Any]]:
    """The judge's two chat turns (the module docstring), audio parts holding the clips."""
    user = [
        {"type": "text", "text": TASK},
        {"type": "text", "text": f"Target text: {target_text}"},
        {"type": "text", "text": "Output A:"},
        {"type": "audio", "audio": audio_a},
        {"type": "text", "text": "Output B:"},
        {"type": "audio", "audio": audio_b},
        {"type": "text", "text": ASK},
        {"type": "text", "text": NOTE},
    ]
    return [{"role": "system", "content": [{"type": "text", "text": SYSTEM}]}, {"role": "user", "content": user}]


def parse_rating(text: str) -> tuple[float, float] | None:
    """(A, B) from a judgement: the last ``Output A: X ... Output B: Y`` after removing ``**``; None if none."""
    found = RATING.findall(text.replace("**", ""))
    return (float(found[-1][0]), float(found[-1][1])) if found else None


def wav_base64(clip: np.ndarray, rate: int = SAMPLE_RATE) -> str:
    """A mono float clip as base64 of a 16-bit PCM WAV file."""
    import soundfile as sf

    buffer = io.BytesIO()
    sf.write(buffer, np.asarray(clip, dtype=np.float32).reshape(-1), rate, format="WAV", subtype="PCM_16")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


class LocalOmni:
    """Qwen2.5-Omni's thinker and processor from ``path``: one sampled or greedy generation per call."""

    kind = "transformers"

    def __init__(self, path: str, device: str, dtype: Any, attn_implementation: str | None) -> None:
        from transformers import Qwen2_5OmniProcessor, Qwen2_5OmniThinkerForConditionalGeneration

        with loading(f"the Qwen2.5-Omni thinker '{path}'"):
            extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
            self.model = Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(path, dtype=dtype, **extra)
            self.processor = Qwen2_5OmniProcessor.from_pretrained(path)
        self.model.to(device).eval()
        self.device, self.dtype = device, dtype

    def inputs(self, conv: list[dict[str, Any]]) -> Any:
        """The processor's tensors of one conversation (its chat template, its audio features)."""
        text = self.processor.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
        clips = [p["audio"] for p in conv[1]["content"] if p["type"] == "audio"]
        out = self.processor(text=text, audio=clips, return_tensors="pt", padding=True)
        return out.to(self.device)

    def generate(
        self, conv: list[dict[str, Any]], n: int, sampling: Mapping[str, Any], max_new_tokens: int
    ) -> list[str]:
        import torch

        inputs = self.inputs(conv)
        if "input_features" in inputs:
            inputs["input_features"] = inputs["input_features"].to(self.dtype)
        tok = self.processor.tokenizer
        with torch.inference_mode():
            ids = self.model.generate(
                **inputs,
                max_new_tokens=max_new_tokens,
                num_return_sequences=n,
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id,
                **sampling,
            )
        ids = ids[:, inputs["input_ids"].shape[1] :]
        return self.processor.batch_decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)


class EndpointOmni:
    """An OpenAI-compatible server (the VLM judges' transport and endpoint options): ``n`` completions of one
    request whose user turn carries the audio as ``input_audio`` parts (base64 WAV)."""

    kind = "openai"
    io_bound = True

    def __init__(self, options: Mapping[str, Any], default_model: str) -> None:
        from ..models.vlm.endpoint import OpenAIVLM

        self.vlm = OpenAIVLM.from_options(options, owner="speech_judge", default_model=default_model)

    def messages(self, conv: list[dict[str, Any]]) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        for p in conv[1]["content"]:
            if p["type"] == "audio":
                parts.append({"type": "input_audio", "input_audio": {"data": wav_base64(p["audio"]), "format": "wav"}})
            else:
                parts.append({"type": "text", "text": p["text"]})
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": parts}]

    def generate(
        self, conv: list[dict[str, Any]], n: int, sampling: Mapping[str, Any], max_new_tokens: int
    ) -> list[str | Failure]:
        from ...errors import HttpError

        payload = {"model": self.vlm.model, "messages": self.messages(conv), "max_tokens": max_new_tokens, "n": n}
        if sampling.get("do_sample", True):
            payload.update({k: sampling[k] for k in ("temperature", "top_p", "top_k") if k in sampling})
        else:
            payload["temperature"] = 0
        try:
            body = self.vlm.client.post_json("chat/completions", payload)
            return [str(c["message"]["content"]) for c in body["choices"]]
        except HttpError as exc:
            return [Failure("http", str(exc))]
        except (KeyError, IndexError, TypeError):
            return [Failure("http", f"the answer is not a chat completion: {str(body)[:200]}")]


class SpeechJudge(PointwiseReward):
    """SpeechJudge-GRM's naturalness score of each sample's speech against its reference clip.

    Options: :class:`Options`. Inputs: ``prompt`` (the target text), ``audio`` (Output A), ``condition_audio``
    (Output B). Extras: ``score_a``, ``score_b`` (means over the parsed generations), ``parsed`` (how many parsed),
    ``judgement`` (the last generation's text), ``substituted`` and ``failure`` (the failure policy's).
    """

    inputs = Inputs(("prompt", "audio", "condition_audio"), audio="numpy", sample_rate=SAMPLE_RATE, mono=True)

    class Options(RewardOptions):
        score: Literal["a", "margin"] = "a"
        """``a``: the sample's mean score (1-10); ``margin``: its mean score minus the reference clip's."""
        generations: int = Field(1, ge=1, le=64)
        """Judgements per sample, their scores averaged (1: ``main_grm.py``; 10: ``main_grm_vllm.py``'s scaling)."""
        do_sample: bool = True
        """Sample as the reference does (``do_sample=True``; vLLM: temperature 1.0, top_p 1.0, top_k 50); false:
        greedy (deterministic, not the reference's)."""
        temperature: float = Field(1.0, gt=0)
        top_p: float = Field(1.0, gt=0, le=1)
        top_k: int = Field(50, ge=0)
        max_new_tokens: int = Field(1024, ge=1)
        """Tokens per judgement (1024: the reference's)."""
        backend: Literal["transformers", "openai"] = "transformers"
        """``transformers``: the thinker runs here; ``openai``: a chat-completions server (``endpoint``)."""
        endpoint: dict[str, Any] | None = None
        """The server mapping of ``backend: openai`` (the VLM judges' keys: url, model, api_key_env, ...)."""
        attn_implementation: str | None = None
        """Local backend: transformers' ``attn_implementation`` (the reference: ``flash_attention_2``)."""
        on_failure: Any = None
        """``error`` (default: no parsable judgement is an error) or ``{substitute: VALUE}``."""

    options: Options

    def __init__(
        self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any
    ) -> None:
        super().__init__(model_path, device, dtype, **options)
        o = self.options
        self.policy = FailurePolicy.from_option(o.on_failure, owner="speech_judge")
        path = model_path or MODEL_ID
        self.backend: LocalOmni | EndpointOmni
        if o.backend == "openai":
            if o.attn_implementation is not None:
                raise ConfigError("applies to backend: transformers only", field="kwargs.attn_implementation")
            self.backend = EndpointOmni(o.endpoint or {}, path)
            self.io_bound = True
        else:
            if o.endpoint is not None:
                raise ConfigError("applies to backend: openai only", field="kwargs.endpoint")
            self.backend = LocalOmni(path, self.device, self.dtype, o.attn_implementation)
            self.hold(self.backend.model)
        self.sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": o.temperature, "top_p": o.top_p, "top_k": o.top_k}
            if o.do_sample
            else {"do_sample": False}
        )

    def _judge(self, text: str, a: np.ndarray, b: np.ndarray) -> tuple[float | Failure, float, int, str]:
        conv = conversation(text, a, b)
        answers = self.backend.generate(conv, self.options.generations, self.sampling, self.options.max_new_tokens)
        texts = [t for t in answers if isinstance(t, str)]
        ratings = [r for r in (parse_rating(t) for t in texts) if r is not None]
        last = texts[-1] if texts else ""
        if not ratings:
            failure = next((t for t in answers if isinstance(t, Failure)), None)
            return failure or Failure("parse", "no 'Output A: X, Output B: Y' in the judgement", last), np.nan, 0, last
        score_a = float(np.mean([r[0] for r in ratings]))
        score_b = float(np.mean([r[1] for r in ratings]))
        value = score_a if self.options.score == "a" else score_a - score_b
        return value, score_b, len(ratings), last

    def __call__(
        self,
        prompt: Sequence[str] | None = None,
        audio: Sequence[Any] | None = None,
        condition_audio: Sequence[Any] | None = None,
        audio_sample_rate: Sequence[int] | None = None,
        condition_audio_sample_rate: Sequence[int] | None = None,
        **_: Any,
    ) -> RewardOutput:
        from ...shared.audio import prepare_clips

        if prompt is None or audio is None or condition_audio is None:
            missing = "prompt" if prompt is None else "audio" if audio is None else "condition_audio"
            raise InputError("needs the target text (prompt), the audio and a reference clip", field=missing)
        clips, _rates = prepare_clips(audio, audio_sample_rate, target_rate=SAMPLE_RATE, mono=True)
        refs, _ref_rates = prepare_clips(
            condition_audio, condition_audio_sample_rate, target_rate=SAMPLE_RATE, mono=True, field="condition_audio"
        )
        rows = [self._judge(str(t), a.reshape(-1), b.reshape(-1)) for t, a, b in zip(prompt, clips, refs)]
        scores, extras = self.policy.resolve([r[0] for r in rows], reward="speech_judge")
        extras.update(
            score_b=np.array([r[1] for r in rows], dtype=np.float64),
            parsed=np.array([r[2] for r in rows], dtype=np.float64),
            judgement=[r[3] for r in rows],
        )
        score_a = scores if self.options.score == "a" else scores + extras["score_b"]
        extras["score_a"] = score_a
        return RewardOutput(scores.astype(np.float32), extras=extras)
