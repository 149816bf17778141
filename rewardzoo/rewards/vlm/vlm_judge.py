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

from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ConfigError
from ...shared.options import choice, positive_int
from ..base import Inputs, PointwiseReward, RewardOutput
from ..models.vlm.common import VLMJudgeMixin, check_prompts, check_template, fill
from ..models.vlm.judging import Failure, RegexScore, yes_probability

_REGEX_KEYS = ("regex", "low", "high", "group")


def parse_rule(parse: Any, owner: str) -> RegexScore | None:
    """None for ``yes_no``; a normalising :class:`RegexScore` for a ``{regex, low, high[, group]}`` mapping."""
    if parse == "yes_no":
        return None
    if isinstance(parse, Mapping) and "regex" in parse:
        unknown = sorted(set(parse) - set(_REGEX_KEYS))
        if unknown or "low" not in parse or "high" not in parse:
            raise ConfigError(
                f"{owner}: parse mapping takes regex, low, high (and group); got {sorted(parse)}", field="kwargs.parse"
            )
        try:
            low, high = float(parse["low"]), float(parse["high"])
        except (TypeError, ValueError):
            raise ConfigError(f"{owner}: parse.low and parse.high must be numbers", field="kwargs.parse") from None
        group = positive_int(parse.get("group", 1), "kwargs.parse.group")
        return RegexScore(str(parse["regex"]), group=group, low=low, high=high, normalize=True)
    raise ConfigError(
        f"{owner}: parse must be 'yes_no' or {{regex: PATTERN, low: L, high: H}}, got {parse!r}", field="kwargs.parse"
    )


class VLMJudge(VLMJudgeMixin, PointwiseReward):
    """A rubric judge on an image: ``template`` (with ``{prompt}``) and a ``parse`` rule (module docstring).

    Inputs: ``image`` and ``prompt``. Range [0, 1]; higher is better. Options: ``template`` (required),
    ``parse`` (required), ``mode`` / ``yes`` / ``no`` (yes/no rule), ``max_new_tokens`` (regex rule, 256),
    ``system`` (a system prompt, default the chat template's), and the backend and failure options of
    :mod:`rewardzoo.rewards.models.vlm.common`. Extras: ``judgement`` (the generated text, regex rule) or
    ``p_yes`` (yes/no rule), ``substituted``, ``failure``.
    """

    inputs: Inputs = Inputs(("prompt", "image"))

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        *,
        template: str | None = None,
        parse: Any = None,
        mode: str = "absolute",
        yes: str = "Yes",
        no: str = "No",
        max_new_tokens: int = 256,
        system: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(model_path, device, dtype)
        judge_options = self.judge_options_of(options)
        if template is None or parse is None:
            raise ConfigError(
                f"{self.name}: set kwargs.template (with {{prompt}}) and kwargs.parse ('yes_no' or "
                "{regex: PATTERN, low: L, high: H})",
                field="kwargs.template" if template is None else "kwargs.parse",
            )
        self.template = check_template(template, self.name)
        self.rule = parse_rule(parse, self.name)
        self.mode = choice(mode, "kwargs.mode", ("absolute", "relative"))
        self.yes, self.no = str(yes), str(no)
        self.max_new_tokens = positive_int(max_new_tokens, "kwargs.max_new_tokens")
        if system is not None and not isinstance(system, str):
            raise ConfigError(
                f"{self.name}: system must be a string, got {type(system).__name__}", field="kwargs.system"
            )
        self.system = system
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
