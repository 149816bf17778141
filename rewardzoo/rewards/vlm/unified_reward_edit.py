"""UnifiedReward-Edit (Wang et al., 2025): UnifiedReward's editing judges, pointwise and pairwise, as released in
``UnifiedReward-Edit/`` (served by vLLM as ``UnifiedReward``, images as JPEG quality 95 before the text,
``do_sample: False``, ``max_tokens: 4096``).

- **Pointwise** (``edit_pointwise_instruction_following.py``, ``edit_pointwise_quality.py``): EditScore's two
  VIEScore prompts at scale 0-25 (a blank line more in the output format, trailing commas), the source and the
  edited image for instruction following, the edited image alone for quality. By default rewardzoo scores the
  answers as EditScore does (:class:`~rewardzoo.rewards.vlm.edit_score.RubricEditJudge`): ``sqrt(SC * PQ)`` on
  0-10. ``preset: pref_grpo`` is Pref-GRPO 3e787f6's use (``unifiedreward_edit_pointwise.py`` 57-142,
  ``dispatcher.py`` 463-489, 670-693) as its published script runs it
  (``scripts/lora/lora_ur_edit_point_flux2_klein_edit.sh``: the two rewards weighted 0.5 each,
  ``EDIT_IF_WEIGHT_SUCCESS`` / ``_OVEREDIT`` and ``EDIT_QUALITY_WEIGHT_NATURALNESS`` / ``_ARTIFACTS`` 0.6 / 0.4,
  ``--apply_gdpo``: set ``advantage: pref_grpo``): each answer's ``score`` list read as JSON (the ``{...}`` span; an
  answer that does not parse, has no ``score`` or fewer than two numbers reads ``[0, 0]``), the four raw 0-25
  numbers are the streams ``success``, ``overedit``, ``naturalness``, ``artifacts``, weighted 0.3, 0.2, 0.3, 0.2 and
  normalised within their group by the unbiased std; ``preset: pref_grpo_defaults`` is the same with the code's
  defaults (each 1/2: two rewards of weight 1, each the mean of its two dimensions). The score is the mean of the
  four over 2.5, clipped to 0-10.
- **Pairwise** (``edit_paiwise_score.py``): the source and two edits with the instruction; the answer scores each
  edit: the first two decimal numbers, signed (the prompt asks for negative scores too); ``preset: release`` reads
  them as the release's closing comment does, ``([0-9]+\\.[0-9]+)``, which drops a minus sign. The higher wins,
  equal scores tie. ``preset: pref_grpo``: the release's rank prompt (``edit_pairwise_rank.py``), read as
  Pref-GRPO 3e787f6 reads it (``templates.py`` 238-239, ``unifiedreward_edit_pairwise.py`` 13-60): the text of the
  ``<answer>`` tag (else the whole answer) saying "Edited image 1 is better" or "... 2 ...", else the whole
  answer, else a tie. :class:`UnifiedRewardEditJudge` answers the pairs of a group for
  :class:`~rewardzoo.rewards.models.groups.PairwiseJudged` (``unified_reward_edit_pairwise``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from ...shared.editing import edit_inputs
from ...shared.files import text_blocks
from ..base import Inputs, RewardOutput
from ..models.clip import check_pairs
from ..models.groups import PairwiseJudged
from ..models.vlm.common import VLMJudgeMixin, check_prompts, fill
from ..models.vlm.judging import Failure, rubric_scores
from ..models.vlm.options import JudgeOptions
from ..options import PositiveInt
from .edit_score import RubricEditJudge

# The release's prompts, verbatim, from the data file beside this module (unified_reward_edit_prompts.txt), each the
# ``problem`` of a UnifiedReward ff6f520 script with ``{prompt}`` where it puts the instruction:
# ``..._INSTRUCTION_FOLLOWING``: UnifiedReward-Edit/edit_pointwise_instruction_following.py (EditScore's VIEScore
# prompt at scale 0-25; the source and the edited image come first); ``..._QUALITY``: edit_pointwise_quality.py (the
# edited image alone first); ``..._PAIRWISE_SCORE``: edit_paiwise_score.py (an f-string; the source and the two edits
# first); ``..._PAIRWISE_RANK``: edit_pairwise_rank.py as Pref-GRPO 3e787f6 sends it (``fastvideo/rewards/
# templates.py`` ``get_unifiedreward_edit_pairwise_template``; it states no answer format: Pref-GRPO reads "Edited
# image 1/2 is better").
_PROMPTS = text_blocks(Path(__file__).with_name("unified_reward_edit_prompts.txt"))
UNIFIED_REWARD_EDIT_INSTRUCTION_FOLLOWING = _PROMPTS["UNIFIED_REWARD_EDIT_INSTRUCTION_FOLLOWING"]
UNIFIED_REWARD_EDIT_QUALITY = _PROMPTS["UNIFIED_REWARD_EDIT_QUALITY"]
UNIFIED_REWARD_EDIT_PAIRWISE_RANK = _PROMPTS["UNIFIED_REWARD_EDIT_PAIRWISE_RANK"]
UNIFIED_REWARD_EDIT_PAIRWISE_SCORE = _PROMPTS["UNIFIED_REWARD_EDIT_PAIRWISE_SCORE"]

#: The release's prompts: the pointwise pair and the pairwise one.
_POINTWISE = (UNIFIED_REWARD_EDIT_INSTRUCTION_FOLLOWING, UNIFIED_REWARD_EDIT_QUALITY)
PAIRWISE_TEMPLATES: dict[str, str] = {
    "pairwise_score": UNIFIED_REWARD_EDIT_PAIRWISE_SCORE,
    "pairwise_rank": UNIFIED_REWARD_EDIT_PAIRWISE_RANK,
}
TEMPLATES = {"unified_reward_edit": _POINTWISE, **PAIRWISE_TEMPLATES}
DEFAULT_MODEL = "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b"
#: The release's request: images as JPEG quality 95 (``_encode_image``).
ENDPOINT_DEFAULTS = {"image_format": "jpeg", "jpeg_quality": 95}
#: The release's score pattern (the comment closing ``edit_paiwise_score.py``): it drops a minus sign.
DECIMAL = r"([0-9]+\.[0-9]+)"
#: The default reading: the same decimals with their sign.
SIGNED_DECIMAL = r"(-?[0-9]+\.[0-9]+)"
#: The pointwise streams: the instruction-following answer's two numbers, then the quality answer's.
STREAMS = ("success", "overedit", "naturalness", "artifacts")
#: The streams' weights under each Pref-GRPO preset (module docstring): its script's 0.5 x (0.6, 0.4) per reward,
#: its code's 1 x (1/2, 1/2).
PREF_GRPO_STREAM_WEIGHTS = {
    "pref_grpo": dict(zip(STREAMS, (0.3, 0.2, 0.3, 0.2))),
    "pref_grpo_defaults": dict.fromkeys(STREAMS, 0.5),
}
#: Pref-GRPO's verdicts in the rank prompt's answer.
VERDICTS = ("Edited image 1 is better", "Edited image 2 is better")


def pref_grpo_pair(text: str) -> list[float]:
    """Pref-GRPO's reading of a pointwise answer: the ``score`` list of its JSON object (the whole text, or the
    span from the first ``{`` to the last ``}``), its first two numbers; ``[0, 0]`` for anything else."""
    text = (text or "").strip()
    payload: str | None = None
    try:
        decoded = json.loads(text)
        if isinstance(decoded, dict):
            payload = text
        elif isinstance(decoded, str):
            text = decoded.strip()
    except json.JSONDecodeError:
        pass
    if payload is None:
        span = re.search(r"\{.*\}", text, re.DOTALL)
        payload = span.group(0) if span else None
    try:
        scores = json.loads(payload).get("score") if payload is not None else None
        if isinstance(scores, (list, tuple)) and len(scores) >= 2:
            return [float(scores[0]), float(scores[1])]
    except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
        pass
    return [0.0, 0.0]


class UnifiedRewardEdit(RubricEditJudge):
    """UnifiedReward-Edit pointwise: ``sqrt(SC * PQ)`` on 0-10 from its instruction-following and quality answers.

    Inputs and extras: :class:`~rewardzoo.rewards.vlm.edit_score.RubricEditJudge`'s, and the streams ``success``,
    ``overedit``, ``naturalness``, ``artifacts`` (the answers' raw 0-25 numbers). Options: :class:`Options`.
    """

    templates: ClassVar[dict[str, tuple[str, str]]] = {"unified_reward_edit": _POINTWISE}
    defaults: ClassVar[dict[str, Any]] = {
        "model": DEFAULT_MODEL,
        "template": "unified_reward_edit",
        "pq_source": False,
        "scale": 1.0,
    }
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        preset: {"model": DEFAULT_MODEL, "template": "unified_reward_edit", "pq_source": False, "scale": 1.0}
        for preset in ("pref_grpo", "pref_grpo_defaults")
    }
    endpoint_defaults: ClassVar[dict[str, Any]] = ENDPOINT_DEFAULTS
    streams: ClassVar[tuple[str, ...]] = STREAMS

    class Options(RubricEditJudge.Options):
        preset: Literal["pref_grpo", "pref_grpo_defaults"] | None = None
        """null, or ``pref_grpo`` (Pref-GRPO's script: streams 0.3 / 0.2 / 0.3 / 0.2, with ``advantage:
        pref_grpo``) or ``pref_grpo_defaults`` (its code's: 1/2 each): Pref-GRPO's reading and group-normalised
        streams (module docstring)."""
        max_new_tokens: PositiveInt = 4096
        """Tokens the judge may write per answer (the release's ``max_tokens``)."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        if self.preset in PREF_GRPO_STREAM_WEIGHTS:
            weights = PREF_GRPO_STREAM_WEIGHTS[self.preset]
            self.default_streams = {k: {"weight": weights[k], "normalize": "group_unbiased"} for k in STREAMS}

    def __call__(
        self, prompt: Sequence[str], image: Sequence[Any], condition_images: Sequence[Any] | None = None, **_: Any
    ) -> RewardOutput:
        if self.preset not in PREF_GRPO_STREAM_WEIGHTS:
            out = super().__call__(prompt, image, condition_images)
            extras = dict(out.extras or {})
            for answers, keys in ((extras["sc_answer"], STREAMS[:2]), (extras["pq_answer"], STREAMS[2:])):
                read = [rubric_scores(a) for a in answers]
                for k, key in enumerate(keys):
                    extras[key] = [
                        r[0][k] if not isinstance(r, Failure) and len(r[0]) > k else float("nan") for r in read
                    ]
            return RewardOutput(out.rewards, extras=extras)
        return self._pref_grpo(prompt, image, condition_images)

    def _pref_grpo(self, prompt: Sequence[str], image: Sequence[Any], condition_images: Any) -> RewardOutput:
        """``preset: pref_grpo``: the same two requests, Pref-GRPO's reading (module docstring)."""
        edits = edit_inputs(condition_images)
        prompts = check_prompts(prompt, check_pairs(image=image, condition_images=edits))
        sc_text, pq_text = self.queries_text
        n = len(image)
        queries = self.queries_of([fill(sc_text, p) for p in prompts], [[e.source, im] for e, im in zip(edits, image)])
        queries += self.queries_of([pq_text] * n, [[im] for im in image])
        answers = self.backend.generate(queries, max_new_tokens=self.max_new_tokens)
        pairs = [a if isinstance(a, Failure) else pref_grpo_pair(a) for a in answers]
        outcomes: list[float | Failure] = []
        for sc, pq in zip(pairs[:n], pairs[n:]):
            if isinstance(sc, Failure):
                outcomes.append(sc)
            elif isinstance(pq, Failure):
                outcomes.append(pq)
            else:
                outcomes.append(min(10.0, max(0.0, sum([*sc, *pq]) / 4 / 2.5)))
        scores, extras = self.resolve(outcomes)
        for k, key in enumerate(STREAMS):
            answered = pairs[:n] if k < 2 else pairs[n:]  # success / overedit, then naturalness / artifacts
            extras[key] = [float("nan") if isinstance(p, Failure) else p[k % 2] for p in answered]
        extras["sc_answer"] = [a.answer or "" if isinstance(a, Failure) else a for a in answers[:n]]
        extras["pq_answer"] = [a.answer or "" if isinstance(a, Failure) else a for a in answers[n:]]
        return RewardOutput(scores, extras=extras)


def pairwise_verdict(text: str, pattern: str = SIGNED_DECIMAL) -> float | Failure:
    """P(first edit beats the second) from a pairwise-score answer: the first two decimals (``pattern``) compared."""
    found = re.findall(pattern, text)
    if len(found) < 2:
        return Failure("unparseable", f"fewer than two scores matching {pattern!r}", text)
    first, second = float(found[0]), float(found[1])
    return 1.0 if first > second else 0.0 if first < second else 0.5


def rank_verdict(text: str) -> float:
    """P(first edit beats the second) from a rank-prompt answer, as Pref-GRPO reads it: "Edited image 1 is
    better" (case-insensitive) in the ``<answer>`` tag's text (else the whole answer) wins for the first, "... 2
    ..." for the second; failing both there, the same in the whole answer; else (or an empty answer) a tie."""
    tag = re.search(r"<answer>(.*?)</answer>", text or "", re.DOTALL | re.IGNORECASE)
    verdict = (tag.group(1) if tag else text or "").strip().lower()
    if not verdict:
        return 0.5
    whole = (text or "").lower()
    for where in (verdict, whole):
        for label, value in zip(VERDICTS, (1.0, 0.0)):
            if label.lower() in where:
                return value
    return 0.5


#: The pairwise ``preset`` values: (template key, how the answer is read).
PAIRWISE_PRESETS = {None: "pairwise_score", "release": "pairwise_score", "pref_grpo": "pairwise_rank"}


class UnifiedRewardEditJudge(VLMJudgeMixin):
    """The pairwise judge: ``judge_pairs([(first, second), ...]) -> (P(first beats second) per pair, extras)``.

    ``first`` / ``second``: dicts of ``prompt``, ``image`` (the edit) and ``condition_images`` (the source first;
    the first sample's source and instruction are used: a group edits one source). Options: :class:`Options` (given as
    keywords, or ``options=`` already checked). Per-pair extras:
    ``substituted``, ``tie``.
    """

    thread_safe: bool = True
    default_model: str | None = DEFAULT_MODEL
    required_fields = ("prompt", "image", "condition_images")

    class Options(JudgeOptions):
        preset: Literal["release", "pref_grpo"] | None = None
        """null: the pairwise-score prompt, signed scores; ``release``: its unsigned reading; ``pref_grpo``: the rank
        prompt and Pref-GRPO's verdicts (module docstring)."""
        max_new_tokens: PositiveInt = 4096
        """Tokens the judge may write."""
        max_batch: PositiveInt = 16
        """Pairs per generate call on the local backend (the endpoint gets them all)."""

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        *,
        name: str = "unified_reward_edit_pairwise",
        options: UnifiedRewardEditJudge.Options | None = None,
        **kwargs: Any,
    ) -> None:
        judge_options = o = options if options is not None else self.Options.from_kwargs(kwargs, type(self).__name__)
        self.preset = o.preset
        self.template = PAIRWISE_TEMPLATES[PAIRWISE_PRESETS[o.preset]]
        self.max_new_tokens, self.max_batch = o.max_new_tokens, o.max_batch
        if o.endpoint is not None:
            judge_options = o.model_copy(update={"endpoint": {**ENDPOINT_DEFAULTS, **o.endpoint}})
        self.setup_judge(name, judge_options, model_path=model_path, device=device, dtype=dtype)

    def judge_pairs(self, pairs: Sequence[tuple[dict, dict]]) -> tuple[list[float], dict[str, list[float]]]:
        from ...shared.editing import edit_inputs

        sources = edit_inputs([first["condition_images"] for first, _ in pairs])
        queries = self.queries_of(
            [fill(self.template, first["prompt"]) for first, _ in pairs],
            [[src.source, first["image"], second["image"]] for src, (first, second) in zip(sources, pairs)],
        )
        step = len(queries) if self.backend.kind == "openai" else self.max_batch
        answers = [
            a
            for i in range(0, len(queries), step)
            for a in self.backend.generate(queries[i : i + step], max_new_tokens=self.max_new_tokens)
        ]
        outcomes = [a if isinstance(a, Failure) else self.verdict(a) for a in answers]
        scores, extras = self.resolve(outcomes)
        ties = [1.0 if not isinstance(o, Failure) and o == 0.5 else 0.0 for o in outcomes]
        return [float(s) for s in scores], {"substituted": list(extras["substituted"]), "tie": ties}

    def verdict(self, answer: str) -> float | Failure:
        """P(first beats second) from one answer, read as the preset says (module docstring)."""
        if self.preset == "pref_grpo":
            return rank_verdict(answer)
        return pairwise_verdict(answer, DECIMAL if self.preset == "release" else SIGNED_DECIMAL)

    def __call__(self, first: dict, second: dict) -> float:
        """One pair (the per-pair protocol of PairwiseJudged)."""
        return self.judge_pairs([(first, second)])[0][0]


class UnifiedRewardEditPairwise(PairwiseJudged):
    """Pref-GRPO's pairwise win rate over the edits of a group with :class:`UnifiedRewardEditJudge`.

    Inputs: ``prompt``, ``image``, ``condition_images`` and ``group_id``. Range [0, 1]. Options: those of
    :class:`UnifiedRewardEditJudge`. Extras:
    ``wins``, and per sample ``substituted`` / ``tie``.
    """

    inputs: Inputs = Inputs(("prompt", "image", "condition_images", "group_id"))

    Options = UnifiedRewardEditJudge.Options
    options: UnifiedRewardEditJudge.Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        checked = self.Options.from_kwargs(options, type(self).__name__)
        judge = UnifiedRewardEditJudge(model_path, device, dtype, options=checked)
        super().__init__(model_path, device, dtype)  # the judge is its own model, loaded above
        self.use_judge(judge, "unified_reward_edit_pairwise")
        self.io_bound = judge.io_bound
        self.template, self.backend = judge.template, judge.backend  # what it runs, as a pointwise judge says

    @property
    def substitutions(self) -> int:
        """Pair verdicts substituted since this reward was built."""
        judge = self.judge
        return judge.substitutions if isinstance(judge, UnifiedRewardEditJudge) else 0
