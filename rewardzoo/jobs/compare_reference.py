"""``rewardzoo compare-reference``: the same samples scored by rewardzoo's implementation of a reward (in this
process) and by its reference package (the wrapper of :mod:`rewardzoo.rewards.references`, in the reference's
own environment), with the per-sample differences and their maximum."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..core.resolve import parse_spec
from ..errors import ConfigError, did_you_mean
from ..spec.config import RewardSpec
from ..spec.sample import Sample

#: The reference stream's name: the entry's with this suffix.
REFERENCE_SUFFIX = "@reference"


@dataclass(frozen=True)
class Comparison:
    """Scores of ``name`` by rewardzoo (``ours``) and by the reference (``reference``), sample by sample
    (``labels``: where each sample came from, e.g. its manifest line); ``where``: how the reference ran."""

    name: str
    labels: tuple[str, ...]
    ours: np.ndarray
    reference: np.ndarray
    where: str

    @property
    def difference(self) -> np.ndarray:
        """rewardzoo minus the reference (NaN where either did not score the sample)."""
        return self.ours - self.reference

    @property
    def max_abs_difference(self) -> float:
        """The largest absolute difference over the samples both scored (NaN when there is none)."""
        d = np.abs(self.difference)
        d = d[np.isfinite(d)]
        return float(d.max()) if d.size else float("nan")

    def as_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready data (``rewardzoo compare-reference --json``)."""

        def num(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None

        return {
            "reward": self.name,
            "reference": self.where,
            "max_abs_difference": num(self.max_abs_difference),
            "samples": [
                {"sample": label, "rewardzoo": num(a), "reference": num(b), "difference": num(a - b)}
                for label, a, b in zip(self.labels, self.ours, self.reference)
            ],
        }


def reference_specs(spec: RewardSpec, reference: Mapping[str, Any] | bool = True) -> tuple[RewardSpec, RewardSpec]:
    """(rewardzoo's entry in this process, the reference's entry) for one config entry; ``reference`` is an
    entry's ``reference:`` value (true: the reward's known wrapper and environment). Both score every sample."""
    entry = {
        "name": spec.name,
        "reward_model": spec.reward_model,
        "model_path": spec.model_path,
        "dtype": spec.dtype,
        "device": spec.device,
        "batch_size": spec.batch_size,
        "kwargs": dict(spec.kwargs),
        "limits": dict(spec.limits),
        "reference": reference,
    }
    ours = replace(spec, environment=None, applicable_datasets=None, weight=1.0)
    return ours, replace(parse_spec(entry), name=spec.name + REFERENCE_SUFFIX)  # errors name the user's entry


def find_spec(specs: Sequence[RewardSpec], name: str) -> RewardSpec:
    """The entry called ``name``; ConfigError listing the names otherwise."""
    for spec in specs:
        if spec.name == name:
            return spec
    names = [s.name for s in specs]
    raise ConfigError(
        f"the config has no entry '{name}'{did_you_mean(name, names)}; its entries: {', '.join(names)}",
        entry=name,
        field="name",
    )


def compare_reference(
    spec: RewardSpec, samples: Sequence[Sample], labels: Sequence[str], reference: Mapping[str, Any] | bool = True
) -> Comparison:
    """Score ``samples`` with ``spec`` in this process and with its reference (see :func:`reference_specs`)."""
    from ..core.processor import RewardProcessor

    ours, ref = reference_specs(spec, reference)
    with RewardProcessor([ours, ref]) as processor:
        result = processor(list(samples))
    where = ref.environment.describe() if ref.environment is not None else "in this process"
    return Comparison(
        spec.name,
        tuple(labels),
        np.asarray(result.rewards[ours.name], dtype=np.float64),
        np.asarray(result.rewards[ref.name], dtype=np.float64),
        f"{ref.reward_model} ({where})",
    )
