"""UnifiedReward pointwise scoring (Wang et al., 2025), as flow_grpo trains with it.

The judge writes an assessment ending in ``Final Score: X`` (1 to 5); ``score = X / 5``, X the first match
of flow_grpo's pattern ``Final Score:\\s*([1-5](?:\\.\\d+)?)``. Greedy generation (flow_grpo: temperature 0)
with a token limit; images are resized to 512x512 first, as flow_grpo does before it sends them. The
generated text is kept as the per-sample extra ``judgement``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

from ...errors import ConfigError
from .judging import Failure, RegexScore
from ...shared.media import to_pil_rgb
from ...shared.options import positive_int
from ..base import Inputs, PointwiseReward, RewardOutput
from .common import ALL_OPTIONS, VLMJudgeMixin, check_prompts, check_template, fill
from .prompts import UNIFIED_REWARD_FLOW_GRPO, UNIFIED_REWARD_QWEN_RELEASE

#: Named templates: flow_grpo's question (the default) and the UnifiedReward-qwen release's inference prompt.
TEMPLATES = {"flow_grpo": UNIFIED_REWARD_FLOW_GRPO, "qwen_release": UNIFIED_REWARD_QWEN_RELEASE}
#: flow_grpo's score pattern (``_extract_scores`` of ``unifiedreward_score_sglang``).
FINAL_SCORE = r"Final Score:\s*([1-5](?:\.\d+)?)"


class UnifiedReward(VLMJudgeMixin, PointwiseReward):
    """UnifiedReward pointwise: ``X / 5`` from the judge's ``Final Score: X`` (X in [1, 5]).

    Inputs: ``image`` and ``prompt``. Range [0, 1] (parsed scores lie in [0.2, 1]; the rest is room for a
    substitute value). A ``Final Score`` the pattern reads but above 5 (``5.5``) is off the scale and
    unparseable. Options: ``template`` (``flow_grpo``, the default; ``qwen_release``, the UnifiedReward-qwen
    inference prompt; or your own text with ``{prompt}`` asking for a ``Final Score``), ``max_new_tokens``
    (512), ``resize`` (``[512, 512]`` as flow_grpo; null keeps the image size), the backend and failure
    options of :mod:`rewardzoo.rewards.vlm.common`.
    """

    inputs: ClassVar[Inputs] = Inputs(("prompt", "image"))
    default_model: ClassVar[str | None] = "CodeGoat24/UnifiedReward-qwen-7b"
    judge_options: ClassVar[tuple[str, ...]] = tuple(o for o in ALL_OPTIONS if o not in ("num_frames", "fps"))

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", *,
                 template: str = "flow_grpo", max_new_tokens: int = 512,
                 resize: Sequence[int] | None = (512, 512), **options: Any) -> None:
        super().__init__(model_path, device, dtype)
        judge_options = self.judge_options_of(options)
        self.template = check_template(TEMPLATES.get(template, template), self.name)
        self.max_new_tokens = positive_int(max_new_tokens, "kwargs.max_new_tokens")
        if resize is not None and (len(resize) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0
                                                             for v in resize)):
            raise ConfigError(f"{self.name}: resize must be [width, height] or null, got {resize!r}",
                              field="kwargs.resize")
        self.resize = tuple(resize) if resize is not None else None
        self.parse = RegexScore(FINAL_SCORE, low=1.0, high=5.0)
        self.setup_judge(self.name, judge_options, model_path=model_path, device=device, dtype=dtype)

    def score_text(self, text: str) -> float | Failure:
        """The score of one judgement: ``Final Score`` / 5, or a Failure."""
        value = self.parse(text)
        return value if isinstance(value, Failure) else value / 5.0

    def __call__(self, prompt: Sequence[str], image: Sequence[Any], **_: Any) -> RewardOutput:
        prompts = check_prompts(prompt, len(image))
        media = [to_pil_rgb(img).resize(self.resize) if self.resize else img for img in image]
        queries = self.queries_of([fill(self.template, p) for p in prompts], [[m] for m in media])
        answers = self.backend.generate(queries, max_new_tokens=self.max_new_tokens)
        outcomes = [a if isinstance(a, Failure) else self.score_text(a) for a in answers]
        scores, extras = self.resolve(outcomes)
        extras["judgement"] = [a.answer or "" if isinstance(a, Failure) else a for a in answers]
        return RewardOutput(scores, extras=extras)
