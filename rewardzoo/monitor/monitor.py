"""RewardMonitor: each step's scores -> a flat dict of metrics and named alarms, optionally a JSONL log.

Per update (one :class:`~rewardzoo.core.engine.RewardResult` of a split, ``train`` or ``eval``, at a step), with
the statistics' definitions of :mod:`rewardzoo.shared.score_stats` (the report's):

- ``{split}/{reward}/n|mean|std|min|p5|p25|median|p75|p95|max`` over the samples the reward scored, and the
  same for ``{split}/total``;
- ``{split}/{reward}/saturation``: the share of scores within ``margin`` x (high - low) of a bound of the
  reward's card ``score_range`` (only for a range with two finite bounds, and not for groupwise rewards, whose
  group-relative scores reach their bounds by construction);
- ``{split}/{reward}/group_std`` (mean within-group population std) and ``{split}/{reward}/inseparable``
  (share of groups with at least two scored members whose scores span at most
  :data:`~rewardzoo.shared.score_stats.INSEPARABLE_REL` x the step's std; :func:`~rewardzoo.shared.score_stats.group_spread`), when the samples carry ``group_id``;
- ``{split}/{reward}/abstained``: the samples an optional reward abstained for at this step (its calls missed
  their ``timeout_s``; :attr:`~rewardzoo.core.engine.RewardResult.abstentions`), for a reward that abstained at
  least once; :attr:`RewardMonitor.abstentions` keeps the running count per ``{split}/{reward}``;
- ``{split}/corr/{a}/{b}``: Pearson's r of two rewards over the samples both scored (3 or more, neither
  constant);
- for each eval reward ``e``, once the window holds 3 train steps and 3 eval steps of ``e``:
  ``trend/train_total`` and ``trend/eval/{e}``: the least-squares slope of the per-step mean over the steps
  in ``(step - window, step]``, times ``window``, divided by the mean per-step std in that window — how many
  per-sample standard deviations the mean moved over the window, oriented so that up is better (a
  lower-is-better reward is negated) — and ``divergence/{e} = min(trend/train_total, -trend/eval/{e})``:
  positive only while the train total rises *and* ``e`` falls (GRPO-Guard's proxy vs gold);
- when the trainer passes the scored ``samples`` with a train update: ``train/{video,audio}_diversity``, the mean
  within-group diversity of that medium (:mod:`rewardzoo.monitor.collapse`), and for each train reward whose card
  has ``prompt_blind_when`` (ImageBind's audio-video pair), once the window holds 3 steps of both,
  ``collapse/{reward}/{medium} = min(trend of the reward, -relative trend of the medium's diversity)`` (the
  diversity's fitted change over the window divided by its mean level there): positive only while the reward rises
  *and* the diversity falls, the pattern in which audio and video collapse together.

Alarms, each raised when its condition starts to hold (an event, not a level; it is raised again only
after the condition has not held for more than ``window`` steps, so a noisy value near its threshold does not
flap): ``saturation/{split}/{reward}`` (saturation > ``saturation``),
``inseparable/{split}/{reward}`` (inseparable share > ``inseparable``), ``conflict/{split}/{a}/{b}``
(r < ``conflict``), ``divergence/{e}`` and ``collapse/{reward}/{medium}`` (above ``divergence``). A raised alarm appears in the dict as
``alarm/{name}`` with the value that crossed its threshold, and in the log line's ``alarms`` list.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError
from ..shared.score_stats import QUANTILE_LABELS, group_spread, summarize
from ..spec.monitor import MonitorSettings, parse_monitor

SPLITS = ("train", "eval")
#: Fewest steps (per series) a trend is fitted on.
MIN_TREND_STEPS = 3
#: Group ids kept per reward and step in the log (the rest are counted).
MAX_LOGGED_GROUPS = 256


@dataclass(frozen=True)
class RewardFacts:
    """What the monitor needs to know of a stream: its direction, declared score range and kind."""

    higher_is_better: bool = True
    score_range: tuple[float, float] = (-math.inf, math.inf)
    kind: str = "pointwise"
    watch_collapse: bool = False


@dataclass(frozen=True)
class Alarm:
    """A named event: which alarm, at which step, the value that crossed the threshold and a sentence."""

    name: str
    step: int
    value: float
    threshold: float
    message: str

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "threshold": self.threshold, "message": self.message}


class RewardMonitor:
    """Training-time watch over reward scores; see the module docstring for every metric and alarm.

    ``config``: a reward config (anything :func:`rewardzoo.core.resolve.resolve_config` takes; its ``monitor:``
    section gives the thresholds and the log, its streams the facts — direction, score range — from the
    cards) or None. ``settings``: a ``monitor:`` mapping or :class:`MonitorSettings` that replaces the
    config's section. ``facts``: per stream name, a :class:`RewardFacts` (or a mapping of its fields) that
    overrides what the cards say. Thread-safe; one instance per run.
    """

    def __init__(
        self,
        config: Any = None,
        *,
        settings: Mapping[str, Any] | MonitorSettings | None = None,
        facts: Mapping[str, RewardFacts | Mapping[str, Any]] | None = None,
    ) -> None:
        cfg = None
        if config is not None:
            from ..core.resolve import resolve_config

            cfg = resolve_config(config)
        self.settings = (
            parse_monitor(settings)
            if settings is not None
            else (cfg.monitor if cfg is not None and cfg.monitor is not None else MonitorSettings())
        )
        self.facts: dict[str, RewardFacts] = _card_facts(cfg) if cfg is not None else {}
        for name, fact in (facts or {}).items():
            self.facts[name] = fact if isinstance(fact, RewardFacts) else RewardFacts(**dict(fact))
        self._lock = threading.Lock()
        window = self.settings.window
        # per series: deque of (step, mean, std) for the steps of the last window
        self._series: dict[tuple[str, str], deque] = {}
        self._window = window
        self._active: dict[str, int] = {}  # alarm -> the last step its condition held
        self.alarms: list[Alarm] = []
        #: ``{split}/{reward}`` -> samples the reward abstained for over the run (optional entries' missed deadlines)
        self.abstentions: dict[str, int] = {}
        self._log = None
        if self.settings.log is not None:
            path = os.fspath(self.settings.log)
            try:
                self._log = open(path, "a", encoding="utf-8")
            except OSError as exc:
                raise ConfigError(
                    f"cannot open the monitor log '{path}': {exc.strerror}", field="monitor.log"
                ) from None

    # -- public -----------------------------------------------------------------------------------
    def update(
        self, result: Any, step: int, *, split: str = "train", samples: Sequence[Any] | None = None
    ) -> dict[str, float]:
        """Metrics of ``result`` (a RewardResult, or anything with ``rewards``, ``total`` and ``group_ids``)
        scored at ``step`` for ``split``; alarms raised now are in the dict as ``alarm/NAME`` and in
        :attr:`alarms`. ``samples`` (optional, the samples scored, in order): their media's within-group diversity
        and the collapse alarm. Writes one log line when a log is configured."""
        if split not in SPLITS:
            raise ConfigError(f"split must be 'train' or 'eval', got {split!r}", field="split")
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise InputError(f"step must be an integer, got {type(step).__name__}", field="step")
        step = int(step)
        rewards, total, group_ids = _columns(result)
        codes, group_names = self._codes(group_ids, len(total))
        if samples is not None and len(samples) != total.size:
            raise InputError(f"{len(samples)} samples for {total.size} scores", field="samples")
        with self._lock:
            metrics: dict[str, float] = {}
            raised: list[Alarm] = []
            inseparable_groups: dict[str, list[str]] = {}
            columns = {**rewards, "total": total}
            for name, values in columns.items():
                self._reward_metrics(split, name, values, codes, group_names, step, metrics, raised, inseparable_groups)
            for name, count in _abstentions(result).items():
                key = f"{split}/{name}"
                self.abstentions[key] = self.abstentions.get(key, 0) + count
                if self.abstentions[key]:
                    metrics[f"{key}/abstained"] = float(count)
            self._correlations(split, rewards, step, metrics, raised)
            if split == "train":
                self._push(("train", "total"), step, total)
            else:
                for name, values in rewards.items():
                    self._push(("eval", name), step, self._oriented(name, values))
            self._divergences(step, metrics, raised)
            if samples is not None and split == "train" and codes is not None:
                self._collapse(step, rewards, samples, codes, metrics, raised)
            for alarm in raised:
                metrics[f"alarm/{alarm.name}"] = alarm.value
            self.alarms.extend(raised)
            if self._log is not None:
                line = {
                    "step": step,
                    "split": split,
                    "metrics": metrics,
                    "alarms": [a.record() for a in raised],
                    "inseparable_groups": inseparable_groups,
                }
                self._log.write(json.dumps(line, allow_nan=False, default=float) + "\n")
                self._log.flush()
            return metrics

    def close(self) -> None:
        """Close the log (further updates still return metrics, without logging)."""
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def __enter__(self) -> RewardMonitor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- metrics ----------------------------------------------------------------------------------
    def _codes(self, group_ids: list[Any], n: int) -> tuple[np.ndarray | None, list[str]]:
        """:func:`_group_codes`, reused while a trainer passes the same groups step after step."""
        cached = getattr(self, "_last_groups", None)
        if cached is not None and cached[0] == group_ids:
            return cached[1], cached[2]
        codes, names = _group_codes(group_ids, n)
        self._last_groups = (list(group_ids), codes, names)
        return codes, names

    def _oriented(self, name: str, values: np.ndarray) -> np.ndarray:
        return values if self.facts.get(name, RewardFacts()).higher_is_better else -values

    def _reward_metrics(
        self,
        split: str,
        name: str,
        values: np.ndarray,
        codes: np.ndarray | None,
        group_names: list[str],
        step: int,
        metrics: dict[str, float],
        raised: list[Alarm],
        inseparable_groups: dict[str, list[str]],
    ) -> None:
        prefix = f"{split}/{name}"
        summary = summarize(values)
        metrics[f"{prefix}/n"] = float(summary.n)
        if summary.mean is None or summary.std is None or summary.quantiles is None:  # n == 0
            return
        metrics[f"{prefix}/mean"] = summary.mean
        metrics[f"{prefix}/std"] = summary.std
        for label, q in zip(QUANTILE_LABELS, summary.quantiles):
            metrics[f"{prefix}/{label}"] = q
        scored = values[~np.isnan(values)]
        fact = self.facts.get(name, RewardFacts())
        lo, hi = fact.score_range if name != "total" else (-math.inf, math.inf)
        # a group-relative score (a rank, a win rate) reaches its bounds by construction
        if math.isfinite(lo) and math.isfinite(hi) and fact.kind != "groupwise":
            margin = self.settings.margin * (hi - lo)
            share = float(np.mean((scored <= lo + margin) | (scored >= hi - margin)))
            metrics[f"{prefix}/saturation"] = share
            self._check(
                f"saturation/{prefix}",
                share,
                self.settings.saturation,
                step,
                raised,
                f"{share:.0%} of {split} '{name}' scores lie within {self.settings.margin:.0%} of a bound of "
                f"its score range [{lo:g}, {hi:g}]: the reward is saturating",
            )
        if codes is None:
            return
        spread = group_spread(values, codes)
        if spread.stds.size == 0:
            return
        flat = spread.ranges <= spread.threshold
        metrics[f"{prefix}/group_std"] = float(np.mean(spread.stds))
        share = spread.inseparable / spread.stds.size  # spread.fraction_inseparable, of a non-empty spread
        metrics[f"{prefix}/inseparable"] = share
        if flat.any():
            inseparable_groups[name] = [group_names[c] for c in spread.codes[flat][:MAX_LOGGED_GROUPS]]
        self._check(
            f"inseparable/{prefix}",
            share,
            self.settings.inseparable,
            step,
            raised,
            f"{share:.0%} of the groups cannot be told apart by {split} '{name}' (their scores are equal): "
            "those groups give no group-relative signal",
        )

    def _correlations(
        self, split: str, rewards: Mapping[str, np.ndarray], step: int, metrics: dict[str, float], raised: list[Alarm]
    ) -> None:
        names = list(rewards)
        if len(names) < 2:
            return
        oriented = np.stack([self._oriented(n, rewards[n]) for n in names])
        scored = ~np.isnan(oriented)
        if scored.all():  # the usual case: every pair over all samples, in one product
            centred = oriented - oriented.mean(axis=1, keepdims=True)
            gram = centred @ centred.T
        for i, a in enumerate(names):
            for j in range(i + 1, len(names)):
                b = names[j]
                if scored.all():
                    if oriented.shape[1] < 3:
                        continue
                    num, denom = float(gram[i, j]), math.sqrt(float(gram[i, i]) * float(gram[j, j]))
                else:
                    both = scored[i] & scored[j]
                    if both.sum() < 3:
                        continue
                    x, y = oriented[i, both], oriented[j, both]
                    x, y = x - x.mean(), y - y.mean()
                    num, denom = float(np.dot(x, y)), math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y)))
                if denom == 0.0:
                    continue
                r = num / denom
                metrics[f"{split}/corr/{a}/{b}"] = r
                threshold = self.settings.conflict
                if threshold is not None:
                    self._check(
                        f"conflict/{split}/{a}/{b}",
                        -r,
                        -threshold,
                        step,
                        raised,
                        f"{split} rewards '{a}' and '{b}' disagree (Pearson r = {r:.2f}, both oriented so "
                        "that higher is better): raising one lowers the other",
                        shown=(r, threshold),
                    )

    def _push(self, key: tuple[str, str], step: int, values: np.ndarray) -> None:
        scored = values[~np.isnan(values)]
        if scored.size == 0:
            return
        series = self._series.setdefault(key, deque())
        if series and series[-1][0] == step:
            series.pop()  # a step scored twice: the last update counts
        series.append((step, float(np.mean(scored)), float(np.std(scored))))

    def _trend(self, key: tuple[str, str], step: int) -> float | None:
        series = self._series.get(key)
        if not series:
            return None
        while series and series[0][0] <= step - self._window:
            series.popleft()
        points = [p for p in series if p[0] <= step]
        if len(points) < MIN_TREND_STEPS:
            return None
        t = np.array([p[0] for p in points], dtype=np.float64)
        m = np.array([p[1] for p in points])
        scale = float(np.mean([p[2] for p in points]))
        if scale == 0.0 or np.ptp(t) == 0:
            return None
        tc = t - t.mean()
        slope = float(np.dot(tc, m - m.mean()) / np.dot(tc, tc))
        return slope * self._window / scale

    def _divergences(self, step: int, metrics: dict[str, float], raised: list[Alarm]) -> None:
        train = self._trend(("train", "total"), step)
        if train is not None:
            metrics["trend/train_total"] = train
        for split, name in list(self._series):
            if split != "eval":
                continue
            gold = self._trend(("eval", name), step)
            if gold is None:
                continue
            metrics[f"trend/eval/{name}"] = gold
            if train is None:
                continue
            divergence = min(train, -gold)
            metrics[f"divergence/{name}"] = divergence
            self._check(
                f"divergence/{name}",
                divergence,
                self.settings.divergence,
                step,
                raised,
                f"over the last {self._window} steps the train total rose by {train:.2f} std while eval "
                f"reward '{name}' fell by {-gold:.2f} std: the policy may be hacking the training rewards",
            )

    def _collapse(
        self,
        step: int,
        rewards: Mapping[str, np.ndarray],
        samples: Sequence[Any],
        codes: np.ndarray,
        metrics: dict[str, float],
        raised: list[Alarm],
    ) -> None:
        from .collapse import MODALITIES, group_diversities

        for medium in MODALITIES:
            spread = group_diversities(samples, codes, medium)
            if spread.size:
                level = float(spread.mean())
                metrics[f"train/{medium}_diversity"] = level
                series = self._series.setdefault(("train", f"diversity/{medium}"), deque())
                if series and series[-1][0] == step:
                    series.pop()
                series.append((step, level, level))  # its trend: the change relative to its level
        for name, values in rewards.items():
            if not self.facts.get(name, RewardFacts()).watch_collapse:
                continue
            self._push(("train", name), step, self._oriented(name, values))
            rising = self._trend(("train", name), step)
            for medium in MODALITIES:
                falling = self._trend(("train", f"diversity/{medium}"), step)
                if rising is None or falling is None:
                    continue
                value = min(rising, -falling)
                metrics[f"collapse/{name}/{medium}"] = value
                self._check(
                    f"collapse/{name}/{medium}",
                    value,
                    self.settings.divergence,
                    step,
                    raised,
                    f"over the last {self._window} steps train reward '{name}' rose by {rising:.2f} std while the "
                    f"within-group diversity of the {medium} fell by {-falling:.0%} of its level: audio and video may be "
                    "collapsing together (a prompt-blind pair reward; see its card)",
                )

    def _check(
        self,
        name: str,
        value: float,
        threshold: float | None,
        step: int,
        raised: list[Alarm],
        message: str,
        *,
        shown: tuple[float, float] | None = None,
    ) -> None:
        """Raise ``name`` when ``value > threshold`` holds and has not held within the last ``window`` steps."""
        if threshold is None or not value > threshold:
            return
        last = self._active.get(name)
        self._active[name] = step
        if last is None or step - last > self._window:
            value_shown, threshold_shown = shown if shown is not None else (value, threshold)
            raised.append(Alarm(name, step, value_shown, threshold_shown, message))


def _card_facts(cfg: Any) -> dict[str, RewardFacts]:
    from ..registry import lookup

    facts: dict[str, RewardFacts] = {}
    for spec in (*cfg.rewards, *cfg.eval_rewards):
        found = lookup(spec.reward_model)
        if found is not None:
            facts.setdefault(
                spec.name,
                RewardFacts(
                    bool(found.higher_is_better), found.score_range, found.kind, found.prompt_blind_when is not None
                ),
            )
    return facts


def _abstentions(result: Any) -> dict[str, int]:
    """Per reward, the samples it abstained for in ``result`` (a RewardResult's ``abstentions``; {} otherwise)."""
    counts = getattr(result, "abstentions", None)
    return {str(k): int(v) for k, v in counts.items()} if isinstance(counts, Mapping) else {}


def _columns(result: Any) -> tuple[dict[str, np.ndarray], np.ndarray, list[Any]]:
    try:
        rewards = {str(k): np.asarray(v, dtype=np.float64).reshape(-1) for k, v in result.rewards.items()}
        total = np.asarray(result.total, dtype=np.float64).reshape(-1)
    except (AttributeError, TypeError, ValueError) as exc:
        raise InputError(
            f"the monitor takes a RewardResult (rewards, total, group_ids): {exc}", field="result"
        ) from None
    for name, values in rewards.items():
        if values.shape != total.shape:
            raise InputError(
                f"reward '{name}' has {values.size} scores for {total.size} samples", field=f"rewards.{name}"
            )
        bad = np.flatnonzero(np.isinf(values))
        if bad.size:
            raise InputError(f"reward '{name}' has an infinite score", field=f"rewards.{name}", sample=int(bad[0]))
    group_ids = list(getattr(result, "group_ids", None) or [])
    if group_ids and len(group_ids) != total.size:
        raise InputError(f"{len(group_ids)} group ids for {total.size} samples", field="group_ids")
    return rewards, total, group_ids


def _group_codes(group_ids: Sequence[Any], n: int) -> tuple[np.ndarray | None, list[str]]:
    """An integer per sample (-1: no group), None when no sample has a group; and each code's name
    (``1`` and ``"1"`` are different groups)."""
    if not group_ids or all(g is None for g in group_ids):
        return None, []
    seen: dict[tuple[type, Any], int] = {}
    codes = np.fromiter(
        (seen.setdefault(key, len(seen)) for key in zip(map(type, group_ids), group_ids)), dtype=np.int64, count=n
    )
    names = [str(gid) for _, gid in seen]
    none = seen.get((type(None), None))
    if none is not None:
        codes[codes == none] = -1
    return codes, names
