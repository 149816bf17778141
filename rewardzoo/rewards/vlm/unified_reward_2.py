"""UnifiedReward-2.0 pointwise scoring: alignment, coherence (physics for videos) and style, 1 to 5, in one judgement.

The judge answers UnifiedReward-2.0's prompt (:data:`UNIFIED_REWARD_2_IMAGE`) with
``Alignment Score (1-5): X``, ``Coherence Score (1-5): Y`` and ``Style Score (1-5): Z``. The numbers are read as
Pref-GRPO reads them (``fastvideo/rewards/unifiedreward.py``, commit 3e787f6): every match of
``(\\w+) Score \\(1-5\\):\\s*([0-5](?:\\.\\d+)?)``, the last one per dimension name. The score is the configured
combination ``sum_d w_d x_d / (5 sum_d w_d)`` (default weights 1, 1, 1: the mean over 5); the three raw numbers
are the extras ``alignment``, ``coherence`` and ``style``, the generated text ``judgement``; they are also the
reward's streams (:mod:`rewardzoo.core.streams`: an entry may weigh and group-normalise them on their own).

``preset: pref_grpo`` is Pref-GRPO's training signal as its published scripts run it (3e787f6:
``scripts/full_train/unifiedreward_*.sh`` and ``scripts/lora/lora_unifiedreward_*.sh`` set
``--reward_spec '{"unifiedreward_alignment": 1.4, "unifiedreward_style": 0.7}'``, coherence untrained, and
``_common_finetune.sh`` ``--use_group --apply_gdpo``): unless ``weights`` says otherwise, alignment 1.4, coherence 0,
style 0.7, with the config's ``advantage: pref_grpo`` (:mod:`rewardzoo.core.advantages`: the summed advantage
renormalised over the gathered batch, ``dispatcher.py`` 698-702). ``preset: pref_grpo_defaults`` is its code's
defaults (``extract_normalized_rewards``, ``compute_weighted_advantages`` without ``apply_gdpo``): weights 1, 1, 1
and ``advantage: sum``. Both read the answers as Pref-GRPO does: a dimension an answer lacks takes the mean of that
dimension over the call's answers that have it (0 where none has; Pref-GRPO's batch is the rank's whole batch: give
``batch_size`` at least that), a number above 5 that the pattern reads (up to 5.99...) is kept, and the entry's
streams default to the dimensions of positive weight, each weighted as ``weights`` says and normalised within its
group by the unbiased std (``normalize: group_unbiased``), so that ``result.advantages()`` is
``sum_d w_d (s_d - mean_d) / (std_d + 1e-8)`` (``sum``), renormalised over the batch (``pref_grpo``). The score stays
the weighted mean over 5, each number capped at 5 there (the streams keep it).

The video form (:class:`VideoUnifiedReward2`) is the same judge with UnifiedReward-2.0's video prompt
(:data:`UNIFIED_REWARD_2_VIDEO`), whose dimensions are ``Alignment``, ``Physics``
and ``Style``: 16 frames at ``int(i * T / 16)`` (UnifiedReward's ``read_video_frames``), each sent as an image
before the text, as ``point_score_APS_video_generation.py`` (commit ff6f520) sends them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ...errors import ConfigError, InputError
from ...shared.media import to_pil_rgb
from ...shared.video import stride_indices
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.vlm.common import VLMJudgeMixin, check_prompts, check_template, fill
from ..models.vlm.judging import Failure
from ..models.vlm.options import JudgeOptions
from ..options import Number, PositiveInt

#: UnifiedReward-2.0 pointwise image prompt (alignment, coherence, style from 1 to 5): the ``problem`` of
#: UnifiedReward's inference_qwen/UnifiedReward-2.0-inference/point_score_ACS_image_generation.py (commit ff6f520),
#: also Pref-GRPO's ``get_unifiedreward_image_template`` (fastvideo/rewards/templates.py, commit 3e787f6).
UNIFIED_REWARD_2_IMAGE = (
    "You are presented with a generated image and its associated text caption. "
    "Your task is to analyze the image across multiple dimensions in relation to the caption. Specifically:\n"
    "Provide overall assessments for the image along the following axes (each rated from 1 to 5):\n"
    "- Alignment Score: How well the image matches the caption in terms of content.\n"
    "- Coherence Score: How logically consistent the image is (absence of visual glitches, object distortions, "
    "etc.).\n"
    "- Style Score: How aesthetically appealing the image looks, regardless of caption accuracy.\n\n"
    "Output your evaluation using the format below:\n\n"
    "Alignment Score (1-5): X\n"
    "Coherence Score (1-5): Y\n"
    "Style Score (1-5): Z\n\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)

#: UnifiedReward-2.0 pointwise video prompt (alignment, physics, style from 1 to 5), asked after the sampled frames
#: (one image each): the ``problem`` of UnifiedReward's
#: inference_qwen/UnifiedReward-2.0-inference/point_score_APS_video_generation.py (commit ff6f520).
UNIFIED_REWARD_2_VIDEO = (
    "You are presented with a generated video and its associated text caption. "
    "Your task is to analyze the video across multiple dimensions in relation to the caption. Specifically:\n"
    "Provide overall assessments for the video along the following axes (each rated from 1 to 5):\n"
    "- Alignment Score: How well the video matches the caption in terms of content.\n"
    "- Physics Score: How well the gravity, movements, collisions, and interactions make physical sense.\n"
    "- Style Score: How visually appealing the video looks, regardless of caption accuracy.\n\n"
    "Output your evaluation using the format below:\n\n"
    "Alignment Score (1-5): X\n"
    "Physics Score (1-5): Y\n"
    "Style Score (1-5): Z\n\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)

#: Named templates: UnifiedReward-2.0's pointwise image and video prompts.
TEMPLATES = {"unified_reward_2": UNIFIED_REWARD_2_IMAGE, "unified_reward_2_video": UNIFIED_REWARD_2_VIDEO}
#: What runs by default: UnifiedReward-2.0 on Qwen3-VL-8B (the model UnifiedReward's and Pref-GRPO's vLLM scripts
#: serve) with its prompt.
DEFAULTS = {"model": "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b", "template": "unified_reward_2"}
#: The dimensions, as the judge names them, and their extras.
DIMENSIONS = {"Alignment": "alignment", "Coherence": "coherence", "Style": "style"}
#: The video prompt's dimensions (physics where the image prompt has coherence).
VIDEO_DIMENSIONS = {"Alignment": "alignment", "Physics": "physics", "Style": "style"}
#: Pref-GRPO's pattern (``extract_normalized_rewards``): a dimension name and its number.
DIMENSION_SCORE = r"(\w+) Score \(1-5\):\s*([0-5](?:\.\d+)?)"
TOP = 5.0
#: ``preset`` values: None (the default reading), Pref-GRPO's scripts' and its code's defaults
#: (:func:`pref_grpo_dimensions`, module docstring).
PRESETS = (None, "pref_grpo", "pref_grpo_defaults")
#: Each Pref-GRPO preset's default ``weights`` (its scripts' ``--reward_spec``; its code's 1, 1, 1).
PREF_GRPO_WEIGHTS = {
    "pref_grpo": {"alignment": 1.4, "coherence": 0.0, "style": 0.7},
    "pref_grpo_defaults": {"alignment": 1.0, "coherence": 1.0, "style": 1.0},
}


def pref_grpo_dimensions(texts: Sequence[str], dimensions: Mapping[str, str] = DIMENSIONS) -> list[dict[str, float]]:
    """Pref-GRPO's reading of one batch of answers: per answer the last number per dimension name, numbers above
    5 kept; a dimension an answer lacks takes the mean of the answers that have it (0 where none has)."""
    found = [{name: float(value) for name, value in re.findall(DIMENSION_SCORE, text)} for text in texts]
    means = {}
    for name in dimensions:
        have = [f[name] for f in found if name in f]
        means[name] = sum(have) / len(have) if have else 0.0
    return [{key: f.get(name, means[name]) for name, key in dimensions.items()} for f in found]


def parse_dimensions(text: str, dimensions: Mapping[str, str] = DIMENSIONS) -> dict[str, float] | Failure:
    """``{extra name: number}`` for the three ``dimensions`` (judge's name -> extra) of one judgement, or a
    Failure (one missing, or a number above 5, which the pattern reads but the scale has not)."""
    found = {name: float(value) for name, value in re.findall(DIMENSION_SCORE, text)}  # the last match wins
    missing = [name for name in dimensions if name not in found]
    if missing:
        return Failure("unparseable", f"no '{missing[0]} Score (1-5): N' in the judgement", text)
    over = [name for name in dimensions if found[name] > TOP]
    if over:
        return Failure("unparseable", f"{over[0]} Score {found[over[0]]:g} is above 5", text)
    return {key: found[name] for name, key in dimensions.items()}


class _UnifiedReward2Judge(VLMJudgeMixin, PointwiseReward):
    """What :class:`UnifiedReward2` and :class:`VideoUnifiedReward2` share: options, template, judge, parsing."""

    default_model: str | None = DEFAULTS["model"]
    default_template: ClassVar[str] = DEFAULTS["template"]
    dimensions: ClassVar[Mapping[str, str]] = DIMENSIONS
    streams: ClassVar[tuple[str, ...]] = tuple(DIMENSIONS.values())
    presets: ClassVar[tuple[str | None, ...]] = PRESETS

    class Options(JudgeOptions):
        preset: str | None = None
        """null, or (images) ``pref_grpo`` (Pref-GRPO's scripts: weights 1.4, 0, 0.7, with ``advantage:
        pref_grpo``) or ``pref_grpo_defaults`` (its code's defaults): Pref-GRPO's reading and per-dimension
        group-normalised streams (module docstring)."""
        weights: dict[str, Number] | None = None
        """A mapping of the dimensions (``alignment`` / ``coherence`` / ``style``; video: ``physics`` for
        ``coherence``) to non-negative numbers, not all 0 (default 1 each; a dimension left out weighs 0)."""
        template: str | None = None
        """``unified_reward_2`` (video: ``unified_reward_2_video``) or your own text with ``{prompt}`` asking for the
        dimensions' lines."""
        max_new_tokens: PositiveInt = 512
        """Tokens the judge may write."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        judge_options = o = self.options
        preset, weights, template = o.preset, o.weights, o.template
        template = self.default_template if template is None else template
        self.template = check_template(TEMPLATES.get(template, template), self.name)
        if preset not in self.presets:
            raise ConfigError(
                f"{self.name}: kwargs.preset must be one of {', '.join(map(repr, self.presets))}, got {preset!r}",
                field="kwargs.preset",
            )
        self.preset = preset
        self.weights = self._weights(PREF_GRPO_WEIGHTS[preset] if weights is None and preset else weights)
        if preset in PREF_GRPO_WEIGHTS:
            self.default_streams = {
                k: {"weight": w, "normalize": "group_unbiased"} for k, w in self.weights.items() if w > 0
            }
        self.max_new_tokens = o.max_new_tokens
        self.setup_judge(self.name, judge_options, model_path=model_path, device=device, dtype=dtype)

    def _weights(self, weights: Mapping[str, float] | None) -> dict[str, float]:
        keys = tuple(self.dimensions.values())
        if weights is None:
            return dict.fromkeys(keys, 1.0)
        bad = [k for k in weights if k not in keys] if isinstance(weights, Mapping) else ["(not a mapping)"]
        values = list(weights.values()) if not bad else []
        if (
            bad
            or any(
                isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 for v in values
            )
            or not sum(values) > 0
        ):
            raise ConfigError(
                f"{self.name}: weights maps {', '.join(keys)} to non-negative numbers, not all 0; got {weights!r}",
                field="kwargs.weights",
            )
        return {k: float(weights.get(k, 0.0)) for k in keys}

    def combine(self, dims: Mapping[str, float]) -> float:
        """The score of one judgement's numbers: ``sum_d w_d x_d / (5 sum_d w_d)``."""
        return sum(self.weights[k] * dims[k] for k in self.weights) / (TOP * sum(self.weights.values()))

    def judge_media(self, prompt: Sequence[str], media: Sequence[Sequence[Any]]) -> RewardOutput:
        """Scores and extras of one batch: ``media[i]`` the images of sample i (one, or a video's frames), sent
        before the filled template."""
        prompts = check_prompts(prompt, len(media))
        queries = self.queries_of([fill(self.template, p) for p in prompts], media)
        answers = self.backend.generate(queries, max_new_tokens=self.max_new_tokens)
        parsed: list[dict[str, float] | Failure]
        if self.preset in PREF_GRPO_WEIGHTS:
            read = iter(pref_grpo_dimensions([a for a in answers if not isinstance(a, Failure)], self.dimensions))
            parsed = [a if isinstance(a, Failure) else next(read) for a in answers]
        else:
            parsed = [a if isinstance(a, Failure) else parse_dimensions(a, self.dimensions) for a in answers]
        scores, extras = self.resolve(
            [p if isinstance(p, Failure) else self.combine({k: min(v, TOP) for k, v in p.items()}) for p in parsed]
        )
        for key in self.dimensions.values():
            extras[key] = [math.nan if isinstance(p, Failure) else p[key] for p in parsed]
        extras["judgement"] = [a.answer or "" if isinstance(a, Failure) else a for a in answers]
        return RewardOutput(scores, extras=extras)


class UnifiedReward2(_UnifiedReward2Judge):
    """UnifiedReward-2.0 pointwise: the weighted mean of alignment, coherence and style (each 1-5) over 5.

    Inputs: ``image`` and ``prompt``. Range [0, 1]; higher is better. Options: :class:`Options`, with the backend and failure
    options of :class:`~rewardzoo.rewards.models.vlm.common.JudgeOptions`. Extras:
    ``alignment``, ``coherence``, ``style`` (the judge's numbers, NaN where it gave none) and ``judgement``.
    """

    inputs: Inputs = Inputs(("prompt", "image"))

    def __call__(self, prompt: Sequence[str], image: Sequence[Any], **_: Any) -> RewardOutput:
        return self.judge_media(prompt, [[to_pil_rgb(m)] for m in image])


class VideoUnifiedReward2(_UnifiedReward2Judge):
    """UnifiedReward-2.0 pointwise on a video: the weighted mean of alignment, physics and style (each 1-5) over 5.

    Inputs: ``video`` and ``prompt``. The judge sees ``num_frames`` frames (default 16) at ``int(i * T / K)``, as
    UnifiedReward's video script picks them, each as an image, in order, before the text; the video layer hands
    over every frame and the judge picks them. A video with fewer than ``num_frames`` frames is an InputError
    naming the sample (the reference would send fewer frames than asked). Options as :class:`UnifiedReward2`
    with ``weights`` over ``alignment`` / ``physics`` / ``style``, ``template`` ``unified_reward_2_video``, and
    ``num_frames``. Extras: ``alignment``, ``physics``, ``style`` and ``judgement``.
    """

    inputs: Inputs = Inputs(("prompt", "video"))  # every frame: the judge picks its own
    media: str = "video"
    default_num_frames: ClassVar[int | None] = 16

    class Options(_UnifiedReward2Judge.Options):
        num_frames: PositiveInt | None = None
        """Frames the judge sees (default 16), each as an image (no ``fps``: they are not sent as a video)."""

    options: Options
    default_template: ClassVar[str] = "unified_reward_2_video"
    dimensions: ClassVar[Mapping[str, str]] = VIDEO_DIMENSIONS
    streams: ClassVar[tuple[str, ...]] = tuple(VIDEO_DIMENSIONS.values())
    presets: ClassVar[tuple[str | None, ...]] = (None,)  # Pref-GRPO trains on the image form only

    def media_part(self, value: Any) -> Any:
        return to_pil_rgb(value)  # each sampled frame an image of its own, as UnifiedReward sends them

    def __call__(self, prompt: Sequence[str], video: Sequence[Any], **_: Any) -> RewardOutput:
        count = self.num_frames
        if count is None:
            raise ConfigError(f"{self.name} sends a fixed number of frames; set num_frames", field="kwargs.num_frames")
        picked = []
        for i, value in enumerate(video):
            frames = list(value)
            if len(frames) < count:
                raise InputError(
                    f"the judge samples {self.num_frames} frames at int(i * T / {self.num_frames}), "
                    f"the video has {len(frames)}",
                    reward=self.name,
                    field="video",
                    sample=i,
                )
            picked.append([frames[k] for k in stride_indices(len(frames), count)])
        return self.judge_media(prompt, picked)
