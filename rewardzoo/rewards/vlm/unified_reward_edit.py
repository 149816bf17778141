"""UnifiedReward-Edit (Wang et al., 2025): UnifiedReward's editing judges, pointwise and pairwise, as released in
``UnifiedReward-Edit/`` (served by vLLM as ``UnifiedReward``, images as JPEG quality 95 before the text,
``do_sample: False``, ``max_tokens: 4096``).

- **Pointwise** (``edit_pointwise_instruction_following.py``, ``edit_pointwise_quality.py``): EditScore's two
  VIEScore prompts at scale 0-25 (a blank line more in the output format, trailing commas), the source and the
  edited image for instruction following, the edited image alone for quality. The release prints the answers;
  rewardzoo scores them as EditScore does (:class:`~rewardzoo.rewards.vlm.edit_score.RubricEditJudge`):
  ``sqrt(SC * PQ)`` on 0-10.
- **Pairwise** (``edit_paiwise_score.py``): the source and two edits with the instruction; the answer scores each
  edit, read as the release's comment says (the first two decimal numbers, pattern ``([0-9]+\\.[0-9]+)``); the
  higher wins, equal scores tie. :class:`UnifiedRewardEditJudge` answers the pairs of a group for
  :class:`~rewardzoo.rewards.group.ranking.PairwiseWinRate` (``unified_reward_edit_pairwise``). The release's
  ``edit_pairwise_rank.py`` prompt, which Pref-GRPO 3e787f6 reads for "Edited image 1/2 is better"
  (``templates.py`` 238-239, ``unifiedreward_edit_pairwise.py`` 13-60), is not offered yet.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from ...shared.options import positive_int
from ..base import Inputs
from ..group.ranking import PairwiseWinRate
from .common import ALL_OPTIONS, BackendOptions, VLMJudgeMixin, fill
from .edit_score import RubricEditJudge
from .judging import Failure
from .prompts import (
    UNIFIED_REWARD_EDIT_INSTRUCTION_FOLLOWING,
    UNIFIED_REWARD_EDIT_PAIRWISE_SCORE,
    UNIFIED_REWARD_EDIT_QUALITY,
)

#: The release's prompts (:mod:`rewardzoo.rewards.vlm.prompts`): the pointwise pair and the pairwise one.
_POINTWISE = (UNIFIED_REWARD_EDIT_INSTRUCTION_FOLLOWING, UNIFIED_REWARD_EDIT_QUALITY)
TEMPLATES = {
    "unified_reward_edit": _POINTWISE,
    "pairwise_score": UNIFIED_REWARD_EDIT_PAIRWISE_SCORE,
}
DEFAULT_MODEL = "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b"
#: The release's request: images as JPEG quality 95 (``_encode_image``).
ENDPOINT_DEFAULTS = {"image_format": "jpeg", "jpeg_quality": 95}
#: The release's score pattern (the comment closing ``edit_paiwise_score.py``).
DECIMAL = r"([0-9]+\.[0-9]+)"


class UnifiedRewardEdit(RubricEditJudge):
    """UnifiedReward-Edit pointwise: ``sqrt(SC * PQ)`` on 0-10 from its instruction-following and quality answers.

    Inputs and extras: :class:`~rewardzoo.rewards.vlm.edit_score.RubricEditJudge`'s. Options: ``max_new_tokens``
    (4096, the release's ``max_tokens``), the backend and failure options of :mod:`rewardzoo.rewards.vlm.common`.
    """

    templates: ClassVar[dict[str, tuple[str, str]]] = {"unified_reward_edit": _POINTWISE}
    defaults: ClassVar[dict[str, Any]] = {
        "model": DEFAULT_MODEL,
        "template": "unified_reward_edit",
        "pq_source": False,
        "scale": 1.0,
    }
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    endpoint_defaults: ClassVar[dict[str, Any]] = ENDPOINT_DEFAULTS

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        *,
        max_new_tokens: int = 4096,
        **options: Any,
    ) -> None:
        super().__init__(model_path, device, dtype, max_new_tokens=max_new_tokens, **options)


def pairwise_verdict(text: str) -> float | Failure:
    """P(first edit beats the second) from a pairwise-score answer: the first two decimals compared."""
    found = re.findall(DECIMAL, text)
    if len(found) < 2:
        return Failure("unparseable", f"fewer than two scores matching {DECIMAL!r}", text)
    first, second = float(found[0]), float(found[1])
    return 1.0 if first > second else 0.0 if first < second else 0.5


class UnifiedRewardEditJudge(VLMJudgeMixin):
    """The pairwise judge: ``judge_pairs([(first, second), ...]) -> (P(first beats second) per pair, extras)``.

    ``first`` / ``second``: dicts of ``prompt``, ``image`` (the edit) and ``condition_images`` (the source first;
    the first sample's source and instruction are used: a group edits one source). Options: ``max_new_tokens``
    (4096), ``max_batch`` (pairs per local generate call, 16), the backend and failure options. Per-pair extras:
    ``substituted``, ``tie``.
    """

    thread_safe: bool = True
    default_model: str | None = DEFAULT_MODEL
    judge_options: ClassVar[tuple[str, ...]] = tuple(o for o in ALL_OPTIONS if o not in ("num_frames", "fps"))
    required_fields = ("prompt", "image", "condition_images")

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        *,
        max_new_tokens: int = 4096,
        max_batch: int = 16,
        name: str = "unified_reward_edit_pairwise",
        **options: Any,
    ) -> None:
        judge_options = self.judge_options_of(options)
        self.template = UNIFIED_REWARD_EDIT_PAIRWISE_SCORE
        self.max_new_tokens = positive_int(max_new_tokens, "kwargs.max_new_tokens")
        self.max_batch = positive_int(max_batch, "kwargs.max_batch")
        if judge_options.endpoint is not None:
            judge_options = replace(judge_options, endpoint={**ENDPOINT_DEFAULTS, **judge_options.endpoint})
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
        outcomes = [a if isinstance(a, Failure) else pairwise_verdict(a) for a in answers]
        scores, extras = self.resolve(outcomes)
        ties = [1.0 if not isinstance(o, Failure) and o == 0.5 else 0.0 for o in outcomes]
        return [float(s) for s in scores], {"substituted": list(extras["substituted"]), "tie": ties}

    def __call__(self, first: dict, second: dict) -> float:
        """One pair (the per-pair protocol of PairwiseWinRate)."""
        return self.judge_pairs([(first, second)])[0][0]


class UnifiedRewardEditPairwise(PairwiseWinRate):
    """Pref-GRPO's pairwise win rate over the edits of a group with :class:`UnifiedRewardEditJudge`.

    Inputs: ``prompt``, ``image``, ``condition_images`` and ``group_id``. Range [0, 1]. Extras: ``wins``, and per
    sample ``substituted`` / ``tie``.
    """

    inputs: Inputs = Inputs(("prompt", "image", "condition_images", "group_id"))
    has_base: ClassVar[bool] = False  # the judge is its own model, loaded in __init__

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        *,
        max_new_tokens: int = 4096,
        max_batch: int = 16,
        **options: Any,
    ) -> None:
        BackendOptions.of(type(self), options, UnifiedRewardEditJudge.judge_options)
        judge = UnifiedRewardEditJudge(
            model_path, device, dtype, max_new_tokens=max_new_tokens, max_batch=max_batch, **options
        )
        super().__init__(None, device, dtype, judge=judge)
        self.model_path = model_path
        self.judge_name = "unified_reward_edit_pairwise"
        self.io_bound = judge.io_bound
        self.template, self.backend = judge.template, judge.backend  # what it runs, as a pointwise judge says

    @property
    def substitutions(self) -> int:
        """Pair verdicts substituted since this reward was built."""
        judge = self.judge
        return judge.substitutions if isinstance(judge, UnifiedRewardEditJudge) else 0
