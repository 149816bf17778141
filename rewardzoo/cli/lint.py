"""The config lint: warnings about reward configs that invite reward hacking, read from the model cards.

:func:`lint_config` returns one :class:`LintWarning` per finding, each with a stable code (table
:data:`CODES`), the stream(s) it concerns, the reason and the fix. It reads the configured rewards' cards
through the registry and imports no reward, so it runs without the rewards' extras installed
(``rewardzoo lint CONFIG`` is its front door). The checks:

- ``RZ001 no-prompt-reward``: no training reward reads the prompt (card ``prompt_conditioned``), so nothing
  rewards following it. Judged per dataset (the rewards that score it); a reward whose card does not say
  (a ``remote`` reward, a Python path without card) makes the check abstain.
- ``RZ002 dominant-weight``: with ``advantage: sum``, one reward's weighted spread
  ``|weight| * (high - low)`` of its card's ``typical_range`` is at least ``dominance`` (default 0.8) of the
  sum over the rewards that have one, so the total (and its group advantage) follows that reward alone.
  ``advantage: gdpo`` z-scores each reward first, so scales do not matter there.
- ``RZ003 group-over-constant``: a group-relative wrapper (a groupwise card with a ``base``), or
  ``advantage: gdpo``, over a reward whose card says ``near_constant_in_group``: the group's spread is
  noise, and normalising it makes advantages of it.
- ``RZ004 no-gold-check``: every evaluation reward is a training reward (the same model, weights and
  options, group wrappers read through to their base; ``eval_rewards`` absent falls back to ``rewards``),
  so nothing measured outside the optimised signal can show it being gamed (GRPO-Guard's proxy vs gold).
- ``RZ005 still-video``: a training reward whose card says ``prefers_still_video`` without
  ``video_dynamic_degree`` or a diversity term (:data:`STILL_VIDEO_COUNTERS`) scoring the same samples.
- ``RZ006 prompt-blind-pair``: a training entry set as its card's ``prompt_blind_when`` says (its options, else
  their defaults): the reward compares two generated streams and never reads the prompt, the setting under which
  audio and video collapse together (ImageBind's ``audio_video``: UniRL #411 / #418 / #461, verl-omni #563).

Imports: the config, the registry, the errors and the reward records (rewards.info); the core layer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..core.resolve import resolve_config
from ..errors import ConfigError
from ..registry import entries, lookup
from ..rewards.info import RewardInfo
from ..spec.config import ConfigSource, RewardConfig, RewardSpec

#: Code -> short name of every warning; codes are stable (new checks get new codes).
CODES: dict[str, str] = {
    "RZ001": "no-prompt-reward",
    "RZ002": "dominant-weight",
    "RZ003": "group-over-constant",
    "RZ004": "no-gold-check",
    "RZ005": "still-video",
    "RZ006": "prompt-blind-pair",
}
#: A reward dominates when its weighted typical spread is at least this share of the sum over the rewards.
DOMINANCE = 0.8
#: Rewards that counter a preference for still videos: motion itself, or diversity within the group.
STILL_VIDEO_COUNTERS = ("video_dynamic_degree", "group_diversity", "diversity_weighted")


@dataclass(frozen=True)
class LintWarning:
    """One finding: ``code`` (a key of :data:`CODES`) and its ``name``, the ``streams`` it concerns (config
    entry names), the ``dataset`` it was found for (None: every dataset, or the config routes none), the
    ``reason`` and the ``fix``."""

    code: str
    streams: tuple[str, ...]
    reason: str
    fix: str
    dataset: str | None = None

    @property
    def name(self) -> str:
        return CODES[self.code]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (``rewardzoo lint --json``)."""
        return {"code": self.code, "name": self.name, **asdict(self), "streams": list(self.streams)}

    def __str__(self) -> str:
        where = ", ".join(f"'{s}'" for s in self.streams) or "the config"
        scope = f" (dataset '{self.dataset}')" if self.dataset is not None else ""
        return f"{self.code} {self.name}: {where}{scope}: {self.reason}\n  fix: {self.fix}"


# --------------------------------------------------------------------------------------- the rewards
@dataclass(frozen=True)
class _Reward:
    """A config entry as the lint sees it: its record (None: no card), its base's (group wrappers) and the
    identity of the scoring model underneath (the base for a wrapper)."""

    spec: RewardSpec
    info: RewardInfo | None
    base: _Reward | None

    @property
    def leaf(self) -> _Reward:
        return self.base.leaf if self.base is not None else self

    def fact(self, name: str) -> Any:
        """A card fact of the model scored underneath (through group wrappers to their base)."""
        leaf = self.leaf
        return None if leaf.info is None else getattr(leaf.info, name)

    def names(self) -> set[str]:
        """The registry names of this reward and of every base under it."""
        own = {self.info.name} if self.info is not None else {self.spec.reward_model.lower()}
        return own | (self.base.names() if self.base is not None else set())

    def identity(self) -> tuple:
        """What makes two entries the same scoring model: implementation, weights, options (not device,
        dtype, batch size or weight, which change how it runs, not what it says)."""
        leaf = self.leaf
        target = leaf.info.implementation if leaf.info is not None else leaf.spec.reward_model
        kwargs = {k: v for k, v in leaf.spec.kwargs.items() if k != "base"}
        return target, leaf.spec.model_path, json.dumps(kwargs, sort_keys=True, default=repr)


