"""Reading a :class:`~rewardzoo.monitor.RewardMonitor` JSONL log back: series per metric, alarms, inseparable groups.

One log line per update: ``{"step": int, "split": "train" | "eval", "metrics": {name: number},
"alarms": [{"name", "value", "threshold", "message"}], "inseparable_groups": {reward: [group, ...]}}``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..shared.files import jsonl_objects, regular_file

LINE_KEYS = ("step", "split", "metrics", "alarms", "inseparable_groups")


class MonitorLogError(InputError):
    """A monitor log line is not what :class:`~rewardzoo.monitor.RewardMonitor` writes; names file and line."""

    def __init__(self, message: str, *, path: str | os.PathLike | None = None, line: int | None = None):
        self.path, self.line = path, line
        where = f"monitor log '{path}'" + (f", line {line}" if line is not None else "") if path is not None else ""
        super().__init__(f"{where}: {message}" if where else message)


@dataclass(frozen=True)
class LoggedAlarm:
    """An alarm as logged, with the step and split of its line."""

    step: int
    split: str
    name: str
    value: float
    threshold: float
    message: str


@dataclass
class MonitorLog:
    """A monitor log as series: ``series[(split, metric)]`` = (steps, values) in file order; every alarm;
    ``inseparable[(split, reward)]`` = (step, group ids) for each line that listed some."""

    path: Path
    lines: int = 0
    series: dict[tuple[str, str], tuple[list[int], list[float]]] = field(default_factory=dict)
    alarms: list[LoggedAlarm] = field(default_factory=list)
    inseparable: dict[tuple[str, str], list[tuple[int, list[str]]]] = field(default_factory=dict)

    def rewards(self, split: str) -> list[str]:
        """Rewards of ``split`` with a logged mean, in order of first appearance (``total`` included)."""
        out = []
        for s, metric in self.series:
            prefix = f"{split}/"
            if s == split and metric.startswith(prefix) and metric.endswith("/mean"):
                name = metric[len(prefix) : -len("/mean")]
                if "/" not in name:
                    out.append(name)
        return out

    def get(self, split: str, metric: str) -> tuple[list[int], list[float]]:
        return self.series.get((split, metric), ([], []))


def is_monitor_log(path: str | os.PathLike) -> bool:
    """Whether the first non-blank line of ``path`` looks like a monitor log line (``step`` and ``metrics``)."""
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                if raw.strip():
                    row = json.loads(raw)
                    return isinstance(row, dict) and "step" in row and "metrics" in row
    except (OSError, ValueError, RecursionError):
        return False
    return False


def read_monitor_log(path: str | os.PathLike) -> MonitorLog:
    """Read and check a monitor log; :class:`MonitorLogError` names the file and line of the first problem."""
    path = regular_file(path, "monitor log", MonitorLogError)
    log = MonitorLog(path)
    for lineno, row in jsonl_objects(path, lambda message, line: MonitorLogError(message, path=path, line=line)):
        _add(log, _checked(row, path, lineno), path, lineno)
    if log.lines == 0:
        raise MonitorLogError("is empty; RewardMonitor writes one line per update", path=path)
    return log


def _checked(row: dict[str, Any], path: Path, lineno: int) -> dict[str, Any]:
    missing = [k for k in LINE_KEYS if k not in row]
    unknown = [k for k in row if k not in LINE_KEYS]
    if missing or unknown:
        raise MonitorLogError(
            f"a monitor line has the keys {', '.join(LINE_KEYS)}; missing {missing}, unknown {unknown}",
            path=path,
            line=lineno,
        )
    step = row["step"]
    if isinstance(step, bool) or not isinstance(step, int):
        raise MonitorLogError(f"'step' must be an integer, got {step!r}", path=path, line=lineno)
    if row["split"] not in ("train", "eval"):
        raise MonitorLogError(f"'split' must be 'train' or 'eval', got {row['split']!r}", path=path, line=lineno)
    if (
        not isinstance(row["metrics"], dict)
        or not isinstance(row["alarms"], list)
        or not isinstance(row["inseparable_groups"], dict)
    ):
        raise MonitorLogError("'metrics' and 'inseparable_groups' are objects, 'alarms' a list", path=path, line=lineno)
    return row


def _number(value: Any, where: str, path: Path, lineno: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise MonitorLogError(f"{where} must be a finite number, got {value!r:.40}", path=path, line=lineno)
    return float(value)


def _add(log: MonitorLog, row: dict[str, Any], path: Path, lineno: int) -> None:
    step, split = row["step"], row["split"]
    log.lines += 1
    for name, value in row["metrics"].items():
        steps, values = log.series.setdefault((split, str(name)), ([], []))
        steps.append(step)
        values.append(_number(value, f"metric '{name}'", path, lineno))
    for alarm in row["alarms"]:
        if not isinstance(alarm, dict) or not isinstance(alarm.get("name"), str):
            raise MonitorLogError("each alarm is an object with a 'name'", path=path, line=lineno)
        log.alarms.append(
            LoggedAlarm(
                step,
                split,
                alarm["name"],
                _number(alarm.get("value"), "alarm value", path, lineno),
                _number(alarm.get("threshold"), "alarm threshold", path, lineno),
                str(alarm.get("message", "")),
            )
        )
    for reward, groups in row["inseparable_groups"].items():
        if not isinstance(groups, list):
            raise MonitorLogError(f"inseparable_groups['{reward}'] must be a list of group ids", path=path, line=lineno)
        log.inseparable.setdefault((split, str(reward)), []).append((step, [str(g) for g in groups]))
