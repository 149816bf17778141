"""Convenience entry points that tie config, loader and processor together."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from ..rewards.base import Reward
from ..spec.config import RewardConfig
from .loader import RewardLoader
from .processor import RewardProcessor
from .resolve import resolve_config


def build_processors(
    config: RewardConfig | str | os.PathLike[str] | Mapping[str, Any],
    loader: RewardLoader | None = None,
    *,
    distributed: bool = False,
    group: Any = None,
    rank_ordered_loading: bool = False,
) -> tuple[RewardProcessor, RewardProcessor]:
    """(train, eval) processors over one loader: a model used by both is constructed once.

    ``distributed=True`` gives :class:`~rewardzoo.core.distributed.DistributedRewardProcessor` instances
    (groupwise rewards see groups spread over ranks; ``group`` is the torch.distributed process group).
    ``rank_ordered_loading=True`` constructs the models on rank 0 first, then on the other ranks.
    """
    config = resolve_config(config)
    loader = loader or RewardLoader()
    ordered: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if distributed or rank_ordered_loading:
        from .distributed import DistributedRewardProcessor, rank_ordered

        if rank_ordered_loading:
            ordered = rank_ordered(group)
    with ordered:
        mode = config.advantage
        if distributed:
            return (
                DistributedRewardProcessor(config.rewards, loader, group=group, advantage=mode, decode=config.decode),
                DistributedRewardProcessor(
                    config.eval_rewards, loader, group=group, advantage=mode, decode=config.decode
                ),
            )
        return (
            RewardProcessor(config.rewards, loader, advantage=mode, decode=config.decode),
            RewardProcessor(config.eval_rewards, loader, advantage=mode, decode=config.decode),
        )


def load_reward(entry: str | Mapping[str, Any], loader: RewardLoader | None = None, **kwargs: Any) -> Reward:
    """Build one reward outside a processor, as a config entry would: ``load_reward("clip_score",
    prefix="")`` or ``load_reward({"name": "clip_score", "model_path": "ViT-L-14"})``.

    ``kwargs`` are the reward's own options (the entry's ``kwargs:``). Composites (group wrappers,
    frame averages) get their inner rewards built the same way; pass a ``loader`` to share instances
    with other rewards. The reward's ``device`` defaults to ``auto``, as in a config.
    """
    raw: dict[str, Any] = {"name": entry} if isinstance(entry, str) else dict(entry)
    if kwargs:
        raw["kwargs"] = {**dict(raw.get("kwargs") or {}), **kwargs}
    return (loader or RewardLoader()).load(raw)
