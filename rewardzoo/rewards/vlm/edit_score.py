"""EditScore (VectorSpaceLab, 2025): a VIEScore-style rubric judge of image edits, Qwen2.5-VL / Qwen3-VL fine-tunes.

Each edit is judged twice, with EditScore's VIEScore prompts at ``score_range: 25``:

- **SC** (semantic consistency): the source and the edited image, labelled ``<img1>:`` / ``<img2>:`` as
  EditScore's own chat template writes them, and the rules asking for ``[editing success, over-editing]``;
- **PQ** (perceptual quality): the edited image (``evaluate``; OmniGen2-RL's reward server, through
  ``batch_evaluate``, shows both images) and the rules asking for ``[naturalness, artifacts]``.

Each answer is ``{"reasoning": ..., "score": [...]}``, read as EditScore's ``evaluate`` reads it
(:func:`evaluate_answer`, its ``mllm_output_to_dict``; ``preset: omnigen2_rl``: as ``batch_evaluate`` reads it,
:func:`~rewardzoo.rewards.models.vlm.judging.rubric_scores`); ``SC = min(SC scores) / 2.5``, ``PQ = min(PQ scores) / 2.5``
(both on 0-10) and ``overall = sqrt(SC * PQ)`` (EditScore's ``evaluate``). An answer that fails fails its own
dimension: ``on_failure: {substitute: VALUE}`` puts ``VALUE`` (on the 0-10 scale of SC and PQ, on every preset) in
that dimension only, as ``batch_evaluate`` puts ``12.5 / 2.5`` there. :class:`RubricEditJudge` holds that scheme;
``unified_reward_edit`` runs it with UnifiedReward-Edit's prompts (substituting on the overall score).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ...errors import ConfigError
from ...shared.editing import edit_inputs
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import check_pairs
from ..models.vlm.common import VLMJudgeMixin, check_prompts, fill
from ..models.vlm.judging import Failure, FailurePolicy, rubric_scores
from ..models.vlm.options import JudgeOptions
from ..options import PositiveInt

# VectorSpaceLab/EditScore editscore/vie_prompts.py, as EditScore.__init__ joins them (``score_range`` in for 10)
CONTEXT = """You are a professional digital artist. You will have to evaluate the effectiveness of the AI-generated image(s) based on given rules.
All the input images are AI-generated. All human in the images are AI-generated too. so you need not worry about the privacy confidentials.

IMPORTANT: You will have to give your output in this way (Keep your reasoning concise and short.):
{
"reasoning" : "...",
"score" : [...]
}
"""
TWO_IMAGE_EDIT_RULE = """RULES:

Two images will be provided: The first being the original AI-generated image and the second being an edited version of the first.
The objective is to evaluate how successfully the editing instruction has been executed in the second image.

Note that sometimes the two images might look identical due to the failure of image edit.
"""
SC_RULE = """
From scale 0 to 10: 
A score from 0 to 10 will be given based on the success of the editing. (0 indicates that the scene in the edited image does not follow the editing instruction at all. 10 indicates that the scene in the edited image follow the editing instruction text perfectly.)
A second score from 0 to 10 will rate the degree of overediting in the second image. (0 indicates that the scene in the edited image is completely different from the original. 10 indicates that the edited image can be recognized as a minimal edited yet effective version of original.)
Put the score in a list such that output score = [score1, score2], where 'score1' evaluates the editing success and 'score2' evaluates the degree of overediting.

Editing instruction: <instruction>
"""
PQ_RULE = """RULES:

The image is an AI-generated image.
The objective is to evaluate how successfully the image has been generated.

From scale 0 to 10: 
A score from 0 to 10 will be given based on image naturalness. 
(
    0 indicates that the scene in the image does not look natural at all or give a unnatural feeling such as wrong sense of distance, or wrong shadow, or wrong lighting. 
    10 indicates that the image looks natural.
)
A second score from 0 to 10 will rate the image artifacts. 
(
    0 indicates that the image contains a large portion of distortion, or watermark, or scratches, or blurred faces, or unusual body parts, or subjects not harmonized. 
    10 indicates the image has no artifacts.
)
Put the score in a list such that output score = [naturalness, artifacts]
"""
#: EditScore's score range (its README and OmniGen2-RL run 25).
SCORE_RANGE = 25


def editscore_prompts(score_range: int = SCORE_RANGE) -> tuple[str, str]:
    """(SC prompt with ``{prompt}`` for the instruction, PQ prompt), as ``EditScore.__init__`` builds them."""
    sc = "\n".join([CONTEXT, TWO_IMAGE_EDIT_RULE, SC_RULE.replace("10", str(score_range))])
    pq = "\n".join([CONTEXT, PQ_RULE.replace("10", str(score_range))])
    return sc.replace("<instruction>", "{prompt}"), pq


def _labelled(n: int) -> str:
    """EditScore's ``apply_chat_template`` image run: ``<img1>: <image><img2>: <image>...``."""
    return "".join(f"<img{i}>: <image>" for i in range(1, n + 1))


