"""Adapters for trainers that call rewards through their own protocol.

- TRL ``GRPOTrainer(reward_funcs=..., args=GRPOConfig(reward_weights=...))``: :func:`trl_reward_funcs`
  gives one plain function per configured reward (TRL treats an ``nn.Module`` as a sequence classifier,
  so these are functions with a ``__name__``). Each is called with keywords only —
  ``prompts``, ``completions``, ``completion_ids`` and every dataset column — and returns
  ``list[float | None]`` (None where the reward does not apply; TRL turns it into NaN and leaves it out
  of that row's weighted sum).
- DDPO-style ``reward_fn(images, prompts, prompt_metadata) -> (rewards, metadata)`` (kvablack/ddpo-pytorch,
  TRL's former DDPOTrainer): :func:`ddpo_reward_fn` returns the weighted total per image.

All functions built from one config share one loader, so each model is loaded once.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .config import RewardConfig, RewardSpec, load_config
from .errors import ConfigError, InputError
from .loader import RewardLoader
from .processor import RewardProcessor
from .sample import Sample, field_names

_SAMPLE_FIELDS = set(field_names())
_TRL_RESERVED = {"prompts", "completions", "completion_ids", "trainer_state"}


def _specs(config: RewardConfig | str | os.PathLike | Mapping[str, Any], split: str) -> tuple[RewardSpec, ...]:
    if not isinstance(config, RewardConfig):
        config = load_config(config)
    return config.specs(split)


def _text(value: Any) -> str:
    """Plain text of a TRL prompt/completion: a string, or a conversation (list of role/content messages)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(m, Mapping) and "content" in m for m in value):
        return "\n".join(str(m["content"]) for m in value)
    raise InputError(f"expected text or a list of chat messages, got {type(value).__name__}")


def trl_samples(prompts: Sequence[Any] | None, completions: Sequence[Any] | None, columns: Mapping[str, Any]
                ) -> list[Sample]:
    """Samples from TRL's keyword arguments; dataset columns that are not sample fields go into metadata."""
    n = len(completions if completions is not None else prompts or [])
    if "images" in columns and "image" not in columns:
        columns = {**columns, "image": [imgs[0] if isinstance(imgs, (list, tuple)) and len(imgs) == 1 else imgs
                                        for imgs in columns["images"]]}
    for key, values in columns.items():
        if key not in _TRL_RESERVED and isinstance(values, (list, tuple)) and len(values) != n:
            raise InputError(f"column '{key}' has {len(values)} values for {n} completions; TRL passes one per "
                             "completion", field=key)
    samples = []
    for i in range(n):
        fields: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, values in columns.items():
            if key in _TRL_RESERVED or key == "images" or not isinstance(values, (list, tuple)):
                continue
            (fields if key in _SAMPLE_FIELDS else extra)[key] = values[i]
        try:
            if prompts is not None:
                fields["prompt"] = _text(prompts[i])
            if completions is not None:
                fields["completion"] = _text(completions[i])
            if extra and fields.get("metadata") is None:
                fields["metadata"] = {k: v for k, v in extra.items()
                                      if isinstance(v, (str, int, float, bool, type(None)))}
            samples.append(Sample(**fields))
        except InputError as exc:
            raise exc.located(sample=i) from None
    return samples


def trl_reward_funcs(config: RewardConfig | str | os.PathLike | Mapping[str, Any], split: str = "train",
                     loader: RewardLoader | None = None) -> tuple[list[Callable[..., list[float | None]]], list[float]]:
    """(reward functions, reward_weights) for TRL's GRPOTrainer, one function per configured reward.

    Per-dataset weight mappings have no TRL equivalent (TRL weighs a function, not a row): configure one
    stream per dataset with ``applicable_datasets`` and a scalar weight instead.
    """
    loader = loader or RewardLoader()
    funcs, weights = [], []
    for spec in _specs(config, split):
        if isinstance(spec.weight, Mapping):
            raise ConfigError("TRL takes one weight per reward function; split per-dataset weights into one entry "
                              "per dataset with applicable_datasets", entry=spec.name, field="weight")
        funcs.append(_trl_function(RewardProcessor([spec], loader), spec.name))
        weights.append(float(spec.weight))
    return funcs, weights


def _trl_function(processor: RewardProcessor, name: str) -> Callable[..., list[float | None]]:
    def reward_func(prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
        result = processor(trl_samples(prompts, completions, columns))
        return [None if np.isnan(v) else float(v) for v in result.rewards[name]]

    reward_func.__name__ = reward_func.__qualname__ = name
    return reward_func


def ddpo_reward_fn(config: RewardConfig | str | os.PathLike | Mapping[str, Any], split: str = "train",
                   loader: RewardLoader | None = None) -> Callable[..., tuple[np.ndarray, dict]]:
    """``reward_fn(images, prompts, prompt_metadata) -> (total (B,) float32, {"rewards": ..., "applied": ...})``.

    ``images``: float (B, 3, H, W) in [0, 1] (tensor or array) or a list of images. Every image must get at
    least one reward (DDPO has no notion of "not applicable"): a sample no reward applies to is an error.
    """
    processor = RewardProcessor(_specs(config, split), loader or RewardLoader())

    def reward_fn(images, prompts, prompt_metadata=None):
        metadata = prompt_metadata if prompt_metadata is not None else [None] * len(prompts)
        if not (len(images) == len(prompts) == len(metadata)):
            raise InputError(f"got {len(images)} images, {len(prompts)} prompts and {len(metadata)} metadata entries")
        result = processor([Sample(image=img, prompt=p, metadata=m) for img, p, m in zip(images, prompts, metadata)])
        missing = np.flatnonzero(np.isnan(result.total))
        if missing.size:
            raise InputError("no configured reward applies to this sample (check applicable_datasets)",
                             sample=int(missing[0]))
        return result.total, {"rewards": result.rewards, "applied": result.applied}

    return reward_fn
