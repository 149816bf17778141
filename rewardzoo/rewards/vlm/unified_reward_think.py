"""UnifiedReward-Think as a pairwise judge (Pref-GRPO, Wang et al., 2025): which of two images (or videos) is better.

Pref-GRPO asks the judge about every pair of a group with its prompt (the two images first, then the text;
for videos the frames of video 1 then of video 2, each frame an image) and reads the verdict from the
answer: the content of the first ``<answer>...</answer>``; ``"Image 1 is better"`` in it -> the first wins,
else ``"Image 2 is better"`` -> the second wins (``Video ...`` for videos), else a tie (0.5 each). A sample's
reward is its wins over its ``n - 1`` comparisons: exactly :class:`~rewardzoo.rewards.models.groups.PairwiseJudged`
in ``hard`` mode with this judge, which answers all pairs of a group in one batch.

An answer without ``<answer>`` tags is unparseable: Pref-GRPO counts it as a tie; here it is an error unless
``on_failure: {substitute: 0.5}`` (Pref-GRPO's counting, then counted in the extra ``substituted``).

Pairings (:data:`PREF_GRPO_PAIRINGS`): the default is Pref-GRPO's current one (``UnifiedReward-Think-qwen3vl-8b``
with the long templates, since 1dc528e), decoded greedily with rounded frame indices; ``preset: pref_grpo`` adds
Pref-GRPO's request (``decoding: reference``) and its floored frame indices; ``preset: pref_grpo_qwen_7b`` is the
earlier pairing (``UnifiedReward-Think-qwen-7b`` with the short templates and ``max_tokens: 2048``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...shared.files import text_blocks
from ...shared.media import to_pil_rgb
from ...shared.video import sample_indices
from ..base import Inputs
from ..models.groups import PairwiseJudged
from ..models.vlm.common import VLMJudgeMixin, check_template, fill
from ..models.vlm.judging import Failure, tagged
from ..models.vlm.options import JudgeOptions
from ..options import PositiveInt

# The reference prompts, verbatim, from the data file beside this module (unified_reward_think_prompts.txt).
# ``UNIFIED_REWARD_THINK_IMAGE`` / ``..._VIDEO``: Pref-GRPO ``fastvideo/rewards/templates.py``
# (``get_unifiedreward_think_image_template`` / ``..._video_template``, commit 3e787f6, unchanged since 1dc528e): the
# two images (or the frames of video 1, then of video 2) come first. ``..._QWEN_7B``: the ``template`` Pref-GRPO served
# UnifiedReward-Think-qwen-7b with before 1dc528e (``fastvideo/train_flux_pref_grpo.py``, 6d405e8 to 7246966;
# ``train_wan_2_1_pref_grpo.py``, a1ca93c to 7246966; filled with ``str.format``). ``{prompt}`` marks the caption.
_PROMPTS = text_blocks(Path(__file__).with_name("unified_reward_think_prompts.txt"))
UNIFIED_REWARD_THINK_IMAGE = _PROMPTS["UNIFIED_REWARD_THINK_IMAGE"]
UNIFIED_REWARD_THINK_VIDEO = _PROMPTS["UNIFIED_REWARD_THINK_VIDEO"]
UNIFIED_REWARD_THINK_IMAGE_QWEN_7B = _PROMPTS["UNIFIED_REWARD_THINK_IMAGE_QWEN_7B"]
UNIFIED_REWARD_THINK_VIDEO_QWEN_7B = _PROMPTS["UNIFIED_REWARD_THINK_VIDEO_QWEN_7B"]

#: Named templates (the ``template`` option takes a key or your own text): Pref-GRPO's current ones and those it
#: served UnifiedReward-Think-qwen-7b with, per media.
TEMPLATES = {
    "pref_grpo": UNIFIED_REWARD_THINK_IMAGE,
    "pref_grpo_video": UNIFIED_REWARD_THINK_VIDEO,
    "pref_grpo_qwen_7b": UNIFIED_REWARD_THINK_IMAGE_QWEN_7B,
    "pref_grpo_qwen_7b_video": UNIFIED_REWARD_THINK_VIDEO_QWEN_7B,
}


@dataclass(frozen=True)
class ThinkPairing:
    """A model, its template keys (per media) and the decoding fields of the request Pref-GRPO sent it."""

    model: str
    templates: Mapping[str, str]
    request: Mapping[str, Any]


#: Pref-GRPO's two pairings. ``current``: since 1dc528e (model and templates; the request since c9b70d0, as at
#: 3e787f6): vllm_server_UnifiedReward_Think.sh, fastvideo/rewards/templates.py, vllm_utils/vllm_request.py.
#: ``qwen_7b``: 6d405e8 (images) / a1ca93c (videos) to 7246966, the same files' earlier versions and the
#: ``template`` of train_flux_pref_grpo.py / train_wan_2_1_pref_grpo.py (``"do_sample"`` commented out).
PREF_GRPO_PAIRINGS = {
    "current": ThinkPairing(
        "CodeGoat24/UnifiedReward-Think-qwen3vl-8b",
        {"image": "pref_grpo", "video": "pref_grpo_video"},
        {"do_sample": False, "max_tokens": 4096},
    ),
    "qwen_7b": ThinkPairing(
        "CodeGoat24/UnifiedReward-Think-qwen-7b",
        {"image": "pref_grpo_qwen_7b", "video": "pref_grpo_qwen_7b_video"},
        {"max_tokens": 2048},
    ),
}
#: ``preset`` -> the pairing it runs (with Pref-GRPO's decoding and frame choice); None: the default.
PRESETS = {None: "current", "pref_grpo": "current", "pref_grpo_qwen_7b": "qwen_7b"}


def verdict(text: str, media: str = "image") -> float | Failure:
    """Pref-GRPO's reading of one answer: 1.0 (first better), 0.0 (second better), 0.5 (tie), or a Failure."""
    label = "Image" if media == "image" else "Video"
    answer = tagged(text, "answer")
    if answer is None:
        return Failure("unparseable", "no <answer>...</answer> in the judgement", text)
    if f"{label} 1 is better" in answer:
        return 1.0
    if f"{label} 2 is better" in answer:
        return 0.0
    return 0.5


