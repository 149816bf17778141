"""The training monitor: per-step reward statistics, alarms for the signs of reward hacking, a JSONL log.

:class:`RewardMonitor` (``rewardzoo.RewardMonitor``) takes a config's ``monitor:`` section (parsed strictly in
:mod:`rewardzoo.monitor.settings`) and turns each step's :class:`~rewardzoo.engine.RewardResult` into a flat
dict of metrics; :mod:`rewardzoo.monitor.log` reads the log back (for ``rewardzoo report``). Part of the core
layer: it imports the layers below and the core's config, registry and score statistics, never a front door.
NumPy only; importing it imports no model backend.
"""

from __future__ import annotations

from .monitor import RewardMonitor
from .settings import MonitorSettings, parse_monitor

__all__ = ["MonitorSettings", "RewardMonitor", "parse_monitor"]
