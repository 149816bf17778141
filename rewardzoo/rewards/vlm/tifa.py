"""VQA over a prompt's atomic questions (TIFA; GenEval2's Soft-TIFA): the mean probability of the right answers.

Each sample brings its questions in ``metadata["questions"]``, a list of ``{"question": ..., "answer": ...}``. For
each one the VLM sees the image and ``'{question} Answer in one word.'``; its probability of the answer is
``p = sum_v P(v)`` over the answer's variants ``v``, each ``P`` the softmax over the whole vocabulary at the first
answer position for the first token of ``v`` (the VQAScore path, :meth:`~rewardzoo.rewards.models.vlm.backend.LocalVLM.
answer_probs`). The variants are GenEval2's (``evaluation.py`` ``soft_tifa``, commit a6e82d2): for a question
starting "How many", the answer, capitalised, each with a leading space, and the number word's digits with and
without a space (``"four"`` -> ``four Four ␣four ␣Four 4 ␣4``); otherwise the answer capitalised and in lower
case, each with and without a leading space (``"Yes"`` -> ``Yes yes ␣yes ␣Yes``). The score is the mean of ``p``
over the questions (Soft-TIFA AM), or with ``aggregate: geometric`` their geometric mean (Soft-TIFA GM), not capped
at 1 (as GenEval2: variants whose first tokens coincide each count, so a sum may pass 1; at most 6, the most
variants a question has).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ...errors import ConfigError, InputError
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.vlm.common import JudgeOptions, VLMJudgeMixin
from ..models.vlm.judging import Failure

#: Soft-TIFA's question to the VLM (GenEval2 evaluation.py ``soft_tifa``, commit a6e82d2): ``{question}`` is one
#: atomic question of the prompt.
SOFT_TIFA_QUESTION = "{question} Answer in one word."

#: Named question templates (``{question}`` is one atomic question).
TEMPLATES = {"geneval2": SOFT_TIFA_QUESTION}
#: What runs by default: GenEval2's Soft-TIFA model and question.
DEFAULTS = {"model": "Qwen/Qwen3-VL-8B-Instruct", "template": "geneval2"}
#: GenEval2's number words and their digits (``return_numeric_string``).
NUMBERS = {
    w: str(i)
    for i, w in enumerate(("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"), start=1)
}


def answer_variants(question: str, answer: str) -> list[str]:
    """The strings whose first tokens' probabilities add up to P(answer) (module docstring)."""
    if question.startswith("How many"):
        out = [answer, answer.capitalize(), " " + answer, " " + answer.capitalize()]
        digits = NUMBERS.get(answer)
        return out + [digits, " " + digits] if digits is not None else out
    cap, low = answer[:1].upper() + answer[1:], answer.lower()
    return [cap, low, " " + low, " " + cap]


def read_questions(metadata: Any, sample: int) -> list[tuple[str, str]]:
    """``metadata["questions"]`` of one sample as (question, answer) pairs; InputError naming the sample."""
    try:
        meta = json.loads(metadata) if isinstance(metadata, str) else metadata
    except json.JSONDecodeError as exc:
        raise InputError(f"metadata is not valid JSON: {exc}", field="metadata", sample=sample) from None
    items = meta.get("questions") if isinstance(meta, dict) else None
    example = 'e.g. {"questions": [{"question": "Is there a cat?", "answer": "Yes"}]}'
    if not isinstance(items, list) or not items:
        raise InputError(
            f"tifa_vqa needs metadata['questions'], a non-empty list of {{question, answer}}; {example}",
            field="metadata",
            sample=sample,
        )
    out = []
    for k, item in enumerate(items):
        ok = isinstance(item, dict) and all(
            isinstance(item.get(key), str) and item[key].strip() for key in ("question", "answer")
        )
        if not ok:
            raise InputError(
                f"metadata['questions'][{k}] must be {{question: text, answer: text}}, got {str(item)[:80]}",
                field="metadata",
                sample=sample,
            )
        out.append((item["question"], item["answer"]))
    return out