class UnifiedRewardThinkJudge(VLMJudgeMixin):
    """The pairwise judge: ``judge_pairs([(first, second), ...]) -> (P(first beats second) per pair, extras)``.

    ``first`` / ``second`` are dicts of the declared fields (``prompt`` and ``image``, or ``video`` frames).
    Options: :class:`Options` (as keywords, or ``options=`` already checked). Per-pair extras: ``substituted``,
    ``tie``. The endpoint sends JPEG (quality 95) as Pref-GRPO does unless ``endpoint.image_format`` says.
    """

    thread_safe: bool = True
    default_model: str | None = PREF_GRPO_PAIRINGS["current"].model

    class Options(JudgeOptions):
        preset: Literal["pref_grpo", "pref_grpo_qwen_7b"] | None = None
        """null: Pref-GRPO's current model and templates, greedy, rounded frame indices; ``pref_grpo``: the same with
        Pref-GRPO's decoding and frame indices; ``pref_grpo_qwen_7b``: the earlier pairing (:data:`PREF_GRPO_PAIRINGS`)."""
        media: Literal["image", "video"] = "image"
        """What is compared."""
        template: str | None = None
        """A key of :data:`TEMPLATES` or your own text with ``{prompt}`` (default the pairing's for the media)."""
        max_new_tokens: PositiveInt | None = None
        """Tokens the judge may write (default the pairing's ``max_tokens``: 4096, or 2048 for qwen-7b)."""
        decoding: Literal["greedy", "reference"] | None = None
        """``greedy`` (the default without a preset); ``reference`` (the presets' default): Pref-GRPO's request
        fields, which leave the sampling to the server's defaults (locally sampled as vLLM samples them)."""
        max_batch: PositiveInt = 16
        """Pairs per generate call on the local backend (a group of n has n(n-1)/2 pairs; the endpoint gets them all,
        ``max_concurrency`` at a time)."""
        num_frames: PositiveInt | None = None
        """Video: frames per video (default 8; the presets take every frame from the video layer and pick
        ``np.linspace(0, T - 1, K, dtype=int)``, Pref-GRPO's floored indices)."""

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        *,
        name: str = "unified_reward_think",
        options: UnifiedRewardThinkJudge.Options | None = None,
        **kwargs: Any,
    ) -> None:
        judge_options = o = options if options is not None else self.Options.from_kwargs(kwargs, type(self).__name__)
        preset, template = o.preset, o.template
        self.preset = preset
        self.pairing = PREF_GRPO_PAIRINGS[PRESETS[preset]]
        self.default_model = self.pairing.model
        self.media = o.media
        template = self.pairing.templates[self.media] if template is None else template
        self.template = check_template(
            TEMPLATES.get(template, template) if isinstance(template, str) else template, name
        )
        self.max_new_tokens = self.pairing.request["max_tokens"] if o.max_new_tokens is None else o.max_new_tokens
        self.decoding = ("greedy" if preset is None else "reference") if o.decoding is None else o.decoding
        self.max_batch = o.max_batch
        endpoint = o.endpoint
        judge_options = o.model_copy(
            update={
                "endpoint": None if endpoint is None else {"image_format": "jpeg", **endpoint},
                "num_frames": o.num_frames if self.media == "video" else None,
            }
        )
        self.setup_judge(name, judge_options, model_path=model_path, device=device, dtype=dtype)
        # under a preset the video layer hands over every frame and the judge picks Pref-GRPO's (floored) indices
        self.sampled_frames = self.num_frames if preset is not None and self.media == "video" else None
        if self.sampled_frames is not None:
            self.num_frames = None
        self.required_fields = ("prompt", self.media)  # with num_frames, read by PairwiseJudged

    @property
    def request(self) -> dict[str, Any] | None:
        """The decoding fields sent with every comparison: Pref-GRPO's (``decoding: reference``), else None
        (greedy)."""
        if self.decoding == "greedy":
            return None
        return {**self.pairing.request, "max_tokens": self.max_new_tokens}

    def media_part(self, value: Any) -> Any:
        return to_pil_rgb(value)  # video frames go one image each (video 1's, then video 2's), as Pref-GRPO sends them

    def judge_pairs(self, pairs: Sequence[tuple[dict, dict]]) -> tuple[list[float], dict[str, list[float]]]:
        queries = self.queries_of(
            [fill(self.template, first["prompt"]) for first, _ in pairs],
            [self._media_of(first) + self._media_of(second) for first, second in pairs],
        )
        step = len(queries) if self.backend.kind == "openai" else self.max_batch  # the server batches on its own
        request = {} if self.request is None else {"request": self.request}
        answers = [
            a
            for i in range(0, len(queries), step)
            for a in self.backend.generate(queries[i : i + step], max_new_tokens=self.max_new_tokens, **request)
        ]
        outcomes = [a if isinstance(a, Failure) else verdict(a, self.media) for a in answers]
        scores, extras = self.resolve(outcomes)
        ties = [1.0 if not isinstance(o, Failure) and o == 0.5 else 0.0 for o in outcomes]
        return [float(s) for s in scores], {"substituted": list(extras["substituted"]), "tie": ties}

    def _media_of(self, sample: dict) -> list[Any]:
        value = sample[self.media]
        if self.media != "video":
            return [value]
        frames = list(value)
        if self.sampled_frames is None:
            return frames
        return [frames[i] for i in sample_indices(len(frames), self.sampled_frames, floor=True)]

    def __call__(self, first: dict, second: dict) -> float:
        """One pair (the per-pair protocol of PairwiseJudged)."""
        return self.judge_pairs([(first, second)])[0][0]


