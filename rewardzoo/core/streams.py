"""Named streams: several weighted outputs of one multi-output reward call in the total and the advantages.

A reward that reports several values per sample in one call (``unified_reward_2``'s alignment / coherence /
style, ``videoalign``'s VQ / MQ / TA, ``audiobox_aesthetics``' four axes, ...) declares their names
(``Reward.streams``, each also the key of a per-sample extra). An entry's ``streams:`` (or its reward's preset,
``Reward.default_streams``) makes its contribution to the total

    ``w_e * sum_d w_d v_d``, ``v_d`` the stream's raw value, or its value normalised within the sample's group
    (``normalize: group`` / ``group_unbiased``, :func:`rewardzoo.core.advantages.group_normalize`)

instead of ``w_e * score``, without a second model call. A NaN stream value (the judge gave none) abstains: it
is left out of its group's statistics and adds nothing.

In the advantages (:meth:`~rewardzoo.core.engine.RewardResult.advantages`): ``sum`` normalises, within each
group, the part of the total that is not normalised yet (scores and ``normalize: none`` streams) and adds the
normalised streams as they are, so a config whose streams are all normalised gets
``A = sum_d w_d (v_d - mean_d) / std_d`` (Pref-GRPO's ``compute_weighted_advantages``); ``gdpo`` treats every
stream as a reward of its own (``entry.stream``, weight ``w_e * w_d``), normalised by GDPO itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError, did_you_mean
from ..spec.config import RewardSpec, StreamSpec, parse_streams
from .advantages import group_index, group_normalize

__all__ = ["combine", "resolve_streams", "stream_groups"]


def resolve_streams(spec: RewardSpec, reward: Any) -> RewardSpec:
    """``spec`` with its streams checked against the names ``reward`` declares, or, where the entry names none,
    those of the reward's preset (``reward.default_streams``); a ConfigError names the entry and the unknown
    stream and lists the valid names."""
    names = tuple(getattr(reward, "streams", ()) or ())
    streams = spec.streams
    if streams is None:
        preset = getattr(reward, "default_streams", None)
        if not preset:
            return spec
        streams = parse_streams(preset, spec.name)
        assert streams is not None  # a non-empty preset
    if not names:
        raise ConfigError(
            f"'{spec.reward_model}' reports one score, no named streams: drop 'streams'",
            entry=spec.name,
            field="streams",
        )
    for stream in streams:
        if stream not in names:
            raise ConfigError(
                f"unknown stream '{stream}'{did_you_mean(stream, names)}; the streams of "
                f"'{spec.reward_model}' are {', '.join(names)}",
                entry=spec.name,
                field=f"streams.{stream}",
            )
    return replace(spec, streams=dict(streams))


def stream_groups(keys: Sequence[Any], needed: np.ndarray, entry: str) -> np.ndarray:
    """Group numbers of the samples (``group_id`` keys) for a normalised stream of ``entry``; every sample in
    ``needed`` must have one (InputError naming the entry, ``group_id`` and the sample)."""
    for i in np.flatnonzero(needed).tolist():
        if keys[i] is None:
            raise InputError(
                "a stream normalised within its group needs a group_id on every sample the entry applies to",
                reward=entry,
                field="group_id",
                sample=i,
            )
    return group_index([k if k is not None else ("rewardzoo: no group", i) for i, k in enumerate(keys)])


def combine(
    rewards: Mapping[str, np.ndarray],
    weights: Mapping[str, np.ndarray],
    streams: Mapping[str, Mapping[str, np.ndarray]],
    stream_weights: Mapping[str, Mapping[str, np.ndarray]],
    settings: Mapping[str, Mapping[str, StreamSpec]],
    keys: Sequence[Any],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(raw, normalised, scored)``: the weighted sum of the scores and ``normalize: none`` streams (NaN where
    a sample has none of them), of the normalised streams (0 where none), and where either has a value.
    ``rewards`` / ``weights``: per entry, NaN where not applied / the sample's weight (0 there); ``streams`` /
    ``stream_weights``: per entry with streams, per stream; ``keys``: the samples' group keys."""
    n = len(keys)
    raw, raw_any = np.zeros(n), np.zeros(n, dtype=bool)
    normalised, norm_any = np.zeros(n), np.zeros(n, dtype=bool)
    for name, values in rewards.items():
        if name in settings:
            continue
        present = ~np.isnan(values)
        raw[present] += (weights[name] * values)[present]
        raw_any |= present
    for name, per_stream in settings.items():
        groups = None
        for stream, setting in per_stream.items():
            values = np.asarray(streams[name][stream], dtype=np.float64)
            weight = np.asarray(stream_weights[name][stream], dtype=np.float64)
            present = ~np.isnan(values)
            if setting.normalize == "none":
                raw[present] += (weight * values)[present]
                raw_any |= present
                continue
            if groups is None:
                groups = stream_groups(keys, present, name)
            normalised[present] += (weight * group_normalize(values, groups, setting.normalize))[present]
            norm_any |= present
    raw[~raw_any] = np.nan
    return raw, normalised, raw_any | norm_any
