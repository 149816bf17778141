"""UnifiedReward pointwise scoring (Wang et al., 2025), in the two pairings its references ran.

The judge writes an assessment ending in ``Final Score: X`` (1 to 5); ``score = X / 5``, X the first match
of flow_grpo's pattern ``Final Score:\\s*([1-5](?:\\.\\d+)?)``. Greedy generation with a token limit. By
default the UnifiedReward-qwen release's model with its own inference prompt, images as given; ``preset:
flow_grpo`` is flow_grpo's pairing (``UnifiedReward-7b-v1.5``, LLaVA-OneVision based, with flow_grpo's
question, images resized to 512x512). The ``pairing`` rows of its card state both. The
generated text is kept as the per-sample extra ``judgement``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypedDict

from ...shared.media import to_pil_rgb
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.vlm.common import JudgeOptions, VLMJudgeMixin, check_prompts, check_template, fill
from ..models.vlm.judging import Failure, RegexScore
from ..options import PositiveInt, Size

#: UnifiedReward pointwise image prompt as flow_grpo sends it (with its leading "<image>\n" line): flow_grpo ac4c86e
#: flow_grpo/rewards.py ``unifiedreward_score_sglang``.
UNIFIED_REWARD_FLOW_GRPO = (
    "<image>\n"
    "You are given a text caption and a generated image based on that caption. Your task is to "
    "evaluate this image based on two key criteria:\n"
    "1. Alignment with the Caption: Assess how well this image aligns with the provided "
    "caption. Consider the accuracy of depicted objects, their relationships, and attributes "
    "as described in the caption.\n"
    "2. Overall Image Quality: Examine the visual quality of this image, including clarity, "
    "detail preservation, color accuracy, and overall aesthetic appeal.\n"
    "Based on the above criteria, assign a score from 1 to 5 after 'Final Score:'.\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)

#: UnifiedReward pointwise image prompt of the UnifiedReward-qwen release (inference_qwen/image_generation/
#: qwen_point_score_image_generation.py, commit ff6f520): element extraction, then 'Final Score:' from 1 to 5.
UNIFIED_REWARD_QWEN_RELEASE = (
    "You are given a text caption and a generated image based on that caption. Your task is to "
    "evaluate this image based on two key criteria:\n"
    "1. Alignment with the Caption: Assess how well this image aligns with the provided "
    "caption. Consider the accuracy of depicted objects, their relationships, and attributes "
    "as described in the caption.\n"
    "2. Overall Image Quality: Examine the visual quality of this image, including clarity, "
    "detail preservation, color accuracy, and overall aesthetic appeal.\n"
    "Extract key elements from the provided text caption, evaluate their presence in the "
    "generated image using the format: 'element (type): value' (where value=0 means not "
    "generated, and value=1 means generated), and assign a score from 1 to 5 after 'Final Score:'.\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)


class _Preset(TypedDict):
    """A model with its template and image size."""

    model: str
    template: str
    resize: tuple[int, int] | None


#: Named templates: the UnifiedReward-qwen release's inference prompt (the default) and flow_grpo's question.
TEMPLATES = {"qwen_release": UNIFIED_REWARD_QWEN_RELEASE, "flow_grpo": UNIFIED_REWARD_FLOW_GRPO}
#: What runs by default: the Qwen release's model with its own prompt, images as given.
DEFAULTS: _Preset = {"model": "CodeGoat24/UnifiedReward-qwen-7b", "template": "qwen_release", "resize": None}
#: ``preset: flow_grpo``: the model flow_grpo serves (LLaVA-OneVision based) with its question, 512x512 images.
PRESETS: dict[str, _Preset] = {
    "flow_grpo": {"model": "CodeGoat24/UnifiedReward-7b-v1.5", "template": "flow_grpo", "resize": (512, 512)}
}
#: flow_grpo's score pattern (``_extract_scores`` of ``unifiedreward_score_sglang``).
FINAL_SCORE = r"Final Score:\s*([1-5](?:\.\d+)?)"


class UnifiedReward(VLMJudgeMixin, PointwiseReward):
    """UnifiedReward pointwise: ``X / 5`` from the judge's ``Final Score: X`` (X in [1, 5]).

    Inputs: ``image`` and ``prompt``. Range [0, 1] (parsed scores lie in [0.2, 1]; the rest is room for a
    substitute value). A ``Final Score`` the pattern reads but above 5 (``5.5``) is off the scale and
    unparseable. Options: :class:`Options` (with the backend and failure options of
    :class:`~rewardzoo.rewards.models.vlm.common.JudgeOptions`).
    """

    inputs: Inputs = Inputs(("prompt", "image"))
    default_model: str | None = DEFAULTS["model"]

    class Options(JudgeOptions):
        preset: Literal["flow_grpo"] | None = None
        """null: :data:`DEFAULTS`; ``flow_grpo``: :data:`PRESETS` (options given explicitly override the preset's)."""
        template: str | None = None
        """``qwen_release`` (the UnifiedReward-qwen inference prompt), ``flow_grpo`` (flow_grpo's question), or your
        own text with ``{prompt}`` asking for a ``Final Score`` (default the preset's)."""
        max_new_tokens: PositiveInt = 512
        """Tokens the judge may write."""
        resize: Size | Literal["auto"] | None = "auto"
        """``[width, height]`` the image is resized to, or null to keep its size (``auto``: the preset's)."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        o = self.options
        self.preset = o.preset
        chosen = PRESETS[o.preset] if o.preset is not None else DEFAULTS
        self.default_model = chosen["model"]
        template = chosen["template"] if o.template is None else o.template
        self.template = check_template(TEMPLATES.get(template, template), self.name)
        self.max_new_tokens = o.max_new_tokens
        resize = chosen["resize"] if o.resize == "auto" else o.resize
        self.resize = None if resize is None else (resize[0], resize[1])
        self.parse = RegexScore(FINAL_SCORE, low=1.0, high=5.0)
        self.setup_judge(self.name, o, model_path=model_path, device=device, dtype=dtype)

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