class UnifiedRewardThink(PairwiseJudged):
    """Pref-GRPO's pairwise win rate with the UnifiedReward-Think judge: ``score_i = wins_i / (n - 1)``.

    Inputs: ``prompt``, ``image`` (or ``video`` with ``media: video``) and ``group_id``; every pair of a group
    is judged (one batch per group). Range [0, 1]; higher is better. Options: those of
    :class:`UnifiedRewardThinkJudge`. Extras: ``wins``, and per sample ``substituted`` / ``tie``, the number of
    its comparisons whose verdict was substituted / a tie.
    """

    inputs: Inputs = Inputs(("prompt", "image", "group_id"))

    Options = UnifiedRewardThinkJudge.Options
    options: UnifiedRewardThinkJudge.Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        judge = UnifiedRewardThinkJudge(
            model_path, device, dtype, options=self.Options.from_kwargs(options, type(self).__name__)
        )
        super().__init__(model_path, device, dtype)  # the judge is its own model, loaded above
        self.use_judge(judge, "unified_reward_think")
        self.io_bound = judge.io_bound  # through an endpoint, its comparisons wait on the server

    @property
    def substitutions(self) -> int:
        """Pair verdicts substituted since this reward was built (each counted once, not per sample)."""
        judge = self.judge
        return judge.substitutions if isinstance(judge, UnifiedRewardThinkJudge) else 0
