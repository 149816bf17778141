"""VQAScore (Lin et al., ECCV 2024): the probability that a VLM answers "Yes" to 'Does this figure show "{prompt}"?'.

``score = P("Yes" | media, question)``: the softmax over the whole vocabulary at the first answer position
(right after the chat template's generation prompt), at the first token of the answer ``"Yes"`` as the
tokenizer encodes it. This is what t2v_metrics' Qwen2-VL / Qwen2.5-VL scorer computes (its ``generate`` with
``max_new_tokens=1`` and ``output_scores``, temperature 1), one pair at a time; here one left-padded forward
pass scores a whole batch, with no generation. The endpoint backend reads the same probability from the
first token's ``top_logprobs`` (0 when "Yes" is not among them).

Pixel bounds: images at most 12,845,056 pixels (qwen-vl-utils' ``IMAGE_MAX_TOKEN_NUM * 28**2``, the bound of
t2v_metrics' path) and video frames at most 151,200 (t2v_metrics' ``360 * 420``), set explicitly for Qwen-VL
models on the local backend unless ``max_pixels`` says otherwise. t2v_metrics reads ``generate``'s ``scores``:
the logits after the logits processors the checkpoint's generation config sets for greedy decoding
(``repetition_penalty``, which penalises every token of the prompt, etc.), not the raw logits.
``preset: t2v_metrics`` reproduces that (:meth:`~rewardzoo.rewards.models.vlm.backbone.VLMBackbone.first_scores`) and
resizes images as qwen-vl-utils does (PIL bicubic to the smart-resize size, then the processor with
``do_resize=False``); the default reads the raw logits (the model's own distribution) with the processor's
resize.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal

from ...errors import ConfigError
from ...shared.media import to_pil_rgb
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.vlm.common import JudgeOptions, VideoJudgeOptions, VLMJudgeMixin, check_prompts, check_template, fill
from ..models.vlm.judging import Failure, yes_probability
from ..models.vlm.reward_models import resize_image

#: VQAScore question and answer of t2v_metrics' Qwen2-VL / Qwen2.5-VL scorer (t2v_metrics/models/vqascore_models/
#: qwen2vl_model.py, commit 6ecb74f).
VQASCORE_QUESTION = 'Does this figure show "{prompt}"? Please answer Yes or No.'
VQASCORE_ANSWER = "Yes"

#: Named question templates (``question_template`` takes a key or your own text): t2v_metrics' Qwen one.
TEMPLATES = {"t2v_metrics": VQASCORE_QUESTION}
#: qwen-vl-utils' bounds on t2v_metrics' path: image pixels (min 4 and max 16384 tokens of 28x28) and the
#: per-frame cap t2v_metrics gives videos (360 * 420).
IMAGE_MIN_PIXELS = 4 * 28 * 28
IMAGE_MAX_PIXELS = 16384 * 28 * 28
VIDEO_MAX_PIXELS = 360 * 420
#: The model types t2v_metrics' Qwen scorer (``qwen2vl_model.py``) loads.
T2V_METRICS_MODEL_TYPES = ("qwen2_vl", "qwen2_5_vl")


class VQAScore(VLMJudgeMixin, PointwiseReward):
    """VQAScore of an image: ``P(answer | image, question_template(prompt))`` at the first answer token.

    Inputs: ``image`` and ``prompt``. Range [0, 1]; higher is better. Options: :class:`Options`, with the backend
    options of :class:`~rewardzoo.rewards.models.vlm.common.JudgeOptions` (``max_pixels`` default
    :data:`IMAGE_MAX_PIXELS`, or
    :data:`VIDEO_MAX_PIXELS` per frame for videos, on the local backend). The extra ``p_answer`` is P(answer)
    over the vocabulary.
    """

    inputs: Inputs = Inputs(("prompt", "image"))
    media: str = "image"
    default_model: str | None = "Qwen/Qwen2.5-VL-7B-Instruct"
    default_max_pixels: ClassVar[int] = IMAGE_MAX_PIXELS

    class Options(JudgeOptions):
        preset: Literal["t2v_metrics"] | None = None
        """null, or ``t2v_metrics``: the scores after the checkpoint's generation-config processors and qwen-vl-utils'
        image resize (local backend only; module docstring)."""
        question_template: str = "t2v_metrics"
        """``t2v_metrics`` (``'Does this figure show "{prompt}"? Please answer Yes or No.'``) or your own text with
        ``{prompt}``."""
        answer: str = VQASCORE_ANSWER
        """The answer whose first-token probability is the score."""
        negative: str = "No"
        """The other answer of ``normalize: relative``."""
        normalize: Literal["absolute", "relative"] = "absolute"
        """``absolute``: P(answer) over the vocabulary (the reference); ``relative``: P(answer) / (P(answer) +
        P(negative))."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        judge_options = o = self.options
        preset, question_template = o.preset, o.question_template
        self.preset = preset
        local = judge_options.backend == "transformers"
        if preset is not None and not local:
            raise ConfigError(
                f"{self.name}: preset: t2v_metrics reads transformers' generate scores; it needs "
                "backend: transformers (a server's logprobs are not those scores)",
                field="kwargs.preset",
            )
        question_template = TEMPLATES.get(question_template, question_template)
        self.question_template = check_template(question_template, self.name, "kwargs.question_template")
        self.answer, self.negative, self.normalize = o.answer, o.negative, o.normalize
        self.setup_judge(self.name, judge_options, model_path=model_path, device=device, dtype=dtype)
        model_type = self.backend.backbone.model_type if local else None
        max_pixels = judge_options.max_pixels
        if max_pixels is None and str(model_type).startswith("qwen"):  # the reference's bound, not the processor's
            max_pixels = self.default_max_pixels
            self.backend.pixels = replace(self.backend.pixels, max_pixels=max_pixels, video_max_pixels=max_pixels)
        self.resize_bounds = (judge_options.min_pixels or IMAGE_MIN_PIXELS, max_pixels)
        if preset is not None and model_type not in T2V_METRICS_MODEL_TYPES:
            raise ConfigError(
                f"{self.name}: preset: t2v_metrics is its Qwen2-VL / Qwen2.5-VL scorer's path (28-pixel "
                f"resize); the model is a '{model_type}' one",
                field="kwargs.preset",
            )
        if self.media == "video":
            self.inputs = Inputs(("prompt", "video"), num_frames=self.num_frames)

    def media_part(self, value: Any) -> Any:
        lo, hi = self.resize_bounds  # qwen-vl-utils' fetch_image; the processor then keeps the size
        if self.preset is None or self.media == "video" or hi is None:  # (a preset's qwen models have their bound)
            return super().media_part(value)
        return resize_image(to_pil_rgb(value), min_pixels=lo, max_pixels=hi)

    def __call__(
        self, prompt: Sequence[str], image: Sequence[Any] = (), video: Sequence[Any] = (), **_: Any
    ) -> RewardOutput:
        media = video if self.media == "video" else image
        prompts = check_prompts(prompt, len(media))
        queries = self.queries_of([fill(self.question_template, p) for p in prompts], [[m] for m in media])
        answers = [self.answer, self.negative] if self.normalize == "relative" else [self.answer]
        reference = {} if self.preset is None else {"processed": True, "resized": self.media == "image"}
        probs = self.backend.answer_probs(queries, answers, **reference)
        outcomes: list[float | Failure] = [
            p if isinstance(p, Failure) else yes_probability(p, mode=self.normalize) for p in probs
        ]
        scores, extras = self.resolve(outcomes)
        extras["p_answer"] = [float("nan") if isinstance(p, Failure) else float(p[0]) for p in probs]
        return RewardOutput(scores, extras=extras)


class VideoVQAScore(VQAScore):
    """VQAScore of a video: the frames (``num_frames`` sampled uniformly, default 8; ``fps`` 8.0 as
    t2v_metrics' Qwen scorers sample; at most :data:`VIDEO_MAX_PIXELS` pixels each) go to the model as one
    video. Inputs: ``video`` and ``prompt``. Range [0, 1]; higher is better. ``preset: t2v_metrics``: the
    generation-config scores; frames are sampled by count and resized by the processor as by default."""

    inputs: Inputs = Inputs(("prompt", "video"), num_frames=8)
    media: str = "video"

    class Options(VQAScore.Options, VideoJudgeOptions):
        pass

    options: Options
    default_num_frames: ClassVar[int | None] = 8
    default_fps: ClassVar[float] = 8.0
    default_max_pixels: ClassVar[int] = VIDEO_MAX_PIXELS
