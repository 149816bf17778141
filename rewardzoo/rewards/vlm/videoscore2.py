"""VideoScore2 (He et al., 2025; TIGER-AI-Lab): a generative video judge that reasons first, then scores three
dimensions, as its ``vs2_inference.py`` runs it.

The video, then VideoScore2's query (the prompt inserted) asking for ``visual quality: <v_score>;
text-to-video alignment: <t_score>, physical/common-sense consistency: <p_score>``. The judge writes its
reasoning and the three integer scores; the hard scores are the groups of the reference's pattern
:data:`SCORES` (first match, case-insensitive, across lines). The reference reports **soft** scores: for each
dimension, at the answer token of the first digit after the dimension's label, the probabilities ``p_s`` of the
tokens ``"1"`` .. ``"5"``, and ``soft = argmax_s p_s * max_s p_s / sum_s p_s``. The reference reads ``p`` from the
``scores`` of ``generate(do_sample=True, temperature=0.7, output_scores=True)`` (``vs2_inference.py`` 103-113):
the logits divided by 0.7, then the sampling warpers of the checkpoint's generation config (its ``top_k``,
transformers' default 50, ``top_p``, ``repetition_penalty``), a softmax over what is left. Here those
probabilities come from a second, teacher-forced pass over the query with the answer up to that digit as the
assistant's prefix (one batched ``answer_probs`` call for all samples and dimensions, through the same
``generate`` settings, ``temperature`` 0.7 by default; ``temperature: null`` reads the raw softmax instead):
the distribution the generation step saw (the prefix is the answer's text up to the digit: the tokens before
the score token for Qwen's tokenizers, which give every digit a token of its own). ``soft: false`` keeps the
hard integers.

Beyond the reference's pattern, an answer the reference leaves unparsed because it copies the query's
dimension lines (``(1) visual quality – clarity, smoothness, artifacts: 4``) is read by :data:`LOOSE_SCORES`
(each label, any text but a colon or a newline, a colon, the score); the reference's pattern is tried first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.vlm.backbone import VLMQuery
from ..models.vlm.common import VLMJudgeMixin, check_prompts, fill
from ..models.vlm.judging import Failure
from ..models.vlm.options import VideoJudgeOptions
from ..options import Field, Number, PositiveInt, PositiveNumber, field_validator

#: TIGER-AI-Lab/VideoScore2 ``vs2_inference.py``: ``VS2_QUERY_TEMPLATE`` (``$t2v_prompt`` -> ``{prompt}``), with the
#: indentation the triple-quoted literal carries inside ``main``.
QUERY = """
    You are an expert for evaluating AI-generated videos from three dimensions:
    (1) visual quality – clarity, smoothness, artifacts;
    (2) text-to-video alignment – fidelity to the prompt;
    (3) physical/common-sense consistency – naturalness and physics plausibility.

    Video prompt: {prompt}

    Please output in this format:
    visual quality: <v_score>; 
    text-to-video alignment: <t_score>, 
    physical/common-sense consistency: <p_score>
    """
TEMPLATES = {"videoscore2": QUERY}
#: The reference's score pattern (``re.DOTALL | re.IGNORECASE``).
SCORES = (
    r"visual quality:\s*(\d+).*?text-to-video alignment:\s*(\d+).*?physical/common-sense consistency:\s*"
    r"(\d+)"
)
#: The fallback when :data:`SCORES` finds nothing: each label may be followed by a description before its colon.
LOOSE_SCORES = (
    r"visual quality[^:\n]*:\s*(\d+).*?text-to-video alignment[^:\n]*:\s*(\d+).*?"
    r"physical/common-sense consistency[^:\n]*:\s*(\d+)"
)
#: The reference's generate temperature (``vs2_inference.py``: ``temperature = 0.7``).
REFERENCE_TEMPERATURE = 0.7
#: (extra name, the label the reference looks for before each score token).
DIMENSIONS = (
    ("visual_quality", "visual quality:"),
    ("text_alignment", "text-to-video alignment:"),
    ("physical_consistency", "physical/common-sense consistency:"),
)
DIGITS = tuple(str(s) for s in range(1, 6))


def hard_scores(text: str) -> tuple[int, int, int] | Failure:
    """The three integers of the reference's pattern, or a Failure."""
    match = re.search(SCORES, text, re.DOTALL | re.IGNORECASE) or re.search(
        LOOSE_SCORES, text, re.DOTALL | re.IGNORECASE
    )
    if match is None:
        return Failure(
            "unparseable",
            "no 'visual quality: N ... text-to-video alignment: N ... physical/common-sense "
            "consistency: N' in the answer",
            text,
        )
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def score_prefix(text: str, label: str) -> str | None:
    """The answer up to (not including) the first digit after the first ``label`` (the reference's
    ``find_score_token_index_by_prompt``: an optional ``(N) `` or newline before the label), or None; without the
    label and its colon, the label, any text but a colon or a newline, then a colon (:data:`LOOSE_SCORES`)."""
    match = re.search(r"(?:\(\d+\)\s*|\n\s*)?" + re.escape(label), text, flags=re.IGNORECASE)
    if match is None:
        match = re.search(re.escape(label.rstrip(":")) + r"[^:\n]*:", text, flags=re.IGNORECASE)
    if match is None:
        return None
    digit = re.search(r"\d", text[match.end() :])
    return None if digit is None else text[: match.end() + digit.start()]


