"""An entry's placement on Ray (``ray:``), its parsing, and whether a set of placements fits a cluster.

```yaml
rewards:
  - name: pick
    reward_model: pickscore
    ray: {num_gpus: 0.1, num_cpus: 1, replicas: 2, max_ongoing_requests: 8}
```

An entry with a ``ray:`` block gets a Ray Serve deployment (``serve --ray``) and a Ray Data stage
(``score --engine ray``) of its own, shared with the entries that share its model; a key left out takes the
command's figure (``--replicas``, ``--gpus-per-replica``, ``--cpus-per-replica``; ``--actors``,
``--gpus-per-actor``, ``--cpus-per-actor``). ``num_gpus`` is a fraction of one GPU (``0.1``: ten replicas share a
card) or a whole number of GPUs; Ray cannot give one replica 1.5 GPUs. :func:`check_fit` says, from a cluster's
nodes, whether every replica finds its CPUs and GPUs, and names the first entry that does not.

Imports only :mod:`rewardzoo.errors` and :mod:`rewardzoo.shared` (the spec layer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

RAY_KEYS = ("num_gpus", "num_cpus", "replicas", "max_ongoing_requests")


@dataclass(frozen=True)
class RayPlacement:
    """An entry's ``ray:`` block; None for a key left out (the command's figure applies, :meth:`filled`)."""

    num_gpus: float | None = None
    num_cpus: float | None = None
    replicas: int | None = None
    max_ongoing_requests: int | None = None

    def filled(self, defaults: RayPlacement) -> RayPlacement:
        """This placement with every key left out taken from ``defaults``."""
        return RayPlacement(
            *(getattr(self, k) if getattr(self, k) is not None else getattr(defaults, k) for k in RAY_KEYS)
        )

    def options(self) -> dict[str, Any]:
        """Ray's ``ray_actor_options`` of one replica."""
        return {"num_gpus": float(self.num_gpus or 0), "num_cpus": float(self.num_cpus or 0)}


def parse_ray(value: Any, entry: str) -> RayPlacement:
    """An entry's ``ray:`` mapping as a :class:`RayPlacement` (declared by :class:`rewardzoo.spec.models.RayModel`);
    ConfigError naming the entry and key otherwise."""
    from .models import RayModel, validate

    return RayPlacement(**validate(RayModel, value, entry=entry, prefix=("ray",)).model_dump())


@dataclass(frozen=True)
class Node:
    """What one node of a cluster offers: its CPUs and its number of GPUs."""

    cpus: float
    gpus: int


def check_fit(demands: Sequence[tuple[str, RayPlacement]], nodes: Sequence[Node]) -> None:
    """ConfigError naming the first entry (in ``demands``' order) whose replicas find no room on ``nodes``.

    ``demands``: (entry, filled placement) pairs. Every replica needs its ``num_cpus`` on one node and its
    ``num_gpus`` there too: a fraction within a single GPU (what is left of it), whole GPUs free. Replicas are
    placed largest first (first fit decreasing), which is also how the check picks the entry it names when the
    whole does not fit although each entry alone would.
    """
    cpus = [n.cpus for n in nodes]
    gpus = [[1.0] * n.gpus for n in nodes]
    replicas = [(p, name) for name, p in demands for _ in range(p.replicas or 1)]
    replicas.sort(key=lambda r: (-(r[0].num_gpus or 0), -(r[0].num_cpus or 0)))
    for placement, name in replicas:
        need_cpu, need_gpu = placement.num_cpus or 0, placement.num_gpus or 0
        if not any(_take(cpus, gpus, k, need_cpu, need_gpu) for k in range(len(nodes))):
            have = f"{sum(n.cpus for n in nodes):g} CPUs and {sum(n.gpus for n in nodes)} GPUs"
            raise ConfigError(
                f"its {placement.replicas or 1} replica(s) of {need_gpu:g} GPU(s) and {need_cpu:g} CPU(s) "
                f"do not fit beside the other deployments on the Ray cluster ({len(nodes)} node(s), {have} in "
                f"all); lower ray.replicas, ray.num_gpus or ray.num_cpus",
                entry=name,
                field="ray",
            )


def _take(cpus: list[float], gpus: list[list[float]], k: int, need_cpu: float, need_gpu: float) -> bool:
    """Take one replica's share of node ``k`` when it has room (True), else leave it as it is (False)."""
    eps = 1e-9
    if cpus[k] + eps < need_cpu:
        return False
    if need_gpu >= 1:
        free = [g for g, left in enumerate(gpus[k]) if left >= 1 - eps]
        if len(free) < need_gpu:
            return False
        for g in free[: int(need_gpu)]:
            gpus[k][g] = 0.0
    elif need_gpu > 0:
        fits = [g for g, left in enumerate(gpus[k]) if left + eps >= need_gpu]
        if not fits:
            return False
        gpus[k][fits[0]] -= need_gpu
    cpus[k] -= need_cpu
    return True
