"""Pairwise judges used by the tests (importable as ``tests.group.judges:...`` from tests/group)."""

from __future__ import annotations

import json


class MetaJudge:
    """P(first beats second) from the metadata scores: 1, 0 or 0.5 (or ``margin``-scaled when soft)."""

    required_fields = ("metadata",)

    def __init__(self, soft: bool = False, device: str = "cpu") -> None:
        self.soft, self.device = soft, device
        self.pairs: list[tuple[float, float]] = []

    def __call__(self, first: dict, second: dict) -> float:
        a, b = json.loads(first["metadata"])["score"], json.loads(second["metadata"])["score"]
        self.pairs.append((a, b))
        if self.soft:
            return min(1.0, max(0.0, 0.5 + (a - b) / 10))
        return 1.0 if a > b else 0.0 if a < b else 0.5


def constant_judge(first: dict, second: dict):
    """Returns metadata["p"] of the first sample, unchecked (for out-of-range tests)."""
    return json.loads(first["metadata"])["p"]
