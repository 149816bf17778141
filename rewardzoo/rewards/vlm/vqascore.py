"""VQAScore (Lin et al., ECCV 2024): the probability that a VLM answers "Yes" to 'Does this figure show "{prompt}"?'.

``score = P("Yes" | media, question)``: the softmax over the whole vocabulary at the first answer position
(right after the chat template's generation prompt), at the first token of the answer ``"Yes"`` as the
tokenizer encodes it. This is what t2v_metrics' Qwen2-VL / Qwen2.5-VL scorer computes (its ``generate`` with
``max_new_tokens=1`` and ``output_scores``, temperature 1), one pair at a time; here one left-padded forward
pass scores a whole batch, with no generation. The endpoint backend reads the same probability from the
first token's ``top_logprobs`` (0 when "Yes" is not among them).
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

from .judging import Failure, yes_probability
from ...shared.options import choice
from ..base import Inputs, PointwiseReward, RewardOutput
from .common import VLMJudgeMixin, check_prompts, check_template, fill
from .prompts import VQASCORE_ANSWER, VQASCORE_QUESTION


class VQAScore(VLMJudgeMixin, PointwiseReward):
    """VQAScore of an image: ``P(answer | image, question_template(prompt))`` at the first answer token.

    Inputs: ``image`` and ``prompt``. Range [0, 1]; higher is better. Options: ``question_template``
    (default t2v_metrics' ``'Does this figure show "{prompt}"? Please answer Yes or No.'``), ``answer``
    (``"Yes"``), ``normalize`` (``absolute``: P(Yes) over the vocabulary, the reference; ``relative``:
    P(Yes) / (P(Yes) + P(No)) with ``negative`` ``"No"``), the backend options of
    :mod:`rewardzoo.rewards.vlm.common`. The extra ``p_answer`` is P(answer) over the vocabulary.
    """

    inputs: ClassVar[Inputs] = Inputs(("prompt", "image"))
    media: ClassVar[str] = "image"
    default_model: ClassVar[str | None] = "Qwen/Qwen2.5-VL-7B-Instruct"

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", *,
                 question_template: str = VQASCORE_QUESTION, answer: str = VQASCORE_ANSWER, negative: str = "No",
                 normalize: str = "absolute", **options: Any) -> None:
        super().__init__(model_path, device, dtype)
        judge_options = self.judge_options_of(options)
        self.question_template = check_template(question_template, self.name, "kwargs.question_template")
        self.answer, self.negative = str(answer), str(negative)
        self.normalize = choice(normalize, "kwargs.normalize", ("absolute", "relative"))
        self.setup_judge(self.name, judge_options, model_path=model_path, device=device, dtype=dtype)
        if self.media == "video":
            self.inputs = Inputs(("prompt", "video"), num_frames=self.num_frames)

    def __call__(self, prompt: Sequence[str], image: Sequence[Any] = (), video: Sequence[Any] = (),
                 **_: Any) -> RewardOutput:
        media = video if self.media == "video" else image
        prompts = check_prompts(prompt, len(media))
        queries = self.queries_of([fill(self.question_template, p) for p in prompts], [[m] for m in media])
        answers = [self.answer, self.negative] if self.normalize == "relative" else [self.answer]
        probs = self.backend.answer_probs(queries, answers)
        outcomes: list[float | Failure] = [
            p if isinstance(p, Failure) else yes_probability(p, mode=self.normalize) for p in probs]
        scores, extras = self.resolve(outcomes)
        extras["p_answer"] = [float("nan") if isinstance(p, Failure) else float(p[0]) for p in probs]
        return RewardOutput(scores, extras=extras)


class VideoVQAScore(VQAScore):
    """VQAScore of a video: the frames (``num_frames`` sampled uniformly, default 8; ``fps`` 8.0 as
    t2v_metrics' Qwen scorers sample) go to the model as one video. Inputs: ``video`` and ``prompt``.
    Range [0, 1]; higher is better."""

    inputs: ClassVar[Inputs] = Inputs(("prompt", "video"), num_frames=8)
    media: ClassVar[str] = "video"
    default_num_frames: ClassVar[int | None] = 8
    default_fps: ClassVar[float] = 8.0
