"""The training monitor: per-step reward statistics, alarms for the signs of reward hacking, a JSONL log.

``monitor`` — :class:`RewardMonitor` (``rewardzoo.RewardMonitor``), a step's result to metrics and alarms;
``log`` — the log read back (for ``rewardzoo report``). Its settings are :mod:`rewardzoo.spec.monitor`.

May import :mod:`rewardzoo.core` and every layer below; NumPy only, no model backend.
"""

from __future__ import annotations

from ..spec.monitor import MonitorSettings, parse_monitor
from .monitor import RewardMonitor

__all__ = ["MonitorSettings", "RewardMonitor", "parse_monitor"]
