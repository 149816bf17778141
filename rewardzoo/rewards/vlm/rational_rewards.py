"""RationalRewards (Wang et al., 2026; Qwen3-VL-8B fine-tunes): rubric judges of text-to-image generations and of image edits, as
Flow-Factory a0b2bc5 runs them (``rewards/rational_rewards_t2i.py``, ``rewards/rational_rewards_edit.py``).

The judge (``TIGER-Lab/RationalRewards-8B-T2I`` / ``-Edit``) gets the reference's system prompt and user turn
(``rational_rewards_prompts.txt`` beside this module, verbatim: the instruction, the image(s), the rubric and the output format) and writes
a judgement whose ``# Detailed Judgement`` section scores each aspect on 1-4. The reading, as the reference's
``parse_scores_from_detailed_judgement`` and ``aggregate_aspect_scores``:

- the text before the first ``# Summary:`` is split into blocks at the lines that start with an aspect's number
  and contain its header (``1.`` and ``Text Faithfulness``, ...; a header seen twice: the later block); when no
  such line exists, at the headers followed by ``:`` in rubric order;
- in each block, the first line matching ``(##)? Score: VALUE`` (any case) whose VALUE is ``N/A`` or starts with a
  number gives the aspect's score;
- over the configured ``aspects``, missing and ``N/A`` scores are skipped, the rest clamped to [1, 4] and
  averaged; ``score = (mean - 1) / 3`` in [0, 1].

A judgement with no usable aspect is unparseable: an error naming the reward and the sample (Flow-Factory scores it
0.0 with a warning; ``on_failure: {substitute: 0.0}`` does the same here, counted in the extra ``substituted``).
Decoding is the reference's request (``temperature: 0.1``, ``max_tokens: 2048``; the rest the server's defaults:
the checkpoint's generation config, as Flow-Factory's ``scripts/start_vllm_rational_reward.sh`` serves it);
locally the same request is sampled as vLLM samples it (:func:`~rewardzoo.rewards.models.vlm.backend.served_sampling`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from ...errors import ConfigError
from ...shared.editing import edit_inputs
from ...shared.files import text_blocks
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.clip import check_pairs
from ..models.vlm.backbone import VLMQuery
from ..models.vlm.common import VLMJudgeMixin, check_prompts, fill, place_media
from ..models.vlm.judging import Failure
from ..models.vlm.options import JudgeOptions
from ..options import Field, PositiveInt, PositiveNumber

# The reference's prompts, verbatim, from the data file beside this module (rational_rewards_prompts.txt), as
# Flow-Factory a0b2bc5 sends them (src/flow_factory/rewards/rational_rewards_t2i.py ``RATIONAL_T2I_SYSTEM_PROMPT``,
# ``build_scoring_user_content``, ``T2I_SCORING_PROMPT_SUFFIX``; rational_rewards_edit.py
# ``RATIONAL_EDIT_SYSTEM_PROMPT``, ``build_scoring_user_content_edit``, ``COMMON_TASK_GUIDELINE``): each judge's system
# prompt and user turn (the instruction, the image(s), the rubric and the output format). Each ``<image>`` and the
# newline after it stand for one image part; the text around them is the reference's, character for character.
_PROMPTS = text_blocks(Path(__file__).with_name("rational_rewards_prompts.txt"))
RATIONAL_REWARDS_T2I_SYSTEM = _PROMPTS["RATIONAL_REWARDS_T2I_SYSTEM"]
RATIONAL_REWARDS_EDIT_SYSTEM = _PROMPTS["RATIONAL_REWARDS_EDIT_SYSTEM"]
RATIONAL_REWARDS_T2I = _PROMPTS["RATIONAL_REWARDS_T2I"]
RATIONAL_REWARDS_EDIT = _PROMPTS["RATIONAL_REWARDS_EDIT"]

#: Each aspect's header in the judgement.
HEADERS = {
    "text_faithfulness": "Text Faithfulness",
    "image_faithfulness": "Image Faithfulness",
    "physical_quality": "Physical and Visual Quality",
    "text_rendering": "Text Rendering",
}
#: The rubrics' aspects, in their numbered order.
RUBRICS = {
    "t2i": ("text_faithfulness", "physical_quality", "text_rendering"),
    "edit": ("text_faithfulness", "image_faithfulness", "physical_quality", "text_rendering"),
}
#: The reference's templates (``{prompt}``, one ``<image>`` per image) and system prompts, per rubric.
TEMPLATES = {"rational_rewards_t2i": RATIONAL_REWARDS_T2I, "rational_rewards_edit": RATIONAL_REWARDS_EDIT}
SYSTEMS = {"t2i": RATIONAL_REWARDS_T2I_SYSTEM, "edit": RATIONAL_REWARDS_EDIT_SYSTEM}
#: The released judges (the served names Flow-Factory's start script gives them drop the ``TIGER-Lab/``).
MODELS = {"t2i": "TIGER-Lab/RationalRewards-8B-T2I", "edit": "TIGER-Lab/RationalRewards-8B-Edit"}
#: Flow-Factory's request fields (the ``temperature`` and ``max_tokens`` defaults of its reward classes).
TEMPERATURE = 0.1
MAX_TOKENS = 2048
#: What an aspect reads as when the judge writes ``N/A`` (skipped by the mean).
NA = "N/A"

_SCORE_LINE = re.compile(r"(?:##\s*)?Score\s*:\s*(.+)$", re.IGNORECASE)
_LEADING_NUMBER = re.compile(r"\s*(\d+(?:\.\d+)?)")


def _block_score(block: str) -> float | str | None:
    """The first readable ``Score:`` value of a block: a float, :data:`NA`, or None."""
    for line in block.split("\n"):
        found = _SCORE_LINE.search(line.strip())
        if found is None:
            continue
        value = found.group(1).strip()
        if value == NA:
            return NA
        number = _LEADING_NUMBER.match(value)
        if number is not None:
            return float(number.group(1))
    return None


def _blocks(body: str, rubric: Sequence[str]) -> dict[str, str]:
    """The text of each aspect's block: split at its numbered header lines, else at ``Header:`` in order."""
    blocks: dict[str, str] = {}
    current: str | None = None
    lines: list[str] = []
    for line in body.split("\n"):
        stripped = line.strip()
        opened = next(
            (a for k, a in enumerate(rubric, 1) if stripped.startswith(f"{k}.") and HEADERS[a] in stripped), None
        )
        if opened is not None:
            if current is not None:
                blocks[current] = "\n".join(lines)
            current, lines = opened, [line]
        elif current is not None:
            lines.append(line)
    if current is not None:
        blocks[current] = "\n".join(lines)
    first = f"{HEADERS[rubric[0]]}:"
    if blocks or first not in body:
        return blocks
    rest = body.partition(first)[2]
    for aspect, following in zip(rubric, rubric[1:]):
        header = f"{HEADERS[following]}:"
        blocks[aspect], rest = rest.partition(header)[::2] if header in rest else (rest, "")
    blocks[rubric[-1]] = rest
    return blocks