def _reward(spec: RewardSpec) -> _Reward:
    info = lookup(spec.reward_model)
    return _Reward(spec, info, _base(spec, info))


def _base(spec: RewardSpec, info: RewardInfo | None) -> _Reward | None:
    """The base of a group wrapper (``kwargs: {base: name}`` or ``{base: {reward_model: ..., ...}}``, the
    convention of :mod:`rewardzoo.rewards.group`), read as an entry of its own; None for other rewards."""
    base = spec.kwargs.get("base")
    if info is None or info.kind != "groupwise" or base is None:
        return None
    if isinstance(base, str):
        base = {"reward_model": base}
    if (
        not isinstance(base, Mapping)
        or not isinstance(base.get("reward_model"), str)
        or not isinstance(base.get("kwargs") or {}, Mapping)
    ):
        raise ConfigError(
            "'base' must be a reward name or a mapping with reward_model", entry=spec.name, field="kwargs.base"
        )
    inner = RewardSpec(
        name=f"{spec.name}.base",
        reward_model=base["reward_model"],
        model_path=base.get("model_path"),
        kwargs=dict(base.get("kwargs") or {}),
    )
    return _reward(inner)


def _scopes(rewards: Sequence[_Reward]) -> Iterator[tuple[str | None, list[_Reward]]]:
    """(dataset, the rewards that score it) for each dataset a config routes, then (None, the rewards of
    every dataset) for the others; only the latter when the config routes none."""
    named = sorted({d for r in rewards for d in (r.spec.applicable_datasets or ())})
    for dataset in named:
        yield dataset, [r for r in rewards if r.spec.applies_to(dataset)]
    everywhere = [r for r in rewards if r.spec.applicable_datasets is None]
    if everywhere or not named:
        yield None, everywhere


# ---------------------------------------------------------------------------------------- the checks
def _no_prompt_reward(dataset: str | None, rewards: list[_Reward]) -> Iterator[LintWarning]:
    facts = [r.fact("prompt_conditioned") for r in rewards]
    if not rewards or any(f is not False for f in facts):
        return
    modalities = {r.fact("modality") for r in rewards} - {"any", None}
    examples = [n for n, e in entries().items() if e.prompt_conditioned and e.modality in modalities][:4]
    hint = f" (for {', '.join(sorted(modalities))}: {', '.join(examples)})" if examples else ""
    yield LintWarning(
        "RZ001",
        tuple(r.spec.name for r in rewards),
        "no training reward reads the prompt, so nothing rewards following it: the policy can "
        "drift to whatever these rewards like for any prompt",
        f"add a prompt-conditioned reward{hint}; the cards' `prompt_conditioned` says which",
        dataset,
    )


def _dominant_weight(dataset: str | None, rewards: list[_Reward], dominance: float) -> Iterator[LintWarning]:
    spread = {}
    for r in rewards:
        typical = r.info.typical_range if r.info is not None else None
        # a scheduled weight: its larger end (the schedule passes through every value between)
        weight = max((r.spec.weight_for(dataset, step) for step in (0, 2**62)), key=abs)
        if typical is not None and weight != 0.0:
            spread[r.spec.name] = (abs(weight) * (typical[1] - typical[0]), weight, typical)
    if len(spread) < 2:
        return
    total = sum(s for s, _, _ in spread.values())
    name, (top, _, _) = max(spread.items(), key=lambda item: item[1][0])
    if top < dominance * total:
        return
    balanced = ", ".join(f"{n}: {1.0 / (t[1] - t[0]):.3g}" for n, (_, _, t) in spread.items())
    shares = ", ".join(f"{n} {s / total:.0%}" for n, (s, _, _) in spread.items())
    yield LintWarning(
        "RZ002",
        (name,),
        f"'{name}' makes {top / total:.0%} of the weighted spread of the total (|weight| x the "
        f"width of the card's typical_range; {shares}), so the total and its group advantage "
        "follow it alone and the other rewards barely steer training",
        f"weights inversely proportional to the typical spreads give each reward an equal say "
        f"({balanced}; scale to taste), or use `advantage: gdpo`, which normalises each reward "
        "within its group before the weighted sum",
        dataset,
    )