def unlabelled(template: str) -> str:
    """A template's images without their ``<imgN>: `` labels: how EditScore's Qwen3-VL tools show them (the
    processor's own chat template, images then text: ``mllm_tools/qwen3vl.py`` 55-63, ``qwen3vl_vllm.py``
    102-109)."""
    for i in range(9, 0, -1):
        template = template.replace(f"<img{i}>: <image>", "<image>")
    return template


#: The delimiter EditScore's ``mllm_output_to_dict`` looks for first (VIEScore's output format).
DELIMITER = "||V^=^V||"
_SMART_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})


def _small_int(text: str) -> int | None:
    """``int(text)`` when it is one and in 0..10 (EditScore's ``is_int_between_0_and_10``), else None."""
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 <= value <= 10 else None


def evaluate_answer(text: str) -> tuple[list[float], str] | Failure:
    """(scores, reasoning) of one answer as EditScore 6e0f1b9's ``evaluate`` reads it (``mllm_output_to_dict``).

    The text between two ``||V^=^V||`` when it holds exactly two; else from the first ``{`` to the last ``}``;
    without braces, a bare ``[a, b]`` of integers (the span from the first ``[`` to the last ``]``) or a bare
    integer 0-10 is the score. The span, stripped, without newlines and with curly quotes made straight, is
    read as JSON and its ``score`` (a number is a list of one). Where that JSON does not load or has no
    ``score``, EditScore repairs it with the ``json_repair`` package; here
    :func:`~rewardzoo.rewards.models.vlm.judging.rubric_scores` (``parse_vlm_output_to_dict``'s repairs) reads it.
    Unparseable: no span, an empty one, or a ``score`` that is not a non-empty list of numbers.
    """
    if text.count(DELIMITER) == 2:
        start, end = text.find(DELIMITER) + len(DELIMITER), text.rfind(DELIMITER)
    else:
        start, end = text.find("{"), text.rfind("}") + 1
        if start == -1 or end == 0:
            bare = text[text.find("[") : text.rfind("]") + 1]
            if re.match(r"^\[\d+, ?\d+\]$", bare):
                return [float(x) for x in json.loads(bare)], ""
            number = _small_int(text)
            if number is not None:
                return [float(number)], ""
            return Failure("unparseable", "no JSON object, score list or number 0-10 in the answer", text)
    if start == end:
        return Failure("unparseable", "the answer's JSON span is empty", text)
    span = text[start:end].strip().replace("\n", "").translate(_SMART_QUOTES)
    try:
        data = json.loads(span)
        value = data["score"]
    except (json.JSONDecodeError, TypeError, KeyError):
        return rubric_scores(span)  # where EditScore calls json_repair
    scores = value if isinstance(value, list) else [value]
    if not scores or not all(isinstance(x, (int, float)) for x in scores):
        return Failure("unparseable", f"the answer's 'score' is not a list of numbers: {value!r}", text)
    reasoning = data.get("reasoning")
    return [float(x) for x in scores], reasoning if isinstance(reasoning, str) else ""


#: The answer readers a pairing names (``parse``): EditScore's ``evaluate`` and ``batch_evaluate`` readings.
PARSERS = {"mllm_output_to_dict": evaluate_answer, "parse_vlm_output_to_dict": rubric_scores}

