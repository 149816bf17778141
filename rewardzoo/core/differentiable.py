"""Differentiable rewards for reward-gradient fine-tuning (ReFL, DRaFT, AlignProp).

A tiny random-init CLIP (``rewardzoo.testing``) stands in for real weights; a hub id, a local directory or
a config file (``rewardzoo.differentiable("rewards.yaml")``) is used the same way:

>>> import tempfile, torch, rewardzoo
>>> from rewardzoo.testing import tiny_open_clip_dir
>>> tmp = tempfile.TemporaryDirectory()
>>> f = rewardzoo.differentiable({"rewards": [{"name": "clip_score", "model_path": str(tiny_open_clip_dir(tmp.name))}]})
>>> pixels = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0), requires_grad=True)
>>> total = f(pixels, ["a cat", "a dog"])  # (B,) tensor on the pixels' graph
>>> total.shape, total.requires_grad
(torch.Size([2]), True)
>>> (-total.mean()).backward()  # gradients reach the generator
>>> pixels.grad.shape, bool(pixels.grad.abs().sum() > 0)
(torch.Size([2, 3, 64, 64]), True)
>>> sorted(f.last)  # {stream name: (B,) tensor}
['clip_score']
>>> tmp.cleanup()

``pixels`` are float images ``(B, 3, H, W)`` (video rewards: ``(B, T, 3, H, W)``) in [0, 1] on the
rewards' device, usually the output of a generator's decoder and requiring grad. Each reward's
``score_pixels`` runs the same model and the same formula as its no-grad call, with the
preprocessing done in float in torch (antialiased resize, centre crop or letterbox, normalise: the
reference order) and without 8-bit rounding, PIL, NumPy or ``no_grad`` on the way. The total is the
config-weighted sum of the rewards (per sample: ``weight_for(dataset)``, 0 where an entry's
``applicable_datasets`` excludes the sample's dataset).

The rewards' own parameters are frozen (``requires_grad=False``, eval mode): only the pixels, and
through them the generator, receive gradients. ``gradient_checkpointing=True`` recomputes the
vision transformer blocks in the backward pass instead of storing their activations.

Only rewards whose model card says ``differentiable: true`` can be used; any other is a
:class:`~rewardzoo.errors.ConfigError` naming it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

from ..errors import ConfigError, InputError
from ..registry import lookup
from ..rewards.base import Reward
from ..spec.config import RewardConfig, RewardSpec
from .loader import RewardLoader
from .residency import reward_modules
from .resolve import resolve_config

__all__ = ["DifferentiableReward", "differentiable", "differentiable_names"]


def differentiable_names() -> list[str]:
    """The registered rewards whose model card says ``differentiable: true``."""
    from ..registry import entries

    return [name for name, info in entries().items() if info.differentiable]


def _check_differentiable(spec: RewardSpec) -> None:
    info = lookup(spec.reward_model)
    if info is not None and not info.differentiable:
        raise ConfigError(
            f"reward '{spec.reward_model}' is not differentiable (its model card says "
            f"`differentiable: false`; see its Limitations); differentiable rewards: "
            f"{', '.join(differentiable_names())}",
            entry=spec.name,
            field="reward_model",
        )


class _PixelScorer(Protocol):
    """A reward with a differentiable path (``differentiable()`` checks it has one; past the pixels, the
    fields it takes differ from reward to reward)."""

    def score_pixels(self, pixels: Any, *, gradient_checkpointing: bool = ..., **fields: Any) -> Any: ...


class DifferentiableReward:
    """``f(pixels, prompts=None, *, dataset=None, return_parts=False, **fields) -> (B,)`` total.

    ``prompts``: one string per sample (for rewards that read ``prompt``); ``fields``: the other
    fields rewards declare (e.g. ``condition_images``: per sample one or a list of float tensors
    (3, H, W)). ``dataset``: one dataset name for the batch or one per sample (weights and
    ``applicable_datasets``); ``step``: the trainer's step, for scheduled weights. ``return_parts=True`` returns ``(total, {stream name: (B,) tensor})``;
    the parts of the last call are also kept in :attr:`last` (on the graph: do not keep them across
    steps). Attributes: ``specs``, ``rewards`` (stream name -> built reward), ``gradient_checkpointing``.
    """

    def __init__(
        self,
        specs: Sequence[RewardSpec],
        rewards: Sequence[Reward],
        *,
        gradient_checkpointing: bool = False,
        loader: RewardLoader | None = None,
    ) -> None:
        self.loader = loader or RewardLoader()
        self.specs = tuple(specs)
        self.rewards = {spec.name: reward for spec, reward in zip(self.specs, rewards)}
        self.gradient_checkpointing = bool(gradient_checkpointing)
        self.last: dict[str, Any] = {}

    def __call__(
        self,
        pixels: Any,
        prompts: Sequence[str] | None = None,
        *,
        dataset: Any = None,
        return_parts: bool = False,
        step: int | None = None,
        **fields: Any,
    ) -> Any:
        import torch

        if not isinstance(pixels, torch.Tensor) or not pixels.is_floating_point() or pixels.ndim not in (4, 5):
            what = (
                f"{pixels.dtype} tensor of shape {tuple(pixels.shape)}"
                if isinstance(pixels, torch.Tensor)
                else type(pixels).__name__
            )
            raise InputError(
                f"expected float pixels (B, 3, H, W) or videos (B, T, 3, H, W) in [0, 1], got {what}", field="image"
            )
        n = int(pixels.shape[0])
        datasets = list(dataset) if isinstance(dataset, (list, tuple)) else [dataset] * n
        if len(datasets) != n:
            raise InputError(f"{n} samples but {len(datasets)} dataset names", field="dataset")
        given = dict(fields)
        if prompts is not None:
            given["prompt"] = list(prompts)
        parts: dict[str, Any] = {}
        total = None
        # a sleeping reward wakes (the graph needs its weights until backward: it sleeps only when asked)
        self.loader.wake(self.rewards.values())
        for spec in self.specs:
            reward = self.rewards[spec.name]
            media = "video" if "video" in reward.inputs.fields else "image"
            if (media == "video") != (pixels.ndim == 5):
                raise InputError(
                    f"reward '{spec.name}' scores {'videos (B, T, 3, H, W)' if media == 'video' else 'images (B, 3, H, W)'}"
                    f", got pixels of shape {tuple(pixels.shape)}",
                    field=media,
                )
            wanted = {}
            for fld in reward.inputs.fields:
                if fld in ("image", "video"):
                    continue
                if fld not in given:
                    raise InputError(f"reward '{spec.name}' needs '{fld}' (one per sample)", field=fld)
                wanted[fld] = given[fld]
            weights = [spec.weight_for(d, step) if spec.applies_to(d) else 0.0 for d in datasets]
            scorer = cast("_PixelScorer", reward)  # differentiable() checked it has score_pixels
            score = scorer.score_pixels(pixels, gradient_checkpointing=self.gradient_checkpointing, **wanted)
            parts[spec.name] = score
            if all(w == 0.0 for w in weights):
                continue
            w = torch.tensor(weights, dtype=score.dtype, device=score.device)
            total = score * w if total is None else total + score * w
        if total is None:
            total = pixels.new_zeros(n) * pixels.reshape(n, -1).sum(-1)  # on the graph, all zero
        self.last = parts
        return (total, parts) if return_parts else total

    def sleep(self) -> None:
        """Put the rewards of entries with ``offload`` to sleep (after the backward pass of a step); the next
        call wakes them."""
        self.loader.sleep(self.rewards.values())

    def __repr__(self) -> str:
        return f"DifferentiableReward({', '.join(self.rewards)}, gradient_checkpointing={self.gradient_checkpointing})"


def differentiable(
    config: RewardConfig | str | os.PathLike[str] | Mapping[str, Any],
    *,
    split: str = "train",
    loader: RewardLoader | None = None,
    gradient_checkpointing: bool = False,
) -> DifferentiableReward:
    """The differentiable total of a reward config (see the module docstring).

    ``config``: anything :func:`rewardzoo.load_config` accepts (a YAML path, a mapping, a loaded
    :class:`~rewardzoo.spec.config.RewardConfig`) or a reward name (``"clip_score"``). ``split``: which
    list (``train`` or ``eval``). ``loader``: share built rewards (and so models) with processors.
    ``gradient_checkpointing``: recompute the image tower's transformer blocks in the backward pass.
    A reward that is not differentiable is a :class:`ConfigError` naming it (checked before any
    model is loaded).
    """
    if not isinstance(config, (RewardConfig, str, os.PathLike, Mapping)):
        raise ConfigError(
            f"differentiable() takes a config path, a mapping, a RewardConfig or a reward name, got "
            f"{type(config).__name__}"
        )
    specs = resolve_config(config, reward="entry").specs(split)
    for spec in specs:
        _check_differentiable(spec)
    loader = loader or RewardLoader()
    rewards = []
    for spec in specs:
        reward = loader.load(spec)
        if not callable(getattr(reward, "score_pixels", None)):
            raise ConfigError(
                f"reward '{spec.reward_model}' has no differentiable path (no `score_pixels` method)",
                entry=spec.name,
                field="reward_model",
            )
        for module in reward_modules(reward):
            module.eval().requires_grad_(False)  # frozen: no gradient accumulates in the reward's parameters
        rewards.append(reward)
    return DifferentiableReward(specs, rewards, gradient_checkpointing=gradient_checkpointing, loader=loader)