def _group_over_constant(rewards: list[_Reward], advantage: str) -> Iterator[LintWarning]:
    for r in rewards:
        if not r.fact("near_constant_in_group"):
            continue
        scored = r.leaf.info.name if r.leaf.info is not None else r.leaf.spec.reward_model
        if r.base is not None and r.info is not None:  # a base is found only under a known group wrapper
            how = f"the group wrapper '{r.info.name}' normalises"
            fix = (
                f"score '{scored}' as its own pointwise entry (a guard with a weight) instead of under '{r.info.name}'"
            )
        elif advantage == "gdpo":
            how = "`advantage: gdpo` z-scores each reward within its group and so normalises"
            fix = f"use `advantage: sum`, or leave '{scored}' out of training (keep it in eval_rewards)"
        else:
            continue
        yield LintWarning(
            "RZ003",
            (r.spec.name,),
            f"'{scored}' is near-constant within a group (its card's near_constant_in_group): "
            f"{how} a spread that is noise into advantages of +-1",
            fix,
        )


def _no_gold_check(train: list[_Reward], evals: list[_Reward]) -> Iterator[LintWarning]:
    trained = {r.identity() for r in train}
    if any(r.identity() not in trained for r in evals):
        return
    yield LintWarning(
        "RZ004",
        tuple(r.spec.name for r in evals),
        "every evaluation reward is a training reward (eval_rewards absent or repeating them): a "
        "policy that games the training rewards looks like one that improves, since nothing "
        "measured outside the optimised signal can fall",
        "add to eval_rewards at least one reward the policy is not trained on that measures the "
        "same aim (a gold check, as GRPO-Guard compares proxy and gold): e.g. hpsv2 or "
        "image_reward when training on pickscore, another ASR checkpoint when training on asr_wer",
    )


def _still_video(dataset: str | None, rewards: list[_Reward]) -> Iterator[LintWarning]:
    still = [r for r in rewards if r.fact("prefers_still_video")]
    if not still or any(r.names() & set(STILL_VIDEO_COUNTERS) for r in rewards):
        return
    yield LintWarning(
        "RZ005",
        tuple(r.spec.name for r in still),
        "a still video scores best on these rewards (their cards' prefers_still_video), so "
        "training on them without a motion or diversity term rewards videos that do not move",
        "add video_dynamic_degree (VBench's counterpart of its temporal-quality dimensions) or a "
        "diversity term (group_diversity, or diversity_weighted over a reward) for the same samples",
        dataset,
    )


def _prompt_blind_pair(rewards: list[_Reward]) -> Iterator[LintWarning]:
    from ..catalog.options import catalog

    for r in rewards:
        if r.info is None or not r.info.prompt_blind_when:
            continue
        blind = r.info.prompt_blind_when
        defaults = catalog().get(r.info.name, {}).get("schema", {}).get("properties", {})
        setting = {k: r.spec.kwargs.get(k, defaults.get(k, {}).get("default")) for k in blind}
        if not all(setting[k] in values for k, values in blind.items()):
            continue
        how = ", ".join(f"{k}: {v}" for k, v in setting.items())
        yield LintWarning(
            "RZ006",
            (r.spec.name,),
            f"'{r.info.name}' with {how} compares two streams the policy generates and never reads the prompt: "
            "training on it can raise it by moving both off-distribution together (UniRL #411 / #418: the total "
            "tripled while the video became saturated noise; verl-omni #563)",
            "train on a prompt-anchored setting (imagebind_score: mode all or text_video) beside a visual-quality and "
            "a diversity term, and keep this setting in eval_rewards as a sync metric; watch RewardMonitor's "
            "collapse alarm",
        )


def lint_config(config: ConfigSource, *, dominance: float = DOMINANCE, ignore: Sequence[str] = ()) -> list[LintWarning]:
    """The warnings for ``config`` (a YAML path, a shipped config or reward name, a mapping or a
    :class:`~rewardzoo.spec.config.RewardConfig`), in the order of :data:`CODES`, without those in ``ignore``
    (codes or names). ``dominance``: the share of the weighted spread above which RZ002 warns, in (0, 1].
    A config that does not parse is a :class:`~rewardzoo.errors.ConfigError`, as everywhere."""
    if not 0.0 < dominance <= 1.0:
        raise ConfigError(f"dominance must be in (0, 1], got {dominance!r}", field="dominance")
    unknown = [c for c in ignore if c not in CODES and c not in CODES.values()]
    if unknown:
        raise ConfigError(
            f"unknown lint code(s) {unknown}; known: {', '.join(f'{c} {n}' for c, n in CODES.items())}", field="ignore"
        )
    cfg: RewardConfig = resolve_config(config)
    train = [_reward(s) for s in cfg.rewards]
    evals = [_reward(s) for s in cfg.eval_rewards]
    scopes = list(_scopes(train))
    found: list[LintWarning] = []
    for dataset, rewards in scopes:
        found += _no_prompt_reward(dataset, rewards)
        if cfg.advantage == "sum":
            found += _dominant_weight(dataset, rewards, dominance)
    found += _group_over_constant(train, cfg.advantage)
    found += _no_gold_check(train, evals)
    for dataset, rewards in scopes:
        found += _still_video(dataset, rewards)
    found += _prompt_blind_pair(train)
    skip = set(ignore)
    return sorted((w for w in found if w.code not in skip and w.name not in skip), key=lambda w: w.code)
