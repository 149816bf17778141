"""Convenience entry points that tie config, loader and processor together."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Mapping

from .config import RewardConfig, load_config
from .loader import RewardLoader
from .processor import RewardProcessor


def build_processors(config: RewardConfig | str | os.PathLike | Mapping[str, Any],
                     loader: RewardLoader | None = None, *, distributed: bool = False, group: Any = None,
                     rank_ordered_loading: bool = False) -> tuple[RewardProcessor, RewardProcessor]:
    """(train, eval) processors over one loader: a model used by both is constructed once.

    ``distributed=True`` gives :class:`~rewardzoo.distributed.DistributedRewardProcessor` instances
    (groupwise rewards see groups spread over ranks; ``group`` is the torch.distributed process group).
    ``rank_ordered_loading=True`` constructs the models on rank 0 first, then on the other ranks.
    """
    if not isinstance(config, RewardConfig):
        config = load_config(config)
    loader = loader or RewardLoader()
    ordered = contextlib.nullcontext()
    if distributed or rank_ordered_loading:
        from .distributed import DistributedRewardProcessor, rank_ordered

        if rank_ordered_loading:
            ordered = rank_ordered(group)
    with ordered:
        if distributed:
            return (DistributedRewardProcessor(config.rewards, loader, group=group),
                    DistributedRewardProcessor(config.eval_rewards, loader, group=group))
        return RewardProcessor(config.rewards, loader), RewardProcessor(config.eval_rewards, loader)