def aspect_scores(text: str, rubric: Sequence[str]) -> dict[str, float | str | None]:
    """Each aspect of ``rubric`` read from a judgement (module docstring): a float, :data:`NA` or None."""
    body = text.split("# Summary:", 1)[0]
    found: dict[str, float | str | None] = dict.fromkeys(rubric)
    for aspect, block in _blocks(body, rubric).items():
        value = _block_score(block)
        if value is not None:
            found[aspect] = value
    return found


def rubric_reward(scores: dict[str, float | str | None], aspects: Sequence[str], text: str = "") -> float | Failure:
    """``(mean - 1) / 3`` of the ``aspects``' scores clamped to [1, 4] (missing and N/A skipped), or a Failure."""
    usable = [min(4.0, max(1.0, float(v))) for a in aspects if isinstance(v := scores.get(a), float)]
    usable = [v for v in usable if math.isfinite(v)]
    if not usable:
        return Failure(
            "unparseable", f"no usable score for the aspects {list(aspects)} in the # Detailed Judgement", text
        )
    return min(1.0, max(0.0, (sum(usable) / len(usable) - 1.0) / 3.0))


def check_aspects(aspects: Sequence[str] | None, rubric: Sequence[str], owner: str) -> tuple[str, ...]:
    """The configured aspects (None: the whole rubric); ConfigError naming ``kwargs.aspects`` otherwise."""
    if aspects is None:
        return tuple(rubric)
    unknown = [a for a in aspects if a not in rubric]
    if unknown:
        raise ConfigError(
            f"{owner}: unknown aspect(s) {unknown}; this rubric has {list(rubric)}", field="kwargs.aspects"
        )
    return tuple(aspects)


