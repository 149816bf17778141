"""Published agreement figures: a card's ``published:`` block, one entry per figure its paper or reference reports.

```yaml
published:
  - benchmark: pickapic_v2        # the evaluation set (a format/layout name of ``rewardzoo evaluate``)
    metric: accuracy              # the set's own metric
    value: 0.802
    source: "imscore README (RE-N-Y/imscore), pairwise accuracy table"
```

``rewardzoo evaluate`` prints the published value beside the measured one when the benchmark matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RegistryError

KEYS = ("benchmark", "metric", "value", "source")


@dataclass(frozen=True)
class Published:
    """One published agreement figure of a reward."""

    benchmark: str
    metric: str
    value: float
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "metric": self.metric, "value": self.value, "source": self.source}


def parse_published(meta: dict[str, Any], card: Path | str) -> tuple[Published, ...]:
    """A card's ``published:`` entries, validated; RegistryError naming the card, entry and key."""
    entries = meta.get("published")
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise RegistryError(f"model card '{card}': 'published' must be a list of entries")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != set(KEYS):
            raise RegistryError(f"model card '{card}': published[{i}] must have exactly the keys {', '.join(KEYS)}")
        value = entry["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RegistryError(f"model card '{card}': published[{i}].value must be a number, got {value!r}")
        for key in ("benchmark", "metric", "source"):
            if not isinstance(entry[key], str) or not entry[key]:
                raise RegistryError(f"model card '{card}': published[{i}].{key} must be a non-empty string")
        out.append(Published(entry["benchmark"], entry["metric"], float(value), entry["source"]))
    return tuple(out)


def published(name: str) -> tuple[Published, ...]:
    """The published figures of a named reward (none for a reward without a card or block)."""
    from ..registry import card_path, read_card

    try:
        path = card_path(name)
    except RegistryError:
        return ()
    return parse_published(read_card(name)[0], path)
