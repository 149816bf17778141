"""Grouping by ``group_id``, written once: the key a group id is compared by and the members of each group.

Group ids are compared as ``(type name, value)`` pairs, so ``7`` and ``"7"`` (and ``1`` and ``True``) are
different groups. The engine's groupwise calls, the advantages, the groupwise rewards (``group/ranking.py``),
the batch assembler and the server's merged requests all group through :func:`group_members`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

_M = TypeVar("_M")

#: The key a group id is compared by.
GroupKey = tuple[str, Hashable]


def group_key(value: Hashable) -> GroupKey:
    """The key ``value`` is grouped by: ``(type name, value)``.

    >>> group_key(7) == group_key("7"), group_key(7) == group_key(7)
    (False, True)
    """
    return (type(value).__name__, value)


def group_members(
    members: Iterable[tuple[_M, Hashable | None]], missing: Callable[[_M], Exception]
) -> dict[GroupKey, list[_M]]:
    """``(member, group id)`` pairs as ``{group key: [member, ...]}``, groups in order of first appearance and
    members in order; ``missing(member)`` is raised for the first member whose group id is None.

    >>> group_members([(0, "a"), (1, 2), (2, "a")], missing=ValueError)
    {('str', 'a'): [0, 2], ('int', 2): [1]}
    """
    groups: dict[GroupKey, list[_M]] = {}
    for member, gid in members:
        if gid is None:
            raise missing(member)
        groups.setdefault(group_key(gid), []).append(member)
    return groups
