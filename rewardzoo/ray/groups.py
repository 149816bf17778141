"""Which entries run where on Ray: the entries with a ``ray:`` block, grouped by the model they share, each group
placed with its own resources; the others stay with the command's own figures (design: docs/ray.md).

Entries share a model as the loader shares it (:func:`rewardzoo.core.loader.resolve_reward`'s identity, inner
rewards included: a group wrapper over a base shares the base with an entry of that base), and so share a
deployment or a stage: one process loads the model once. An entry without a ``ray:`` block that shares a model with
a placed one goes with it; two entries of one group whose blocks differ are a ConfigError naming the second.
Used by ``serve --ray`` (:mod:`rewardzoo.serve.ray_serve`) and ``score --engine ray`` (:mod:`rewardzoo.ray.engine`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ..core.loader import resolve_reward
from ..core.resolve import parse_spec
from ..errors import ConfigError
from ..spec.config import RewardSpec
from ..spec.placement import Node, RayPlacement, check_fit


@dataclass(frozen=True)
class PlacedGroup:
    """Entries that share a model, placed together: ``placement`` is filled (no key left out)."""

    specs: tuple[RewardSpec, ...]
    placement: RayPlacement

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    @property
    def label(self) -> str:
        """The group's deployment / stage name: its first entry's."""
        return self.specs[0].name


def model_keys(spec: RewardSpec) -> list[Hashable]:
    """The model identities an entry loads: its own and its inner rewards' (as the loader builds them)."""
    if spec.environment is not None:
        from ..environments.reward import WorkerReward

        return [WorkerReward.identity(spec)]
    resolved = resolve_reward(spec)
    keys: list[Hashable] = [resolved.identity]
    _, inner = resolved.implementation.inner_rewards(
        dict(spec.kwargs), model_path=spec.model_path, device=spec.device, dtype=spec.dtype
    )
    for param, entry in inner.items():
        keys += model_keys(parse_spec({"name": f"{spec.name}.{param}", **entry}, f"{spec.name}: {param}"))
    return keys


def placed_groups(
    specs: Sequence[RewardSpec], defaults: RayPlacement
) -> tuple[tuple[RewardSpec, ...], list[PlacedGroup]]:
    """The entries left with the command's figures (config order), and the placed groups (in the order of their
    first entries), each placement's left-out keys taken from ``defaults``. Without any ``ray:`` block: all
    entries, no group (nothing is resolved)."""
    if all(s.ray is None for s in specs):
        return tuple(specs), []
    owner: dict[Hashable, int] = {}
    parent = list(range(len(specs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, spec in enumerate(specs):
        for key in model_keys(spec):
            j = owner.setdefault(key, i)
            parent[root(i)] = root(j)
    members: dict[int, list[RewardSpec]] = {}
    for i, spec in enumerate(specs):
        members.setdefault(root(i), []).append(spec)
    rest: list[RewardSpec] = []
    groups: list[PlacedGroup] = []
    for group in sorted(members.values(), key=lambda g: specs.index(g[0])):
        blocks = [s for s in group if s.ray is not None]
        if not blocks:
            rest += group
            continue
        for other in blocks[1:]:
            if other.ray != blocks[0].ray:
                raise ConfigError(
                    f"shares its model with entry '{blocks[0].name}' (one deployment loads it once), whose ray: "
                    f"block differs; give one of them the block, or both the same",
                    entry=other.name,
                    field="ray",
                )
        groups.append(PlacedGroup(tuple(group), blocks[0].ray.filled(defaults)))  # type: ignore[union-attr]
    kept = {s.name for s in rest}
    return tuple(s for s in specs if s.name in kept), groups


def cluster_nodes() -> list[Node]:
    """The alive nodes of the Ray cluster this process is connected to, with their CPUs and GPUs."""
    import ray

    return [
        Node(float(n["Resources"].get("CPU", 0)), int(n["Resources"].get("GPU", 0)))
        for n in ray.nodes()
        if n.get("Alive")
    ]


def check_cluster_fit(demands: Sequence[tuple[str, RayPlacement]]) -> None:
    """ConfigError naming the first entry whose replicas cannot fit on the connected cluster (when Ray runs)."""
    import ray

    if ray.is_initialized():
        check_fit(demands, cluster_nodes())
