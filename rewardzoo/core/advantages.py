"""Group-relative advantages from a batch's scores: the two multi-reward aggregations GRPO trainers use.

- ``sum`` — normalise the weighted total within each group: ``A_i = (T_i - mean_g T) / (std_g T + 1e-4)``
  (population std), exactly flow_grpo's ``PerPromptStatTracker.update`` (``global_std=False``,
  ``type='grpo'``) on one batch; DanceGRPO does the same.
- ``gdpo`` — normalise each reward within each group first, then take the weighted sum, then normalise
  that over the batch: ``n_k,i = (r_k,i - mean_g r_k) / max(std_g r_k, 1e-6)``,
  ``c_i = sum_k w_k,i n_k,i``, ``A_i = (c_i - mean c) / max(std c, 1e-6)`` — exactly Flow-Factory's
  ``AdvantageProcessor.compute_gdpo`` (population std, the same 1e-6 floors).
- ``pref_grpo`` — ``gdpo`` as Pref-GRPO's training scripts run it (``compute_weighted_advantages`` with
  ``--use_group --apply_gdpo``, ``fastvideo/rewards/dispatcher.py`` 616-702, commit 3e787f6): each reward (each
  stream) normalised within its group by the unbiased std, ``(r - mean_g) / (std_g + 1e-8)``, weighted and summed,
  then the sum renormalised over the gathered batch, ``(c - mean c) / (std c + 1e-8)``, unbiased std over every
  rank's samples (:func:`gather_ranks`).

Abstentions (a reward that does not apply to a sample): the sample's total leaves it out already; in
``gdpo`` a reward's group statistics use only the members it applies to, it contributes 0 to the
others, and a group where it applies to no member gets 0 from it — never NaN. A sample no reward
applies to gets advantage 0 and is left out of every statistic.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputError
from ..shared.groups import group_members

SUM_EPS = 1e-4  # flow_grpo's PerPromptStatTracker
GDPO_STD_FLOOR = 1e-6  # Flow-Factory's compute_gdpo and _global_mean_std
UNBIASED_EPS = 1e-8  # Pref-GRPO's compute_weighted_advantages (`group_rewards.std() + 1e-8`, torch's unbiased std)


def group_index(keys: Sequence[Any]) -> np.ndarray:
    """Contiguous group numbers for per-sample keys (``1`` and ``"1"`` are different groups)."""
    out = np.empty(len(keys), dtype=np.int64)
    for number, members in enumerate(group_members(enumerate(keys), _no_group).values()):
        out[members] = number
    return out


def _no_group(i: int) -> InputError:
    return InputError(
        "advantages need a group for every sample: give group_id on the samples or group_by=[...] (e.g. the prompts)",
        field="group_id",
        sample=i,
    )


def sum_then_normalize(total: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``sum`` mode (see the module docstring); ``total`` NaN where no reward applied."""
    scored = ~np.isnan(total)
    advantages = np.zeros(len(total))
    for g in np.unique(groups[scored]):
        members = (groups == g) & scored
        values = total[members]
        advantages[members] = (values - values.mean()) / (values.std() + SUM_EPS)
    return advantages


def group_normalize(values: np.ndarray, groups: np.ndarray, how: str = "group") -> np.ndarray:
    """``values`` normalised within each group over the members where they are not NaN (0 elsewhere):
    ``group`` (GDPO): ``(v - mean_g) / max(std_g, 1e-6)``, population std; ``group_unbiased`` (Pref-GRPO):
    ``(v - mean_g) / (std_g + 1e-8)``, unbiased std (a group of one has none: its member gets 0)."""
    present = ~np.isnan(values)
    out = np.zeros(len(values))
    for g in np.unique(groups[present]):
        members = (groups == g) & present
        group_values = values[members]
        if how == "group":
            scale = max(group_values.std(), GDPO_STD_FLOOR)
        elif len(group_values) > 1:
            scale = group_values.std(ddof=1) + UNBIASED_EPS
        else:
            continue
        out[members] = (group_values - group_values.mean()) / scale
    return out


def normalize_then_sum(
    rewards: Mapping[str, np.ndarray],
    weights: Mapping[str, np.ndarray],
    groups: np.ndarray,
    mode: str = "gdpo",
    gather: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """``gdpo`` or ``pref_grpo`` mode; ``rewards[k]`` NaN where reward k does not apply, ``weights[k]`` per
    sample. ``gather`` (``pref_grpo``) maps this rank's summed values to every rank's (default
    :func:`gather_ranks`)."""
    unbiased = mode == "pref_grpo"
    n = len(groups)
    combined = np.zeros(n)
    scored = np.zeros(n, dtype=bool)
    for name, values in rewards.items():
        applied = ~np.isnan(values)
        scored |= applied
        normalised = group_normalize(values, groups, "group_unbiased" if unbiased else "group")
        combined += np.where(applied, weights[name] * normalised, 0.0)
    advantages = np.zeros(n)
    values = combined[scored]
    if not unbiased:
        if scored.any():
            advantages[scored] = (values - values.mean()) / max(values.std(), GDPO_STD_FLOOR)
        return advantages
    batch = (gather or gather_ranks)(values)
    if len(batch) > 1:
        advantages[scored] = (values - batch.mean()) / (batch.std(ddof=1) + UNBIASED_EPS)
    return advantages


def gather_ranks(values: np.ndarray) -> np.ndarray:
    """``values`` of every rank, concatenated in rank order, when torch.distributed runs with several ranks
    (every rank must call it, as Pref-GRPO's ``gather_tensor``); else ``values``."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return values
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, np.asarray(values, dtype=np.float64))
    return np.concatenate(parts)