_SC, _PQ = editscore_prompts()
#: Named templates: (SC text, PQ text) with the images where ``<image>`` stands.
TEMPLATES = {"editscore": (_labelled(2) + _SC, _labelled(1) + _PQ)}
#: What each pairing sets: the template, whether the PQ query shows the source too, and the score's divisor.
DEFAULTS = {
    "model": "EditScore/EditScore-7B",
    "template": "editscore",
    "pq_source": False,
    "scale": 1.0,
    "parse": "mllm_output_to_dict",
}
PRESETS = {
    "omnigen2_rl": {
        "model": "EditScore/EditScore-7B",
        "template": "editscore",
        "pq_source": True,
        "scale": 10.0,
        "parse": "parse_vlm_output_to_dict",
        "templates": (_labelled(2) + _SC, _labelled(2) + _PQ),
    }
}


class RubricEditJudge(VLMJudgeMixin, PointwiseReward):
    """An SC / PQ rubric judge of edits (module docstring): ``sqrt(SC * PQ) / scale`` with SC, PQ on 0-10.

    Inputs: ``prompt`` (the instruction), ``image`` (the edited result), ``condition_images`` (the source
    first; a mask is checked and not shown). Extras: ``semantic_consistency`` (SC), ``perceptual_quality`` (PQ),
    ``prompt_following`` and ``consistency`` (the SC answer's two scores / 2.5 when it gives two, else NaN),
    ``sc_reasoning`` / ``pq_reasoning`` (texts), ``sc_answer`` / ``pq_answer`` (the judge's answers),
    ``substituted`` / ``failure``. An answer with no score, or an SC
    or PQ outside [0, 10], is unparseable (``on_failure`` decides: with ``per_dimension`` the substitute, on the
    0-10 scale, stands for the failed dimension, else for the score). Subclasses set the templates, defaults
    (``parse``: a :data:`PARSERS` name, ``parse_vlm_output_to_dict`` when left out) and presets.
    """

    inputs: Inputs = Inputs(("prompt", "image", "condition_images"))
    templates: ClassVar[dict[str, tuple[str, str]]] = TEMPLATES
    defaults: ClassVar[dict[str, Any]] = DEFAULTS
    presets: ClassVar[dict[str, dict[str, Any]]] = PRESETS
    answer_range: ClassVar[int] = SCORE_RANGE  # the rubric's 0..N answer scale
    endpoint_defaults: ClassVar[dict[str, Any]] = {}
    #: Whether the ``<imgN>: `` labels follow the model (EditScore: Qwen2.5-VL with them, Qwen3-VL without).
    labels_follow_model: ClassVar[bool] = False
    #: Whether ``on_failure: {substitute: VALUE}`` replaces a failed dimension (SC or PQ, VALUE on 0-10: EditScore's
    #: ``batch_evaluate``) rather than the score.
    per_dimension: ClassVar[bool] = False

    class Options(JudgeOptions):
        preset: str | None = None
        """null (the judge's defaults) or one of its presets (module docstring)."""
        max_new_tokens: PositiveInt = 512
        """Tokens the judge may write per answer."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        judge_options = self.options
        preset = judge_options.preset
        if preset is not None and preset not in self.presets:
            raise ConfigError(
                f"{self.name}: preset must be null or one of {sorted(self.presets)}, got {preset!r}",
                field="kwargs.preset",
            )
        self.preset = preset
        chosen = self.presets[preset] if preset is not None else self.defaults
        self.default_model = chosen["model"]
        self.template = self.templates[chosen["template"]]
        self.queries_text = chosen.get("templates", self.template)
        self.pq_source = bool(chosen["pq_source"])
        self.scale = float(chosen["scale"])
        self.parse = PARSERS[chosen.get("parse", "parse_vlm_output_to_dict")]
        self.max_new_tokens = judge_options.max_new_tokens
        if self.endpoint_defaults and judge_options.endpoint is not None:
            endpoint = {**self.endpoint_defaults, **judge_options.endpoint}
            judge_options = judge_options.model_copy(update={"endpoint": endpoint})
        self.setup_judge(self.name, judge_options, model_path=model_path, device=device, dtype=dtype)
        if self.per_dimension:  # the substitute is an SC or PQ value, on 0-10 whatever the preset's scale
            self.policy = FailurePolicy.from_option(judge_options.on_failure, owner=self.name, score_range=(0.0, 10.0))
        if self.labels_follow_model and str(
            getattr(getattr(self.backend, "backbone", None), "model_type", "")
        ).startswith("qwen3"):
            self.queries_text = tuple(unlabelled(t) for t in self.queries_text)

    def dimension(self, text: str) -> tuple[float, list[float], str] | Failure:
        """(min score / (range / 10), the scores, the reasoning) of one answer, or a Failure."""
        found = self.parse(text)
        if isinstance(found, Failure):
            return found
        scores, reasoning = found
        value = min(scores) / (self.answer_range / 10)
        if not 0.0 <= value <= 10.0:
            return Failure("unparseable", f"score {min(scores):g} is outside [0, {self.answer_range}]", text)
        return value, scores, reasoning

    def __call__(
        self, prompt: Sequence[str], image: Sequence[Any], condition_images: Sequence[Any] | None = None, **_: Any
    ) -> RewardOutput:
        edits = edit_inputs(condition_images)
        prompts = check_prompts(prompt, check_pairs(image=image, condition_images=edits))
        sc_text, pq_text = self.queries_text
        n = len(image)
        queries = self.queries_of([fill(sc_text, p) for p in prompts], [[e.source, im] for e, im in zip(edits, image)])
        queries += self.queries_of(
            [pq_text] * n, [[e.source, im] if self.pq_source else [im] for e, im in zip(edits, image)]
        )
        answers = self.backend.generate(queries, max_new_tokens=self.max_new_tokens)
        outcomes: list[float | Failure] = []
        parts = []
        for sc_answer, pq_answer in zip(answers[:n], answers[n:]):
            sc = sc_answer if isinstance(sc_answer, Failure) else self.dimension(sc_answer)
            pq = pq_answer if isinstance(pq_answer, Failure) else self.dimension(pq_answer)
            if isinstance(sc, Failure):
                outcomes.append(sc)
            elif isinstance(pq, Failure):
                outcomes.append(pq)
            else:
                outcomes.append(math.sqrt(sc[0] * pq[0]) / self.scale)
            parts.append((sc, pq))
        scores, extras = self.resolve(outcomes)  # raises on a failure unless on_failure substitutes
        nan = float("nan")
        sub = self.policy.substitute if self.per_dimension else None
        value = lambda d: (nan if sub is None else sub) if isinstance(d, Failure) else d[0]  # noqa: E731
        if sub is not None:  # the substitute stands for the failed dimension(s) only
            scores = np.array([math.sqrt(value(sc) * value(pq)) / self.scale for sc, pq in parts], dtype=np.float64)
        extras["semantic_consistency"] = [value(sc) for sc, _ in parts]
        extras["perceptual_quality"] = [value(pq) for _, pq in parts]
        unit = self.answer_range / 10
        extras["prompt_following"] = [
            sc[1][0] / unit if not isinstance(sc, Failure) and len(sc[1]) > 1 else nan for sc, _ in parts
        ]
        extras["consistency"] = [
            sc[1][1] / unit if not isinstance(sc, Failure) and len(sc[1]) > 1 else nan for sc, _ in parts
        ]
        extras["sc_reasoning"] = ["" if isinstance(sc, Failure) else sc[2] for sc, _ in parts]
        extras["pq_reasoning"] = ["" if isinstance(pq, Failure) else pq[2] for _, pq in parts]
        text = lambda a: a.answer or "" if isinstance(a, Failure) else a  # noqa: E731
        extras["sc_answer"] = [text(a) for a in answers[:n]]
        extras["pq_answer"] = [text(a) for a in answers[n:]]
        return RewardOutput(scores, extras=extras)


class EditScore(RubricEditJudge):
    """EditScore: ``overall = sqrt(SC * PQ)`` on 0-10 (``preset: omnigen2_rl``: OmniGen2-RL's reward, PQ shown
    both images, ``overall / 10``). See :class:`RubricEditJudge` for inputs, extras and options
    (``max_new_tokens`` 512, EditScore's).
    The released models are LoRA adapters on Qwen2.5-VL-7B / Qwen3-VL: serve the adapter (vLLM ``--lora-modules``)
    and name it in ``endpoint.model``, or give the local backend a merged checkpoint as ``model_path``. A local
    Qwen3-VL checkpoint gets the images without the ``<imgN>: `` labels, as EditScore's Qwen3-VL tools send them;
    an endpoint always gets the labels (its model type is not known here). Answers are read as ``evaluate`` reads
    them (``omnigen2_rl``: as ``batch_evaluate`` does); ``on_failure: {substitute: VALUE}`` puts VALUE (0-10) in
    the failed dimension.
    """

    labels_follow_model: ClassVar[bool] = True
    per_dimension: ClassVar[bool] = True
