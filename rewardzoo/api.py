"""Convenience entry points that tie config, loader and processor together."""

from __future__ import annotations

import os
from typing import Any, Mapping

from .config import RewardConfig, load_config
from .loader import RewardLoader
from .processor import RewardProcessor


def build_processors(config: RewardConfig | str | os.PathLike | Mapping[str, Any],
                     loader: RewardLoader | None = None) -> tuple[RewardProcessor, RewardProcessor]:
    """(train, eval) processors over one loader: a model used by both is constructed once."""
    if not isinstance(config, RewardConfig):
        config = load_config(config)
    loader = loader or RewardLoader()
    return RewardProcessor(config.rewards, loader), RewardProcessor(config.eval_rewards, loader)
