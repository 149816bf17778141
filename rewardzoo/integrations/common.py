"""What every trainer adapter shares: reading the config it is given, feeding a RewardMonitor, putting rewards with
``offload`` back to sleep once the trainer's reward phase is over."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.resolve import resolve_config
from ..errors import InputError
from ..spec.config import ConfigSource, RewardSpec
from ..spec.sample import Sample

#: Anything an adapter takes as its config: a YAML path, a mapping, or a loaded config.


def specs_of(config: ConfigSource, split: str = "train") -> tuple[RewardSpec, ...]:
    """The reward specs of ``split`` in ``config``."""
    return resolve_config(config).specs(split)


def image_samples(
    images: Any, prompts: Any, metadata: Any, dataset_key: str | None, latents: Any = None
) -> list[Sample]:
    """Samples from a DDPO / flow_grpo style call: ``images`` a (B, 3, H, W) tensor or array in [0, 1], a
    (B, H, W, 3) uint8 array or a list of images (None: none, when ``latents`` are given); ``metadata`` one mapping
    (or None) per image; the dataset of each sample is ``metadata[dataset_key]`` when a key is given. ``latents``:
    the generator's latents, a (B, C, H, W) tensor or a list (each sample's ``latent``: for latent rewards and the
    config's ``decode:`` stage, which decodes them for the pixel rewards of samples without images)."""
    prompts = list(prompts)
    metadata = list(metadata) if metadata is not None else [None] * len(prompts)
    items = _rows(images, len(prompts))
    latent_rows = _rows(latents, len(prompts))
    if not (len(items) == len(prompts) == len(metadata) == len(latent_rows)):
        raise InputError(
            f"got {len(items)} images, {len(prompts)} prompts, {len(metadata)} metadata entries"
            + (f" and {len(latent_rows)} latents" if latents is not None else "")
        )
    samples = []
    for i, (image, prompt, meta, latent) in enumerate(zip(items, prompts, metadata, latent_rows)):
        dataset = None
        if dataset_key is not None:
            if not isinstance(meta, Mapping) or dataset_key not in meta:
                raise InputError(
                    f"the prompt metadata has no '{dataset_key}' (dataset_key)", field="metadata", sample=i
                )
            dataset = meta[dataset_key]
        samples.append(Sample(image=image, prompt=prompt, metadata=meta, dataset=dataset, latent=latent))
    return samples


def _rows(values: Any, n: int) -> list[Any]:
    """One item per sample of a stacked tensor or a list; ``n`` Nones for None."""
    if values is None:
        return [None] * n
    return list(values.unbind(0)) if hasattr(values, "unbind") else list(values)


class SleepAfterBackward:
    """The end of a differentiable reward phase (AlignProp, DRaFT): ``sleep()`` once the backward pass has gone
    through every graph the rewards built, i.e. when the gradient of the ``pixels`` each call was given is
    computed (their weights are needed until then; several calls before one backward count); at once when a call
    built no graph (``rewards`` do not require grad, e.g. under no_grad). A graph never backpropagated keeps the
    rewards awake (never asleep under a pending graph). Processor-based adapters need nothing of this: each
    processor call is a phase and sleeps at its end."""

    def __init__(self, sleep: Callable[[], None]) -> None:
        self.sleep = sleep
        self._pending = 0
        self._lock = threading.Lock()

    def __call__(self, pixels: Any, rewards: Any) -> None:
        if not (getattr(rewards, "requires_grad", False) and getattr(pixels, "requires_grad", False)):
            with self._lock:
                idle = self._pending == 0
            if idle:
                self.sleep()
            return
        with self._lock:
            self._pending += 1
        done = [False]

        def hook(grad: Any) -> Any:
            with self._lock:
                if done[0]:
                    return grad
                done[0] = True
                self._pending -= 1
                idle = self._pending == 0
            if idle:
                self.sleep()
            return grad

        pixels.register_hook(hook)


def require_scored(result: Any) -> None:
    """A trainer without a notion of "not applicable" needs a reward for every sample."""
    missing = result.unscored
    if missing:
        raise InputError(
            "no configured reward applies to this sample (check applicable_datasets and the adapter's dataset_key)",
            sample=missing[0],
        )


def combined_result(parts: Sequence[Any]) -> Any:
    """One RewardResult of the same samples from per-stream results (one stream each, as an adapter's
    functions score them): rewards, weights and extras side by side, ``applied`` concatenated in order and
    ``total`` the sum of the parts' totals (NaN where no part applied)."""
    import numpy as np

    from ..core.engine import RewardResult

    first = parts[0]
    if len(parts) == 1:  # one stream: its row is the result (the gatherer's rows are the caller's own copies)
        return first
    totals = np.stack([p.total.astype(np.float64) for p in parts])
    none = np.isnan(totals).all(axis=0)
    total = np.where(none, np.nan, np.nansum(totals, axis=0)).astype(np.float32)
    applied = [sum((list(p.applied[i]) for p in parts), []) for i in range(len(first))]
    return RewardResult(
        rewards={k: v for p in parts for k, v in p.rewards.items()},
        total=total,
        applied=applied,
        extras={k: v for p in parts for k, v in p.extras.items()},
        weights={k: v for p in parts for k, v in p.weights.items()},
        group_ids=list(first.group_ids),
        advantage_mode=first.advantage_mode,
        step=first.step,
        streams={k: v for p in parts for k, v in p.streams.items()},
        stream_weights={k: v for p in parts for k, v in p.stream_weights.items()},
        stream_settings={k: v for p in parts for k, v in p.stream_settings.items()},
    )


class MonitorFeed:
    """Feeds a :class:`~rewardzoo.monitor.RewardMonitor` from adapters that score one stream per call: the
    results of one round (one per stream in ``names``) are combined and passed on once all have arrived."""

    def __init__(self, monitor: Any, names: Sequence[str], split: str = "train") -> None:
        self.monitor, self.names, self.split = monitor, tuple(names), split
        self._pending: dict[str, Any] = {}
        self._rounds = 0
        self._lock = threading.Lock()

    def add(self, name: str, result: Any, step: int | None) -> dict[str, float] | None:
        """Record stream ``name``'s result; the monitor's metrics when this completes the round, else None.
        ``step`` None counts rounds (0, 1, ...)."""
        with self._lock:
            if name in self._pending:  # a stream scored twice before the others: a new round began
                self._pending.clear()
            self._pending[name] = result
            if len(self._pending) < len(self.names):
                return None
            parts = [self._pending[n] for n in self.names]
            self._pending.clear()
            step = self._rounds if step is None else step
            self._rounds += 1
            return self.monitor.update(combined_result(parts), step, split=self.split)
