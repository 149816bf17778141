"""AlignProp-style differentiable ``reward_fn(images, prompts, metadata) -> (rewards, {})`` (mihirp1998/AlignProp,
and the same protocol for DRaFT / ReFL loops): the rewards are a tensor on the images' graph, so
``(-rewards.mean()).backward()`` sends the reward gradient into the generator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, cast

from ..core.differentiable import DifferentiableReward, differentiable
from ..core.loader import RewardLoader
from ..errors import ConfigError, InputError
from .common import ConfigSource, SleepAfterBackward

INPUT_RANGES = ("unit", "signed")


class AlignPropRewardFn(Protocol):
    """What :func:`alignprop_reward_fn` returns: the AlignProp reward function, holding the underlying
    :class:`~rewardzoo.core.differentiable.DifferentiableReward` as ``differentiable``."""

    differentiable: DifferentiableReward

    def __call__(self, images: Any, prompts: Any, metadata: Any = None) -> tuple[Any, dict[str, Any]]: ...


def alignprop_reward_fn(
    config: ConfigSource,
    split: str = "train",
    loader: RewardLoader | None = None,
    *,
    input_range: str = "unit",
    dataset_key: str | None = None,
    gradient_checkpointing: bool = False,
) -> AlignPropRewardFn:
    """``reward_fn(images, prompts, metadata=None) -> (rewards (B,) tensor, differentiable, {})``.

    ``config``: anything :func:`rewardzoo.load_config` accepts, or a reward name; every reward in it
    must be differentiable (``differentiable: true`` in its card), else a ``ConfigError``.
    ``images``: float (B, 3, H, W) (or videos (B, T, 3, H, W)) on the rewards' device, in [0, 1]
    (``input_range="unit"``, the default) or as a VAE decodes them, in [-1, 1] (``"signed"``:
    mapped with ``(x / 2 + 0.5).clamp(0, 1)``, as AlignProp's loss functions do). ``metadata``: one
    mapping per image (or None); ``dataset_key`` names the key holding each sample's dataset.
    ``gradient_checkpointing``: recompute the reward's vision blocks in the backward pass. Rewards with
    ``offload: cpu|drop`` wake at the call and sleep again once the backward pass has gone through every graph they
    built (several calls before one backward are fine; a second ``backward(retain_graph=True)`` through rewards
    that went to sleep is not supported).
    """
    if input_range not in INPUT_RANGES:
        raise ConfigError(f"input_range must be one of {INPUT_RANGES}, got {input_range!r}")
    f = differentiable(config, split=split, loader=loader, gradient_checkpointing=gradient_checkpointing)
    sleep_after_backward = SleepAfterBackward(f.sleep)

    def reward_fn(images: Any, prompts: Any, metadata: Any = None) -> tuple[Any, dict[str, Any]]:
        prompts = list(prompts)
        if len(prompts) != len(images):
            raise InputError(f"got {len(images)} images and {len(prompts)} prompts", field="prompt")
        datasets = None
        if dataset_key is not None:
            metadata = list(metadata) if metadata is not None else [None] * len(prompts)
            datasets = []
            for i, meta in enumerate(metadata):
                if not isinstance(meta, Mapping) or dataset_key not in meta:
                    raise InputError(
                        f"the prompt metadata has no '{dataset_key}' (dataset_key)", field="metadata", sample=i
                    )
                datasets.append(meta[dataset_key])
        if input_range == "signed":
            images = (images / 2 + 0.5).clamp(0, 1)
        rewards = f(images, prompts, dataset=datasets)
        sleep_after_backward(images, rewards)  # entries with `offload`: asleep once backward has gone through
        return rewards, {}

    typed = cast(AlignPropRewardFn, reward_fn)  # a function given its attribute below
    typed.differentiable = f  # the underlying DifferentiableReward (its .last holds the per-reward parts)
    return typed
