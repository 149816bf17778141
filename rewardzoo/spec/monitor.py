"""The ``monitor:`` section of a reward config, parsed strictly (unknown keys and bad values name the field;
declared by :class:`rewardzoo.spec.models.MonitorModel`).

```yaml
monitor:
  log: runs/monitor.jsonl   # JSONL log, one line per update (null: no log)
  window: 20                # steps over which trends (proxy vs gold) are fitted
  saturation: 0.5           # alarm: share of a reward's scores within `margin` of a bound of its score_range
  margin: 0.01              # "near a bound": within this fraction of the score range's width
  inseparable: 0.5          # alarm: share of groups whose scores cannot be told apart
  conflict: -0.5            # alarm: Pearson correlation of two rewards of one split below this
  divergence: 0.25          # alarm: train total rising and an eval reward falling, both by more than this
                            # many per-sample standard deviations over the window
```
Every threshold may be null (that alarm is off); the defaults are the values above, ``log: null``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MonitorSettings:
    """The monitor's log path and alarm thresholds (None: that alarm is off); see the module docstring."""

    log: str | None = None
    window: int = 20
    saturation: float | None = 0.5
    margin: float = 0.01
    inseparable: float | None = 0.5
    conflict: float | None = -0.5
    divergence: float | None = 0.25


def parse_monitor(raw: Any) -> MonitorSettings:
    """Validate a ``monitor:`` mapping (None: the defaults) against its declaration
    (:class:`rewardzoo.spec.models.MonitorModel`); :class:`ConfigError` names ``monitor.<key>``."""
    if raw is None:
        return MonitorSettings()
    if isinstance(raw, MonitorSettings):
        return raw
    from .models import MonitorModel, validate

    return MonitorSettings(**validate(MonitorModel, raw, prefix=("monitor",)).model_dump())
