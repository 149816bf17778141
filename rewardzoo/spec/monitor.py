"""The ``monitor:`` section of a reward config, parsed strictly (unknown keys and bad values name the field).

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

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, did_you_mean
from ..shared.options import positive_int


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


KEYS = ("log", "window", "saturation", "margin", "inseparable", "conflict", "divergence")
_SHARES = ("saturation", "inseparable")


def parse_monitor(raw: Any) -> MonitorSettings:
    """Validate a ``monitor:`` mapping (None: the defaults); :class:`ConfigError` names ``monitor.<key>``."""
    if raw is None:
        return MonitorSettings()
    if isinstance(raw, MonitorSettings):
        return raw
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"'monitor' must be a mapping with keys {', '.join(KEYS)}, got {type(raw).__name__}", field="monitor"
        )
    for key in raw:
        if key not in KEYS:
            raise ConfigError(f"unknown key{did_you_mean(str(key), KEYS)}", field=f"monitor.{key}")
    out: dict[str, Any] = {}
    log = raw.get("log")
    if log is not None and not isinstance(log, (str, os.PathLike)):
        raise ConfigError(f"must be a file path or null, got {type(log).__name__}", field="monitor.log")
    out["log"] = None if log is None else os.fspath(log)
    if "window" in raw:
        out["window"] = positive_int(raw["window"], "monitor.window")
        if out["window"] < 3:
            raise ConfigError(
                f"must be at least 3 steps (a trend needs 3 points), got {out['window']}", field="monitor.window"
            )
    for key in _SHARES:
        if key in raw:
            out[key] = _threshold(raw[key], key, 0.0, 1.0)
    if "margin" in raw:
        margin = _threshold(raw["margin"], "margin", 0.0, 0.5)
        if margin is None or margin == 0.0:
            raise ConfigError("must be a number in (0, 0.5]", field="monitor.margin")
        out["margin"] = margin
    if "conflict" in raw:
        out["conflict"] = _threshold(raw["conflict"], "conflict", -1.0, 1.0)
    if "divergence" in raw:
        out["divergence"] = _threshold(raw["divergence"], "divergence", 0.0, math.inf)
    return MonitorSettings(**out)


def _threshold(value: Any, key: str, lo: float, hi: float) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not lo <= value <= hi
    ):
        bounds = f"from {lo:g} to {hi:g}" if math.isfinite(hi) else f"at least {lo:g}"
        raise ConfigError(f"must be a number {bounds} or null, got {value!r}", field=f"monitor.{key}")
    return float(value)
