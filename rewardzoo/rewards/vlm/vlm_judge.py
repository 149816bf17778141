"""A VLM judge for users' own rubrics: a prompt template and a parse rule, on either backend.

Two parse rules:

- ``parse: yes_no``: one forward pass (no generation); ``P(yes)`` at the first answer token over the whole
  vocabulary (``mode: absolute``, as VQAScore), or ``P(yes) / (P(yes) + P(no))`` (``mode: relative``, as
  Flow-Factory's vLLM judge); ``yes`` / ``no`` name the answer words (default ``Yes`` / ``No``);
- ``parse: {regex: PATTERN, low: L, high: H}``: greedy generation (``max_new_tokens``), the first match of
  PATTERN (its first group, or ``group``) read as a number X in [L, H] and mapped to ``(X - L) / (H - L)``.
  No match, or X outside [L, H], is unparseable (see the failure policy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ...errors import ConfigError
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.vlm.common import JudgeOptions, VideoJudgeOptions, VLMJudgeMixin, check_prompts, check_template, fill
from ..models.vlm.judging import Failure, RegexScore, yes_probability
from ..options import Number, PositiveInt, RewardOptions, model_validator


class RegexRule(RewardOptions):
    """A ``parse`` rule reading a number with a regular expression, normalised from ``[low, high]`` to [0, 1]."""

    regex: str
    """The pattern; its ``group`` holds the number."""
    low: Number
    """The worst score the rubric gives."""
    high: Number
    """The best score the rubric gives."""
    group: PositiveInt = 1
    """The pattern's group that holds the number."""

    def rule(self) -> RegexScore:
        return RegexScore(self.regex, group=self.group, low=self.low, high=self.high, normalize=True)


class VLMJudge(VLMJudgeMixin, PointwiseReward):
    """A rubric judge on an image: ``template`` (with ``{prompt}``) and a ``parse`` rule (module docstring).

    Inputs: ``image`` and ``prompt``. Range [0, 1]; higher is better. Options: :class:`Options`, with the backend and
    failure options of :class:`~rewardzoo.rewards.models.vlm.common.JudgeOptions`. Extras: ``judgement`` (the generated text, regex rule) or
    ``p_yes`` (yes/no rule), ``substituted``, ``failure``.
    """

    inputs: Inputs = Inputs(("prompt", "image"))

    class Options(JudgeOptions):
        template: str | None = None
        """Required: the question, with ``{prompt}`` (``<image>`` marks where the media go)."""
        parse: Literal["yes_no"] | RegexRule | None = None
        """Required: ``yes_no`` (the probability of ``yes`` at the first answer token) or ``{regex: PATTERN, low: L,
        high: H[, group: G]}`` (a number read from the generated text)."""
        mode: Literal["absolute", "relative"] = "absolute"
        """yes/no rule: ``absolute`` P(yes) over the vocabulary, or ``relative`` P(yes) / (P(yes) + P(no))."""
        yes: str = "Yes"
        """yes/no rule: the answer that scores."""
        no: str = "No"
        """yes/no rule: the other answer of ``mode: relative``."""
        max_new_tokens: PositiveInt = 256
        """Regex rule: tokens the judge may write."""
        system: str | None = None
        """A system prompt (default the chat template's)."""

        @model_validator(mode="after")
        def _required(self) -> VLMJudge.Options:
            if self.template is None or self.parse is None:
                raise ConfigError(
                    "set kwargs.template (with {prompt}) and kwargs.parse ('yes_no' or "
                    "{regex: PATTERN, low: L, high: H})",
                    field="kwargs.template" if self.template is None else "kwargs.parse",
                )
            return self

    options: Options

    def __init__(self, model_path: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(model_path, device, dtype, **options)
        judge_options = o = self.options
        self.template = check_template(o.template, self.name)
        self.rule = None if o.parse == "yes_no" or o.parse is None else o.parse.rule()
        self.mode, self.yes, self.no = o.mode, o.yes, o.no
        self.max_new_tokens = o.max_new_tokens
        self.system = o.system
        self.setup_judge(self.name, judge_options, model_path=model_path, device=device, dtype=dtype)
        if self.media == "video":
            self.inputs = Inputs(("prompt", "video"), num_frames=self.num_frames)

    def __call__(
        self, prompt: Sequence[str], image: Sequence[Any] = (), video: Sequence[Any] = (), **_: Any
    ) -> RewardOutput:
        media = video if self.media == "video" else image
        prompts = check_prompts(prompt, len(media))
        queries = self.queries_of([fill(self.template, p) for p in prompts], [[m] for m in media], system=self.system)
        if self.rule is None:
            probs = self.backend.answer_probs(queries, [self.yes, self.no])
            outcomes = [p if isinstance(p, Failure) else yes_probability(p, mode=self.mode) for p in probs]
            scores, extras = self.resolve(outcomes)
            extras["p_yes"] = [float("nan") if isinstance(p, Failure) else float(p[0]) for p in probs]
        else:
            answers = self.backend.generate(queries, max_new_tokens=self.max_new_tokens)
            scores, extras = self.resolve([a if isinstance(a, Failure) else self.rule(a) for a in answers])
            extras["judgement"] = [a.answer or "" if isinstance(a, Failure) else a for a in answers]
        return RewardOutput(scores, extras=extras)


class VideoVLMJudge(VLMJudge):
    """A rubric judge on a video (``num_frames`` sampled uniformly, default 8; ``fps`` 2.0): as :class:`VLMJudge`.
    Inputs: ``video`` and ``prompt``. Range [0, 1]; higher is better."""

    inputs: Inputs = Inputs(("prompt", "video"), num_frames=8)
    media: str = "video"

    class Options(VLMJudge.Options, VideoJudgeOptions):
        pass

    options: Options