class TifaVQA(VLMJudgeMixin, PointwiseReward):
    """Soft-TIFA: the mean over a sample's questions of the VLM's probability of each right answer.

    Inputs: ``image`` and ``metadata`` (``{"questions": [{"question", "answer"}, ...]}``). Range [0, 6] (above 1
    only when answer variants share a first token); higher is better. Options: :class:`Options`, with
    the backend options of :class:`~rewardzoo.rewards.models.vlm.common.JudgeOptions`.
    Every (image, question) pair of a call is scored in one batch. Extras: ``question_probs`` (a JSON list of the
    per-question probabilities, in the questions' order; ``""`` for a failed sample), ``min_prob`` and
    ``num_questions``. An endpoint failure on any of a sample's questions fails the sample (``on_failure``).
    """

    inputs: Inputs = Inputs(("image", "metadata"))
    default_model: str | None = DEFAULTS["model"]

    class Options(JudgeOptions):
        aggregate: Literal["mean", "geometric"] = "mean"
        """``mean`` (Soft-TIFA AM) or ``geometric`` (Soft-TIFA GM) over a sample's questions."""
        template: str | None = None
        """``geneval2`` (the default) or your own text with ``{question}``."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        judge_options = self.options
        self.aggregate, template = self.options.aggregate, self.options.template
        template = DEFAULTS["template"] if template is None else template
        text = TEMPLATES.get(template, template)
        if not isinstance(text, str) or text.count("{question}") != 1:
            raise ConfigError(
                f"{self.name}: the template must be a string with exactly one '{{question}}', got {str(text)[:80]!r}",
                field="kwargs.template",
            )
        self.template = text
        self.setup_judge(self.name, judge_options, model_path=model_path, device=device, dtype=dtype)

    def __call__(self, image: Sequence[Any], metadata: Sequence[Any], **_: Any) -> RewardOutput:
        questions = [read_questions(m, i) for i, m in enumerate(metadata)]
        if len(questions) != len(image):
            raise InputError(f"{len(metadata)} metadata for {len(image)} images", field="metadata")
        pairs = [(img, q, a) for img, qs in zip(image, questions) for q, a in qs]
        queries = self.queries_of(
            [self.template.replace("{question}", q) for _, q, _ in pairs], [[img] for img, _, _ in pairs]
        )
        variants = [answer_variants(q, a) for _, q, a in pairs]
        union = list(dict.fromkeys(v for vs in variants for v in vs))
        column = {v: j for j, v in enumerate(union)}
        probs = self.backend.answer_probs(queries, union)
        outcomes: list[float | Failure] = []
        texts, lows, at = [], [], 0
        for qs in questions:
            got = probs[at : at + len(qs)]
            mine = variants[at : at + len(qs)]
            at += len(qs)
            failed = next((p for p in got if isinstance(p, Failure)), None)
            if failed is not None:
                outcomes.append(failed)
                texts.append("")
                lows.append(math.nan)
                continue
            ps = np.array([sum(float(p[column[v]]) for v in vs) for p, vs in zip(got, mine)])
            outcomes.append(self.combine(ps))
            texts.append(json.dumps([float(x) for x in ps]))
            lows.append(float(ps.min()))
        scores, extras = self.resolve(outcomes)
        extras.update(question_probs=texts, min_prob=lows, num_questions=[float(len(qs)) for qs in questions])
        return RewardOutput(scores, extras=extras)

    def combine(self, probs: np.ndarray) -> float:
        """One sample's score from its per-question probabilities: their mean (or geometric mean), not capped
        (GenEval2 a6e82d2 ``evaluation.py`` 187-190 averages the sums as they are; variants sharing a first token
        count once per variant there, so a question's sum, and the score, may pass 1)."""
        if self.aggregate == "mean":
            return float(probs.mean())
        return 0.0 if (probs <= 0).any() else float(np.exp(np.log(probs).mean()))
