"""flow_grpo's ``multi_score`` slot (and DanceGRPO's inline reward loop).

flow_grpo's training script builds ``reward_fn = multi_score(device, config.reward_fn)`` and calls
``reward_fn(images, prompts, prompt_metadata, only_strict=True)``, expecting
``({reward name: scores, ..., "avg": weighted sum}, {})``; ``avg`` is what it normalises per prompt.
In its script, write instead::

    reward_fn = rewardzoo.integrations.flow_grpo_reward_fn("rewards.yaml", dataset_key="dataset")

With a ``decode:`` stage in the config, pass the latents instead of decoding them in the script
(``reward_fn(None, prompts, prompt_metadata, latents=latents)``): the stage decodes each batch once for every pixel
reward, and latent rewards read the latents themselves.

DanceGRPO scores a list of PIL images and their captions inline; with rewardzoo that is::

    score = rewardzoo.build_processors("rewards.yaml")[0]
    rewards = score([rewardzoo.Sample(image=img, prompt=c) for img, c in zip(images, captions)]).total
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.loader import RewardLoader
from ..core.processor import RewardProcessor
from ..core.resolve import resolve_config
from .common import ConfigSource, image_samples, require_scored


def flow_grpo_reward_fn(
    config: ConfigSource, dataset_key: str | None = None, *, split: str = "train", loader: RewardLoader | None = None
) -> Callable[..., tuple[dict[str, np.ndarray], dict]]:
    """``reward_fn(images, prompts, metadata, only_strict=True, **_) -> ({name: (B,), ..., "avg": (B,)}, {})``.

    ``images``: a (B, 3, H, W) float tensor in [0, 1] (as flow_grpo passes them), an array, or a list of
    images. Each reward's scores are float32 with NaN where it does not apply; ``avg`` is the weighted
    total over the rewards that apply (never NaN: a sample no reward applies to is an error).
    ``dataset_key``: the key of each prompt's metadata that names its dataset, so ``applicable_datasets``
    routes samples. Keywords flow_grpo passes for its own scorers (``only_strict``) are accepted and unused.
    ``latents``: the batch's latents, a (B, C, H, W) tensor (each sample's ``latent``; ``images`` may then be None
    and the config's ``decode:`` stage decodes them).
    """
    resolved = resolve_config(config)
    processor = RewardProcessor(resolved.specs(split), loader or RewardLoader(), decode=resolved.decode)

    def reward_fn(
        images: Any, prompts: Any, metadata: Any = None, only_strict: bool = True, *, latents: Any = None, **_: Any
    ) -> tuple[dict[str, np.ndarray], dict]:
        result = processor(image_samples(images, prompts, metadata, dataset_key, latents))
        require_scored(result)
        return {**result.rewards, "avg": result.total}, {}

    reward_fn.processor = processor  # type: ignore[attr-defined]  # (its rewards, their residency)
    return reward_fn
