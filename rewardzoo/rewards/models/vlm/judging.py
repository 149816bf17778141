"""Judges' answers: parsing them into scores, and what happens when that fails.

A VLM judge turns an answer (generated text, or answer-token probabilities) into a number. When it
cannot, the sample has a :class:`Failure`:

- ``unparseable``: the text holds no score where the parse rule looks (or no answer token in the top
  log-probabilities an endpoint returned);
- ``http``: the endpoint still failed after its retries (status, timeout, a body that is not JSON);
- ``refusal``: the endpoint refused (an OpenAI ``refusal`` message or ``finish_reason: content_filter``).

:class:`FailurePolicy` decides what then happens. The default (``on_failure: error``, or the option
left out) raises :class:`~rewardzoo.errors.RewardOutputError` naming the reward, the samples and the
answer text. ``on_failure: {substitute: VALUE}`` is the opt-in: the failed samples score ``VALUE``, each
is marked in the per-sample extra ``substituted`` (1.0, else 0.0; ``failure`` holds the reason text), and
the engine's result counts them (``RewardResult.substitutions``). Never silent, never the default.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....errors import ConfigError, RewardOutputError

#: The per-sample extra marking substituted scores (1.0 substituted, 0.0 scored); the engine sums it.
SUBSTITUTED = "substituted"
FAILURE_KINDS = ("unparseable", "http", "refusal")


@dataclass(frozen=True)
class Failure:
    """Why one sample has no score: ``kind`` (:data:`FAILURE_KINDS`), ``reason`` and the ``answer`` text if any."""

    kind: str
    reason: str
    answer: str | None = None

    def describe(self, limit: int = 300) -> str:
        text = f"{self.kind}: {self.reason}"
        if self.answer is not None:
            shown = self.answer if len(self.answer) <= limit else self.answer[:limit] + "..."
            text += f"; answer {shown!r}"
        return text


@dataclass(frozen=True)
class FailurePolicy:
    """``substitute`` None: failures raise; a number: failed samples score it (counted, see the module doc)."""

    substitute: float | None = None

    @classmethod
    def from_option(cls, value: Any, *, owner: str, score_range: tuple[float, float] | None = None) -> FailurePolicy:
        """Read ``on_failure``: None or ``"error"`` -> raise; ``{substitute: VALUE}`` -> substitute a finite
        number (within ``score_range`` when given). ConfigError naming ``kwargs.on_failure`` otherwise."""
        if value is None or value == "error":
            return cls()
        if isinstance(value, Mapping) and set(value) == {"substitute"}:
            sub = value["substitute"]
            ok = isinstance(sub, (int, float)) and not isinstance(sub, bool) and math.isfinite(sub)
            if ok and score_range is not None:
                ok = score_range[0] <= sub <= score_range[1]
            if not ok:
                where = f" within [{score_range[0]}, {score_range[1]}]" if score_range else ""
                raise ConfigError(
                    f"{owner}: on_failure.substitute must be a finite number{where}, got {sub!r}",
                    field="kwargs.on_failure",
                )
            return cls(float(sub))
        raise ConfigError(
            f"{owner}: on_failure must be 'error' (the default) or {{substitute: VALUE}}, got {value!r}",
            field="kwargs.on_failure",
        )

    def resolve(self, outcomes: Sequence[float | Failure], *, reward: str) -> tuple[np.ndarray, dict[str, Any]]:
        """Scores (float64) and the extras ``substituted`` (and ``failure`` texts) from per-sample outcomes.

        Raises RewardOutputError naming ``reward``, the failed inputs (``inputs``: positions in this call,
        which the engine turns into the batch's sample indices) and the first answer, unless substitution is on.
        """
        found = {i: o for i, o in enumerate(outcomes) if isinstance(o, Failure)}
        failed = list(found)
        if failed and self.substitute is None:
            first = found[failed[0]]
            kinds = sorted({f.kind for f in found.values()})
            raise RewardOutputError(
                f"the judge gave no score for {len(failed)} of {len(outcomes)} input(s) ({', '.join(kinds)}); first, "
                f"input {failed[0]} of the call: {first.describe()}. Set on_failure: {{substitute: VALUE}} to score "
                "such inputs with VALUE instead (counted in the extra 'substituted')",
                reward=reward,
                inputs=failed,
            )
        scores = np.array([self.substitute if isinstance(o, Failure) else float(o) for o in outcomes], dtype=np.float64)
        marks = np.zeros(len(outcomes), dtype=np.float64)
        marks[failed] = 1.0
        failures = [o.describe() if isinstance(o, Failure) else "" for o in outcomes]
        return scores, {SUBSTITUTED: marks, "failure": failures}


# ------------------------------------------------------------------------------------------- parse rules


@dataclass(frozen=True)
class RegexScore:
    """A number extracted from text: the first match of ``pattern`` (its group ``group``), as a float,
    mapped from ``[low, high]`` to ``[0, 1]`` when ``normalize`` (``(x - low) / (high - low)``), else kept.

    A match outside ``[low, high]`` (when both are given) is unparseable, like no match at all.
    """

    pattern: str
    group: int = 1
    low: float | None = None
    high: float | None = None
    normalize: bool = False
    flags: int = 0

    def __post_init__(self) -> None:
        try:
            compiled = re.compile(self.pattern, self.flags)
        except re.error as exc:
            raise ConfigError(
                f"parse pattern {self.pattern!r} is not a regular expression: {exc}", field="kwargs.parse"
            ) from None
        if compiled.groups < self.group:
            raise ConfigError(
                f"parse pattern {self.pattern!r} has no group {self.group} (put the number in parentheses)",
                field="kwargs.parse",
            )
        if self.normalize and (self.low is None or self.high is None or not self.low < self.high):
            raise ConfigError(f"normalising needs low < high, got [{self.low}, {self.high}]", field="kwargs.parse")

    def __call__(self, text: str) -> float | Failure:
        match = re.search(self.pattern, text, self.flags)
        if match is None:
            return Failure("unparseable", f"no match for {self.pattern!r}", text)
        try:
            value = float(match.group(self.group))
        except (TypeError, ValueError):
            return Failure("unparseable", f"{match.group(self.group)!r} is not a number", text)
        if not math.isfinite(value):
            return Failure("unparseable", f"{value} is not a finite number", text)
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return Failure("unparseable", f"{value:g} is outside [{self.low}, {self.high}]", text)
        if self.normalize and self.low is not None and self.high is not None:  # (normalize has both: __post_init__)
            return (value - self.low) / (self.high - self.low)
        return value


def yes_probability(probs: Sequence[float], *, mode: str = "absolute") -> float | Failure:
    """A yes/no judgement from answer-token probabilities ``(P(yes), P(no))``.

    ``mode``: ``"absolute"`` -> ``P(yes)`` over the whole vocabulary (VQAScore); ``"relative"`` ->
    ``P(yes) / (P(yes) + P(no))`` (Flow-Factory's vllm judge). Unparseable when the probabilities give
    nothing to normalise (both 0, e.g. neither token among an endpoint's top log-probabilities).
    """
    p_yes, p_no = float(probs[0]), float(probs[1]) if len(probs) > 1 else 0.0
    if mode == "absolute":
        return p_yes
    total = p_yes + p_no
    if total <= 0.0:
        return Failure(
            "unparseable", "neither the yes nor the no token has a probability (not in the top log-probabilities?)"
        )
    return p_yes / total


def tagged(text: str, tag: str) -> str | None:
    """The stripped content of the first ``<tag>...</tag>`` in ``text`` (across lines), or None."""
    match = re.search(rf"<{tag}>(.*?)</{tag}>", text, re.DOTALL)
    return match.group(1).strip() if match else None


def _score_dict(data: Any) -> tuple[list[float], str] | None:
    """(scores, reasoning) of a parsed answer object, or None when it holds neither."""
    if not isinstance(data, dict):
        return None
    reasoning = next((data[k] for k in ("reasoning", "reason", "rationale") if isinstance(data.get(k), str)), "")
    value = data.get("score")
    entries = value if isinstance(value, list) else [value] if isinstance(value, (int, float)) else []
    scores = []
    for entry in entries:
        try:
            scores.append(float(entry))
        except (TypeError, ValueError):
            return None
    return (scores, reasoning) if scores or reasoning else None


def _quote_reasoning(text: str) -> str:
    """Escape the double quotes inside the ``"reasoning"`` string (up to the quote before a ``,`` or ``}``)."""
    return re.sub(
        r'("reasoning"\s*:\s*")(.*?)(?="\s*[,}])',
        lambda m: m.group(1) + m.group(2).replace('"', '\\"'),
        text,
        flags=re.DOTALL,
    )


def rubric_scores(text: str) -> tuple[list[float], str] | Failure:
    """The ``{"reasoning": "...", "score": [...]}`` answer of a rubric judge (VIEScore, EditScore,
    UnifiedReward-Edit): (the scores, the reasoning), read as EditScore's ``parse_vlm_output_to_dict`` reads it.

    The span from the first ``{`` to the last ``}`` (else the whole text) is read as JSON as it is, then with
    Python literals and single quotes made JSON (``True`` / ``False`` / ``None``; ``'`` -> ``"`` when that
    parses) and bare keys quoted, then with the quotes inside ``reasoning`` escaped. Failing that, the scores
    are every number after the ``score`` key (or in the whole span without one). Unparseable when no score is
    found (EditScore's batched path scores such an answer mid-scale; here the failure policy decides).
    """
    if not text or not text.strip():
        return Failure("unparseable", "the answer is empty", text)
    span = re.search(r"\{.*\}", text, re.DOTALL)
    target = span.group(0) if span else text.strip()

    def literal(s: str) -> str:
        s = re.sub(r"\bTrue\b", "true", re.sub(r"\bFalse\b", "false", re.sub(r"\bNone\b", "null", s)))
        try:
            json.loads(s.replace("'", '"'))
            return s.replace("'", '"')
        except json.JSONDecodeError:
            return re.sub(r"([\{\s,])(\w+)\s*:", r'\1"\2":', s)

    for fix in (lambda s: s, literal, _quote_reasoning):
        try:
            found = _score_dict(json.loads(fix(target)))
        except (json.JSONDecodeError, TypeError):
            continue
        if found is not None:
            if not found[0]:
                return Failure("unparseable", "the answer's 'score' holds no number", text)
            return found
    key = re.search(r"[\"']score[\"']\s*:\s*(.*)", target, re.DOTALL | re.IGNORECASE)
    scores = [float(x) for x in re.findall(r"[-+]?\d*\.?\d+", key.group(1) if key else target)]
    if not scores:
        return Failure("unparseable", "no score in the answer", text)
    reason = re.search(
        r"[\"']reasoning[\"']\s*:\s*[\"']?(.*?)[\"']?\s*,\s*[\"']score[\"']", target, re.DOTALL | re.IGNORECASE
    )
    return scores, reason.group(1).strip().replace('\\"', '"') if reason else (
        target[: key.start()].strip() if key else target
    )


__all__ = [
    "SUBSTITUTED",
    "FAILURE_KINDS",
    "Failure",
    "FailurePolicy",
    "RegexScore",
    "yes_probability",
    "tagged",
    "rubric_scores",
]
