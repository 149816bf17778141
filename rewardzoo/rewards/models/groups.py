"""The groups of a groupwise call, and win rates from a pairwise judge over them.

What the groupwise rewards of several families share: the group positions of a call (:func:`group_positions`) and
Pref-GRPO's pairwise win rate, ``score_i = wins_i / (n - 1)`` over every pair of a group (:class:`PairwiseJudged`).
The group family's ``group_win_rate`` runs it with a user judge (or, over a base reward, on Bradley-Terry
probabilities: :func:`win_counts`); the VLM judges ``unified_reward_think`` and ``unified_reward_edit_pairwise`` run
it with their own model as the judge.

A pair (i, j) has ``p = P(i beats j)``. ``mode: hard`` (Pref-GRPO's discrete wins): i gets 1 when p > 0.5, 0 when
p < 0.5 and 0.5 on a tie; ``mode: soft``: i gets p and j gets 1 - p (expected wins). A group of one scores 0.5.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from ...errors import ConfigError, InputError, RewardOutputError
from ...shared.groups import group_members
from ...shared.resources import Resources
from ..base import KNOWN_FIELDS, GroupwiseReward, Inputs, RewardOutput

_UNJUDGED = object()  # a pair no batched judge has answered yet

#: The ways wins are counted (module docstring).
MODES = ("hard", "soft")


def group_positions(group_id: Sequence[Any] | None, n: int) -> list[np.ndarray]:
    """Positions of each group in a call, in order of first appearance (``1`` and ``"1"`` differ)."""
    if group_id is None:
        raise InputError("groupwise reward needs a group_id on every sample", field="group_id", sample=0 if n else None)
    groups = group_members(enumerate(group_id), _no_group)
    return [np.asarray(idx, dtype=np.intp) for idx in groups.values()]


def _no_group(i: int) -> InputError:
    return InputError("groupwise reward needs a group_id on every sample", field="group_id", sample=i)


def win_counts(prob: np.ndarray, mode: str) -> np.ndarray:
    """Each sample's wins: the row sums of the win matrix without the diagonal (``prob[i, j] = P(i beats j)``,
    diagonal 0.5); in ``hard`` mode each probability is first made a win, a loss or a tie."""
    if mode == "hard":
        prob = np.where(prob > 0.5, 1.0, np.where(prob < 0.5, 0.0, 0.5))
    return prob.sum(axis=1) - 0.5


class PairwiseJudged(GroupwiseReward):
    """A groupwise reward whose ``judge`` compares two samples: every pair of each group is judged and
    ``score_i = wins_i / (n - 1)``.

    The judge is called once per unordered pair as ``judge(first, second) -> P(first beats second)``, each a dict
    of the sample's declared fields (converted; ``audio`` brings ``audio_sample_rate``), and must return a number in
    [0, 1] (bools count as 0/1). A judge with a ``judge_pairs(pairs)`` method is called once per group instead,
    with the list of ``(first, second)`` pairs, and returns one such number per pair, or ``(numbers, extras)``
    with per-pair numeric extras (e.g. ``substituted``), each reported per sample as the sum over its pairs.
    A subclass builds its judge and hands it to :meth:`use_judge`. Extras: ``wins`` and the judge's.
    """

    mode: str = "hard"
    judge: Callable[..., Any] | None = None
    judge_name: str = ""
    judge_fields: tuple[str, ...] = ()
    MODES: ClassVar[tuple[str, ...]] = MODES

    def use_judge(
        self, judge: Callable[..., Any], name: str, fields: Sequence[str] | None = None, tensors: bool | None = None
    ) -> None:
        """Judge pairs with ``judge`` (called ``name`` in errors). It receives ``fields`` (else its
        ``required_fields`` attribute), as tensors when ``tensors`` (else its ``use_tensor_inputs`` attribute), with
        its ``num_frames`` / ``sample_rate`` / ``mono`` settings; it is thread-safe or io-bound only when it says so."""
        self.judge, self.judge_name = judge, name
        if isinstance(getattr(judge, "resources", None), Resources):  # a judge that declares the models it runs
            self.hold(judge)
        declared = fields if fields is not None else getattr(judge, "required_fields", None)
        if isinstance(declared, str) or not declared or not all(isinstance(f, str) for f in declared):
            raise ConfigError(
                f"{type(self).__name__}: say which fields the judge receives: kwargs 'fields' (e.g. "
                "[prompt, image]) or a 'required_fields' attribute on the judge",
                field="kwargs.fields",
            )
        unknown = [f for f in declared if f not in KNOWN_FIELDS]
        if unknown:
            raise ConfigError(
                f"{self.name}: unknown judge field(s) {unknown}; known: {', '.join(KNOWN_FIELDS)}",
                field="kwargs.fields",
            )
        # the judge's media forms: tensors when asked for (kwargs, else the judge's own attribute)
        as_tensors = bool(getattr(judge, "use_tensor_inputs", False) if tensors is None else tensors)
        settings = {k: getattr(judge, k) for k in ("num_frames", "sample_rate", "mono") if hasattr(judge, k)}
        fields_with_group = tuple(dict.fromkeys((*declared, "group_id")))
        self.inputs = (Inputs.tensors if as_tensors else Inputs)(fields_with_group, **settings)
        # a judge that does not say otherwise may hold a model or a client: not assumed thread-safe
        self.thread_safe = bool(getattr(judge, "thread_safe", False))
        self.io_bound = bool(getattr(judge, "io_bound", False))  # an endpoint judge waits on its server
        self.judge_fields = tuple(declared)

    def __call__(self, **fields: Sequence[Any]) -> RewardOutput:
        return self.judge_groups(fields)

    def judge_groups(self, fields: dict[str, Sequence[Any]]) -> RewardOutput:
        """Every pair of each group of the call judged; the win rates, ``wins`` and the judge's extras."""
        group_id = fields.get("group_id")
        n = len(group_id) if group_id is not None else len(next(iter(fields.values()), ()))
        groups = group_positions(group_id, n)
        wanted = set(self.judge_fields) | ({"audio_sample_rate"} if "audio" in self.judge_fields else set())
        keys = [k for k in fields if k in wanted]
        samples = [{k: fields[k][i] for k in keys} for i in range(n)]
        out = np.empty(n, dtype=np.float64)
        wins_all = np.empty(n, dtype=np.float64)
        pair_extras: dict[str, np.ndarray] = {}
        batched = getattr(self.judge, "judge_pairs", None)
        for idx in groups:
            m = len(idx)
            prob = np.full((m, m), 0.5)
            pairs = [(a, b) for a in range(m) for b in range(a + 1, m)]
            if batched is not None and pairs:
                try:
                    values, extras = self._judge_pairs(batched, [(samples[idx[a]], samples[idx[b]]) for a, b in pairs])
                except RewardOutputError as exc:  # the judge names pairs: name both samples of each
                    if not exc.inputs:
                        raise
                    both = sorted({int(idx[i]) for p in exc.inputs for i in pairs[p]})
                    raise RewardOutputError(
                        f"{exc.message} (pairs of samples "
                        f"{', '.join(f'{idx[pairs[p][0]]}-{idx[pairs[p][1]]}' for p in exc.inputs[:8])})",
                        reward=exc.reward or self.name,
                        inputs=both,
                    ) from exc
                for key, per_pair in extras.items():  # a pair's extra counts for both of its samples
                    total = pair_extras.setdefault(key, np.zeros(n, dtype=np.float64))
                    for (a, b), v in zip(pairs, per_pair):
                        total[idx[a]] += v
                        total[idx[b]] += v
            else:
                values = [_UNJUDGED] * len(pairs)
            for (a, b), value in zip(pairs, values):
                p = self._judge_pair(samples[idx[a]], samples[idx[b]], int(idx[a]), int(idx[b]), value)
                prob[a, b], prob[b, a] = p, 1.0 - p
            wins = win_counts(prob, self.mode)
            wins_all[idx] = wins
            out[idx] = 0.5 if m == 1 else wins / (m - 1)
        return RewardOutput(out, extras={"wins": wins_all, **pair_extras})

    def _judge_pairs(self, batched: Callable, pairs: list[tuple[dict, dict]]) -> tuple[list, dict]:
        """A batched judge's answers for the pairs of one group: ``judge_pairs(pairs)`` returns one value per
        pair, or ``(values, extras)`` with per-pair numeric extras (summed onto both samples of each pair)."""
        result = batched(pairs)
        values, extras = result if isinstance(result, tuple) else (result, {})
        values = list(values)
        bad = [k for k, v in extras.items() if len(v) != len(pairs)]
        if len(values) != len(pairs) or bad:
            raise RewardOutputError(
                f"pairwise judge '{self.judge_name}'.judge_pairs returned {len(values)} values "
                f"for {len(pairs)} pairs" + (f" (extras {bad} of another length)" if bad else ""),
                reward=self.name,
            )
        return values, dict(extras)

    def _judge_pair(self, first: dict, second: dict, i: int, j: int, value: Any = _UNJUDGED) -> float:
        """P(first beats second): the judge's answer (``value`` when a batched judge gave it), checked."""
        if value is _UNJUDGED:
            if self.judge is None:  # (pairs are judged only by a reward given a judge)
                raise ConfigError(f"{self.name} has no pairwise judge", field="kwargs.judge")
            value = self.judge(first, second)
        if hasattr(value, "detach"):  # a 0-d/1-element tensor
            value = value.detach().cpu().reshape(-1).tolist()
            value = value[0] if len(value) == 1 else value
        if isinstance(value, (bool, np.bool_)):
            return float(value)
        try:
            p = None if isinstance(value, (str, bytes)) else float(value)
        except (TypeError, ValueError):
            p = None
        if p is None or not (0.0 <= p <= 1.0):  # also catches NaN
            raise RewardOutputError(
                f"pairwise judge '{self.judge_name}' returned {value!r} for the pair (inputs {i}, "
                f"{j}); it must return P(first beats second), a number in [0, 1]",
                reward=self.name,
            )
        return p