class RationalRewards(VLMJudgeMixin, PointwiseReward):
    """RationalRewards' text-to-image judge: ``(mean aspect score - 1) / 3`` from its ``# Detailed Judgement``.

    Inputs: ``prompt`` and ``image``. Range [0, 1]; higher is better. Options: :class:`Options`, with the backend and failure
    options of :class:`~rewardzoo.rewards.models.vlm.common.JudgeOptions`. Extras: one per rubric aspect (its score clamped to
    [1, 4], NaN when missing or N/A), ``judgement`` (the text), ``substituted``, ``failure``.
    """

    inputs: Inputs = Inputs(("prompt", "image"))
    rubric_name: ClassVar[str] = "t2i"
    default_model: str | None = MODELS["t2i"]

    class Options(JudgeOptions):
        aspects: list[str] | None = Field(None, min_length=1)
        """The rubric aspects averaged (default all: ``text_faithfulness``, ``physical_quality``, ``text_rendering``
        for text-to-image)."""
        decoding: Literal["reference", "greedy"] = "reference"
        """``reference``: Flow-Factory's request (``temperature`` then ``max_new_tokens``, the rest the server's
        defaults; sampled locally as vLLM samples it); ``greedy``."""
        temperature: PositiveNumber = TEMPERATURE
        """The sampling temperature of ``decoding: reference`` (Flow-Factory's 0.1)."""
        max_new_tokens: PositiveInt = MAX_TOKENS
        """Tokens the judge may write (Flow-Factory's 2048)."""

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        judge_options = o = self.options
        self.rubric = RUBRICS[self.rubric_name]
        self.aspects = check_aspects(o.aspects, self.rubric, self.name)
        self.template = TEMPLATES[f"rational_rewards_{self.rubric_name}"]
        self.system = SYSTEMS[self.rubric_name]
        self.decoding, self.temperature, self.max_new_tokens = o.decoding, o.temperature, o.max_new_tokens
        self.setup_judge(self.name, judge_options, model_path=model_path, device=device, dtype=dtype)

    @property
    def request(self) -> dict[str, Any] | None:
        """The decoding fields of every request: Flow-Factory's (``decoding: reference``), else None (greedy)."""
        if self.decoding == "greedy":
            return None
        return {"temperature": self.temperature, "max_tokens": self.max_new_tokens}

    def query(self, prompt: str, media: Sequence[Any]) -> VLMQuery:
        """One request: the template's text around the images (the prompt filled in after the split, so a
        prompt holding ``<image>`` stays text) and the system prompt."""
        parts = place_media(self.template, [self.media_part(m) for m in media], self.name)
        return VLMQuery(tuple(fill(p, prompt) if isinstance(p, str) else p for p in parts), system=self.system)

    def score_text(self, text: str) -> tuple[float | Failure, dict[str, float | str | None]]:
        """The score of one judgement (or a Failure) and its aspect scores."""
        scores = aspect_scores(text, self.rubric)
        return rubric_reward(scores, self.aspects, text), scores

    def media_of(self, image: Sequence[Any], condition_images: Any) -> list[list[Any]]:
        """Each sample's images, in the template's order."""
        return [[im] for im in image]

    def __call__(
        self, prompt: Sequence[str], image: Sequence[Any], condition_images: Sequence[Any] | None = None, **_: Any
    ) -> RewardOutput:
        media = self.media_of(image, condition_images)
        prompts = check_prompts(prompt, len(media))
        queries = [self.query(p, m) for p, m in zip(prompts, media)]
        request = {} if self.request is None else {"request": self.request}
        answers = self.backend.generate(queries, max_new_tokens=self.max_new_tokens, **request)
        read = [(a, {}) if isinstance(a, Failure) else self.score_text(a) for a in answers]
        scores, extras = self.resolve([outcome for outcome, _ in read])
        for aspect in self.rubric:
            extras[aspect] = [
                min(4.0, max(1.0, v)) if isinstance(v := found.get(aspect), float) else math.nan for _, found in read
            ]
        extras["judgement"] = [a.answer or "" if isinstance(a, Failure) else a for a in answers]
        return RewardOutput(scores, extras=extras)


class RationalRewardsEdit(RationalRewards):
    """RationalRewards' image-edit judge: as :class:`RationalRewards` with the four-aspect edit rubric
    (``text_faithfulness``, ``image_faithfulness``, ``physical_quality``, ``text_rendering``).

    Inputs: ``prompt`` (the instruction), ``image`` (the edit) and ``condition_images`` (the source first; a mask
    is checked and not shown). Range [0, 1]. Options and extras as :class:`RationalRewards`.
    """

    inputs: Inputs = Inputs(("prompt", "image", "condition_images"))
    rubric_name: ClassVar[str] = "edit"
    default_model: str | None = MODELS["edit"]

    def media_of(self, image: Sequence[Any], condition_images: Any) -> list[list[Any]]:
        edits = edit_inputs(condition_images)
        check_pairs(image=image, condition_images=edits)
        return [[e.source, im] for e, im in zip(edits, image)]