def soft_score(probs: Sequence[float]) -> float:
    """``argmax_s p_s * max p / sum p`` over the probabilities of ``"1"`` .. ``"5"`` (the reference's
    ``ll_based_soft_score_normed``; its 4-decimal rounding left out): 0 when every digit has probability 0 (all
    masked by the sampling warpers), as there (``normalized_prob = 0`` when ``total_prob`` is 0)."""
    p = np.asarray(probs, dtype=np.float64)
    total = float(p.sum())
    if total <= 0.0:
        return 0.0
    best = int(np.argmax(p))
    return (best + 1) * float(p[best]) / total


class VideoScore2(VLMJudgeMixin, PointwiseReward):
    """VideoScore2: the mean (``weights``) of its three dimension scores, soft by default (module docstring).

    Inputs: ``video`` and ``prompt``. Range [0, 5] (soft scores lie in (0, 5]; hard ones in 1..5). Extras:
    ``visual_quality``, ``text_alignment``, ``physical_consistency`` (the dimension scores), ``reasoning`` (the
    answer before the scores), ``judgement`` (the whole answer), ``substituted`` / ``failure``. A hard score
    outside 1..5 is unparseable with ``soft: false``; with ``soft: true`` it still has its soft score, as in the
    reference. Options: :class:`Options` (``num_frames`` 8 and ``fps`` 2.0, the reference's ``infer_fps``).
    """

    inputs: Inputs = Inputs(("prompt", "video"), num_frames=8)
    media: str = "video"
    default_model: str | None = "TIGER-Lab/VideoScore2"
    streams: ClassVar[tuple[str, ...]] = tuple(name for name, _ in DIMENSIONS)  # rewardzoo.core.streams

    class Options(VideoJudgeOptions):
        soft: bool = True
        """The soft scores (the expectation over the score tokens' distribution) rather than the hard ones."""
        temperature: PositiveNumber | None = REFERENCE_TEMPERATURE
        """The soft scores' distribution temperature (0.7, the reference's); null: the raw softmax."""
        weights: tuple[Number, Number, Number] = Field((1.0, 1.0, 1.0), strict=False)
        """The three dimensions' weights in the mean: non-negative, not all 0 (default equal)."""
        max_new_tokens: PositiveInt = 1024
        """Tokens the judge may write (1024, the reference's)."""

        @field_validator("weights")
        @classmethod
        def _weights(cls, weights: tuple[float, float, float]) -> tuple[float, float, float]:
            if min(weights) < 0 or sum(weights) <= 0:
                raise ValueError(f"must be three non-negative numbers, not all 0, got {list(weights)}")
            return weights

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        judge_options = o = self.options
        self.soft, self.temperature, weights = o.soft, o.temperature, o.weights
        self.weights = np.asarray(weights, dtype=np.float64) / float(sum(weights))
        self.template = QUERY
        self.max_new_tokens = o.max_new_tokens
        self.setup_judge(self.name, judge_options, model_path=model_path, device=device, dtype=dtype)
        self.inputs = Inputs(("prompt", "video"), num_frames=self.num_frames)

    def __call__(self, prompt: Sequence[str], video: Sequence[Any], **_: Any) -> RewardOutput:
        prompts = check_prompts(prompt, len(video))
        queries = self.queries_of([fill(self.template, p) for p in prompts], [[v] for v in video])
        answers = self.backend.generate(queries, max_new_tokens=self.max_new_tokens)
        dims: list[list[float] | Failure] = []
        for answer in answers:
            hard = answer if isinstance(answer, Failure) else hard_scores(answer)
            if not self.soft and not isinstance(hard, Failure) and not all(1 <= h <= 5 for h in hard):
                hard = Failure("unparseable", f"scores {hard} are not all in 1..5", answer)
            dims.append(hard if isinstance(hard, Failure) else [float(h) for h in hard])
        if self.soft:
            self._soften(queries, answers, dims)
        outcomes = [d if isinstance(d, Failure) else float(np.dot(self.weights, d)) for d in dims]
        scores, extras = self.resolve(outcomes)
        for k, (name, _question) in enumerate(DIMENSIONS):
            extras[name] = [float("nan") if isinstance(d, Failure) else d[k] for d in dims]
        text = [a.answer or "" if isinstance(a, Failure) else a for a in answers]
        starts = [re.search(r"visual quality:", t, re.IGNORECASE) for t in text]
        extras["reasoning"] = [t[: m.start()].strip() if m else t.strip() for t, m in zip(text, starts)]
        extras["judgement"] = text
        return RewardOutput(scores, extras=extras)

    def _soften(self, queries: list[VLMQuery], answers: list[Any], dims: list[Any]) -> None:
        """Replace each parsed sample's hard scores with the soft ones (in place), one teacher-forced batch."""
        asks, where = [], []
        for i, (query, answer) in enumerate(zip(queries, answers)):
            if isinstance(dims[i], Failure):
                continue
            for k, (_, label) in enumerate(DIMENSIONS):
                prefix = score_prefix(answer, label)
                if prefix is None:
                    dims[i] = Failure("unparseable", f"no score token after {label!r}", answer)
                    break
                asks.append(VLMQuery(query.content, system=query.system, answer_prefix=prefix))
                where.append((i, k))
        if not asks:
            return
        probs = self._digit_probs(asks)
        for (i, k), p in zip(where, probs):
            if isinstance(dims[i], Failure):
                continue
            if isinstance(p, Failure):
                dims[i] = p
            else:
                dims[i][k] = soft_score(p)

    def _digit_probs(self, asks: list[VLMQuery]) -> list[Any]:
        """The probabilities of ``"1"`` .. ``"5"`` at each score token, from the distribution ``temperature``
        names. Locally: the scores of ``generate(do_sample=True, temperature=...)`` (the checkpoint's warpers
        with it). An endpoint reports raw log-probabilities: ``p ** (1 / T)`` there (the softmax's normaliser
        cancels in ``max p / sum p``), without the checkpoint's top-k / top-p / repetition penalty."""
        if self.temperature is None:
            return self.backend.answer_probs(asks, list(DIGITS))
        if self.backend.kind == "transformers":
            return self.backend.answer_probs(asks, list(DIGITS), sampling={"temperature": self.temperature})
        probs = self.backend.answer_probs(asks, list(DIGITS))
        return [
            p if isinstance(p, Failure) else np.asarray(p, dtype=np.float64) ** (1.0 / self.temperature) for p in probs
        ]
