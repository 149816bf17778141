"""What every trainer adapter shares: reading the config it is given."""

from __future__ import annotations

from typing import Any, Mapping

from ..config import ConfigSource, RewardSpec, resolve_config
from ..errors import InputError
from ..sample import Sample

#: Anything an adapter takes as its config: a YAML path, a mapping, or a loaded config.


def specs_of(config: ConfigSource, split: str = "train") -> tuple[RewardSpec, ...]:
    """The reward specs of ``split`` in ``config``."""
    return resolve_config(config).specs(split)


def image_samples(images: Any, prompts: Any, metadata: Any, dataset_key: str | None) -> list[Sample]:
    """Samples from a DDPO / flow_grpo style call: ``images`` a (B, 3, H, W) tensor or array in [0, 1], a
    (B, H, W, 3) uint8 array or a list of images; ``metadata`` one mapping (or None) per image; the
    dataset of each sample is ``metadata[dataset_key]`` when a key is given."""
    prompts = list(prompts)
    metadata = list(metadata) if metadata is not None else [None] * len(prompts)
    items = list(images.unbind(0)) if hasattr(images, "unbind") else list(images)
    if not (len(items) == len(prompts) == len(metadata)):
        raise InputError(f"got {len(items)} images, {len(prompts)} prompts and {len(metadata)} metadata entries")
    samples = []
    for i, (image, prompt, meta) in enumerate(zip(items, prompts, metadata)):
        dataset = None
        if dataset_key is not None:
            if not isinstance(meta, Mapping) or dataset_key not in meta:
                raise InputError(f"the prompt metadata has no '{dataset_key}' (dataset_key)", field="metadata",
                                 sample=i)
            dataset = meta[dataset_key]
        samples.append(Sample(image=image, prompt=prompt, metadata=meta, dataset=dataset))
    return samples


def require_scored(result: Any) -> None:
    """A trainer without a notion of "not applicable" needs a reward for every sample."""
    missing = result.unscored
    if missing:
        raise InputError("no configured reward applies to this sample (check applicable_datasets and the "
                         "adapter's dataset_key)", sample=missing[0])
