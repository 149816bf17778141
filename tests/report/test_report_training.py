"""`rewardzoo report` over a RewardMonitor log: curves per reward (train and eval), the alarms on the timeline,
the groups that turned inseparable; the page checked by its DOM and in headless Chromium."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from rewardzoo.cli import commands as cli
from rewardzoo.monitor import RewardMonitor
from rewardzoo.monitor.log import MonitorLogError, read_monitor_log
from rewardzoo.report import build_training_report
from rewardzoo.report.errors import ReportConfigError
from rewardzoo.report.screenshot import render_png

from ..commands import require_chromium
from .dom import parse, table_values

pytest.importorskip("matplotlib")

STEPS, N, GROUP, PLANT, WINDOW = 60, 64, 8, 30, 8
FLAT_FROM = {"g2": 20, "g5": 45}  # the proxy scores these groups' members equally from that step on


def _result(values: dict, groups: list[str]) -> SimpleNamespace:
    rewards = {k: np.asarray(v, np.float32) for k, v in values.items()}
    total = np.sum([v.astype(np.float64) for v in rewards.values()], axis=0).astype(np.float32)
    return SimpleNamespace(rewards=rewards, total=total, group_ids=groups)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    log = tmp_path_factory.mktemp("run") / "monitor.jsonl"
    rng = np.random.default_rng(0)
    groups = [f"g{i // GROUP}" for i in range(N)]
    with RewardMonitor(
        settings={"log": str(log), "window": WINDOW, "inseparable": None, "conflict": None, "saturation": None}
    ) as mon:
        for step in range(STEPS):
            proxy = 0.1 * step + rng.normal(size=N)
            for g, start in FLAT_FROM.items():
                if step >= start:
                    proxy[[i for i, k in enumerate(groups) if k == g]] = 1.0
            mon.update(_result({"proxy": proxy}, groups), step)
            if step % 2 == 0:  # evaluated every other step
                gold = (0.05 * step if step < PLANT else 0.05 * PLANT - 0.08 * (step - PLANT)) + rng.normal(size=N)
                mon.update(_result({"gold": gold}, groups), step, split="eval")
        alarms = list(mon.alarms)
    return SimpleNamespace(log=log, alarms=alarms, groups=groups)


def test_the_log_reads_back_as_series(run):
    log = read_monitor_log(run.log)
    assert log.rewards("train") == ["proxy", "total"] and log.rewards("eval") == ["gold", "total"]
    steps, means = log.get("train", "train/proxy/mean")
    assert steps == list(range(STEPS))
    lines = [json.loads(line) for line in run.log.read_text().splitlines()]
    assert means == [line["metrics"]["train/proxy/mean"] for line in lines if line["split"] == "train"]
    assert [(a.step, a.name) for a in log.alarms] == [(a.step, a.name) for a in run.alarms]


def test_the_page_shows_curves_alarms_and_inseparable_groups(run, tmp_path):
    out = build_training_report(run.log, out=tmp_path / "t.html")
    text = out.read_text(encoding="utf-8")
    root, errors = parse(text)
    assert errors == []
    ids = {n.attrs.get("id") for n in root.iter() if n.attrs.get("id")}
    assert {"alarms", "trends", "groups"} <= ids
    assert any(i and i.startswith("curve-") and i.endswith("proxy") for i in ids)
    assert any(i and i.startswith("curve-") and i.endswith("gold") for i in ids)
    divergence = [a for a in run.alarms if a.name == "divergence/gold"]
    assert len(divergence) == 1 and PLANT <= divergence[0].step <= PLANT + WINDOW
    alarm_rows = table_values(root.find("section", id="alarms").find("table"))
    assert [(int(r[0]), r[2]) for r in alarm_rows] == [(a.step, a.name) for a in run.alarms]
    group_rows = table_values(root.find("section", id="groups").find("table"))
    first = {(r[0], r[1], r[2]): int(r[3]) for r in group_rows}
    count = {(r[0], r[1], r[2]): int(r[4]) for r in group_rows}
    assert first[("train", "proxy", "g2")] == 20 and first[("train", "proxy", "g5")] == 45
    assert first[("train", "total", "g2")] == 20
    assert {g for (_, _, g) in first} == set(FLAT_FROM)
    assert count[("train", "proxy", "g2")] == STEPS - 20 and count[("train", "proxy", "g5")] == STEPS - 45
    assert "<script" not in text and "http://" not in text and "https://" not in text
    assert text.count("<svg") >= 5


def test_the_cli_recognises_a_training_log(run, tmp_path, capsys):
    out = tmp_path / "cli.html"
    assert cli.main(["report", str(run.log), "-o", str(out)]) == 0
    assert "Training report" in out.read_text(encoding="utf-8")
    assert cli.main(["report", str(run.log), "--manifest", "m.jsonl", "-o", str(out)]) == 2
    assert "training log" in capsys.readouterr().err


def test_bad_logs_name_the_file_and_line(run, tmp_path):
    lines = run.log.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    row = json.loads(lines[1])
    row["split"] = "test"
    bad.write_text(lines[0] + "\n" + json.dumps(row) + "\n")
    with pytest.raises(MonitorLogError, match=r"line 2.*split"):
        read_monitor_log(bad)
    bad.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(MonitorLogError, match="line 2"):
        read_monitor_log(bad)
    with pytest.raises(ReportConfigError):
        from argparse import Namespace

        from rewardzoo.report import cmd_report

        cmd_report(
            Namespace(
                scores=str(run.log), manifest=None, config="demo", compare=None, agreement=None, out="x.html", top=8
            )
        )


def test_the_training_report_renders_cleanly(run, tmp_path):
    from PIL import Image

    require_chromium()
    html = build_training_report(run.log, out=tmp_path / "t.html")
    shot = render_png(html, tmp_path / "t.png", timeout=120)
    assert shot.console == [] and shot.requests == [], (shot.console, shot.requests)
    img = np.asarray(Image.open(shot.png).convert("RGB"))
    assert (img > 245).all(axis=-1).mean() < 0.97
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50
