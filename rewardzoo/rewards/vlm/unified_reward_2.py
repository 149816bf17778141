"""UnifiedReward-2.0 pointwise scoring: alignment, coherence and style, each from 1 to 5, in one judgement.

The judge answers UnifiedReward-2.0's prompt (:data:`~rewardzoo.rewards.vlm.prompts.UNIFIED_REWARD_2_IMAGE`) with
``Alignment Score (1-5): X``, ``Coherence Score (1-5): Y`` and ``Style Score (1-5): Z``. The numbers are read as
Pref-GRPO reads them (``fastvideo/rewards/unifiedreward.py``, commit 3e787f6): every match of
``(\\w+) Score \\(1-5\\):\\s*([0-5](?:\\.\\d+)?)``, the last one per dimension name. The score is the configured
combination ``sum_d w_d x_d / (5 sum_d w_d)`` (default weights 1, 1, 1: the mean over 5); the three raw numbers
are the extras ``alignment``, ``coherence`` and ``style``, the generated text ``judgement``.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar, Mapping, Sequence

from ...errors import ConfigError
from ...shared.media import to_pil_rgb
from ...shared.options import positive_int
from ..base import Inputs, PointwiseReward, RewardOutput
from .common import ALL_OPTIONS, VLMJudgeMixin, check_prompts, check_template, fill
from .judging import Failure
from .prompts import UNIFIED_REWARD_2_IMAGE

#: Named templates: UnifiedReward-2.0's pointwise image prompt.
TEMPLATES = {"unified_reward_2": UNIFIED_REWARD_2_IMAGE}
#: What runs by default: UnifiedReward-2.0 on Qwen3-VL-8B (the model UnifiedReward's and Pref-GRPO's vLLM scripts
#: serve) with its prompt.
DEFAULTS = {"model": "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b", "template": "unified_reward_2"}
#: The dimensions, as the judge names them, and their extras.
DIMENSIONS = {"Alignment": "alignment", "Coherence": "coherence", "Style": "style"}
#: Pref-GRPO's pattern (``extract_normalized_rewards``): a dimension name and its number.
DIMENSION_SCORE = r"(\w+) Score \(1-5\):\s*([0-5](?:\.\d+)?)"
TOP = 5.0


def parse_dimensions(text: str) -> dict[str, float] | Failure:
    """``{extra name: number}`` for the three dimensions of one judgement, or a Failure (one missing, or a number
    above 5, which the pattern reads but the scale has not)."""
    found = {name: float(value) for name, value in re.findall(DIMENSION_SCORE, text)}  # the last match wins
    missing = [name for name in DIMENSIONS if name not in found]
    if missing:
        return Failure("unparseable", f"no '{missing[0]} Score (1-5): N' in the judgement", text)
    over = [name for name in DIMENSIONS if found[name] > TOP]
    if over:
        return Failure("unparseable", f"{over[0]} Score {found[over[0]]:g} is above 5", text)
    return {key: found[name] for name, key in DIMENSIONS.items()}


class UnifiedReward2(VLMJudgeMixin, PointwiseReward):
    """UnifiedReward-2.0 pointwise: the weighted mean of alignment, coherence and style (each 1-5) over 5.

    Inputs: ``image`` and ``prompt``. Range [0, 1]; higher is better. Options: ``weights`` (a mapping of
    ``alignment`` / ``coherence`` / ``style`` to non-negative numbers, default 1 each; a dimension left out weighs
    0), ``template`` (``unified_reward_2`` or your own text with ``{prompt}`` asking for the three lines),
    ``max_new_tokens`` (512), the backend and failure options of :mod:`rewardzoo.rewards.vlm.common`. Extras:
    ``alignment``, ``coherence``, ``style`` (the judge's numbers, NaN where it gave none) and ``judgement``.
    """

    inputs: ClassVar[Inputs] = Inputs(("prompt", "image"))
    default_model: ClassVar[str | None] = DEFAULTS["model"]
    judge_options: ClassVar[tuple[str, ...]] = tuple(o for o in ALL_OPTIONS if o not in ("num_frames", "fps"))

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", *,
                 weights: Mapping[str, float] | None = None, template: str | None = None, max_new_tokens: int = 512,
                 **options: Any) -> None:
        super().__init__(model_path, device, dtype)
        judge_options = self.judge_options_of(options)
        template = DEFAULTS["template"] if template is None else template
        self.template = check_template(TEMPLATES.get(template, template), self.name)
        self.weights = self._weights(weights)
        self.max_new_tokens = positive_int(max_new_tokens, "kwargs.max_new_tokens")
        self.setup_judge(self.name, judge_options, model_path=model_path, device=device, dtype=dtype)

    def _weights(self, weights: Mapping[str, float] | None) -> dict[str, float]:
        keys = tuple(DIMENSIONS.values())
        if weights is None:
            return dict.fromkeys(keys, 1.0)
        bad = [k for k in weights if k not in keys] if isinstance(weights, Mapping) else ["(not a mapping)"]
        values = list(weights.values()) if not bad else []
        if bad or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0
                      for v in values) or not sum(values) > 0:
            raise ConfigError(f"{self.name}: weights maps {', '.join(keys)} to non-negative numbers, not all 0; "
                              f"got {weights!r}", field="kwargs.weights")
        return {k: float(weights.get(k, 0.0)) for k in keys}

    def combine(self, dims: Mapping[str, float]) -> float:
        """The score of one judgement's numbers: ``sum_d w_d x_d / (5 sum_d w_d)``."""
        return sum(self.weights[k] * dims[k] for k in self.weights) / (TOP * sum(self.weights.values()))

    def __call__(self, prompt: Sequence[str], image: Sequence[Any], **_: Any) -> RewardOutput:
        prompts = check_prompts(prompt, len(image))
        queries = self.queries_of([fill(self.template, p) for p in prompts], [[to_pil_rgb(m)] for m in image])
        answers = self.backend.generate(queries, max_new_tokens=self.max_new_tokens)
        parsed = [a if isinstance(a, Failure) else parse_dimensions(a) for a in answers]
        scores, extras = self.resolve([p if isinstance(p, Failure) else self.combine(p) for p in parsed])
        for key in DIMENSIONS.values():
            extras[key] = [math.nan if isinstance(p, Failure) else p[key] for p in parsed]
        extras["judgement"] = [a.answer or "" if isinstance(a, Failure) else a for a in answers]
        return RewardOutput(scores, extras=extras)
