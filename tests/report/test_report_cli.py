"""The command line: the subparser `add_report_arguments` builds, `rewardzoo report` and `score --report`; the page
they write holds what the score files say (counts, means, best rows, the comparison), re-computed here with NumPy
from the files' values."""

from __future__ import annotations

import argparse
import json
import re

import numpy as np
import pytest

from rewardzoo.cli import commands as cli
from rewardzoo.errors import RewardZooError
from rewardzoo.registry import info
from rewardzoo.report import DEFAULT_TOP, add_report_arguments, cmd_report


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rewardzoo")
    add_report_arguments(parser.add_subparsers(dest="command").add_parser("report"))
    return parser


def test_the_subparser_runs_the_report(synthetic, tmp_path, capsys):
    args = _parser().parse_args(
        [
            "report",
            str(synthetic.scores),
            "--manifest",
            str(synthetic.manifest),
            "--out",
            str(tmp_path / "r.html"),
            "--compare",
            str(synthetic.other),
            "--top",
            "3",
        ]
    )
    assert args.func is cmd_report and args.top == 3
    assert args.func(args) == 0
    assert "wrote" in capsys.readouterr().out
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    n_rows = len(synthetic.datasets)
    assert _fact(page, "rows") == f"{n_rows:,}" and _fact(page, "rewards") == str(len(synthetic.values))
    for name, x in synthetic.values.items():
        section = _section(page, name)
        if np.isnan(x).all():
            assert "No sample was scored by this reward" in section
            continue
        scored = x[~np.isnan(x)]
        stats = _values(re.search(r'<table class="stats">.*?<tr><td>all</td>(.*?)</tr>', section, re.S).group(1))
        assert stats[1] == len(scored) and stats[2] == pytest.approx(scored.mean(), rel=1e-9)
        assert stats[3] == pytest.approx(scored.std(), rel=1e-9)
    # the best and worst rows of a reward with distinct scores, in its direction, three each (--top 3)
    x = synthetic.values["jpeg_compressibility"]
    sign = 1.0 if info("jpeg_compressibility").higher_is_better else -1.0
    order = np.argsort(-sign * np.where(np.isnan(x), -sign * np.inf, x), kind="stable")
    section = _section(page, "jpeg_compressibility")
    assert _rows(section, "best") == [int(r) for r in order[:3]]
    assert _rows(section, "worst") == [int(r) for r in order[~np.isnan(x[order])][::-1][:3]]
    # the comparison: B against A over the rows both scored
    compare = re.search(r'<section id="compare">(.*?)</section>', page, re.S).group(1)
    a, b = synthetic.values["clip_score"], synthetic.other_values["clip_score"]
    both = ~np.isnan(a) & ~np.isnan(b)
    row = _values(re.search(r"<tr><td>clip_score</td>(.*?)</tr>", compare, re.S).group(1))
    assert row[0] == both.sum() and row[1:3] == pytest.approx([a[both].mean(), b[both].mean()], rel=1e-9)
    assert row[3] == pytest.approx(b[both].mean() - a[both].mean(), rel=1e-9, abs=1e-12)


def _fact(page: str, key: str) -> str:
    return re.search(rf"<tr><th>{key}</th><td>(.*?)</td></tr>", page).group(1)


def _section(page: str, name: str) -> str:
    return re.search(rf'<section class="reward" [^>]*data-reward="{name}">(.*?)</section>', page, re.S).group(1)


def _values(row: str) -> list[float]:
    """The exact values of a table row's numeric cells (``data-value``), NaN for an empty one."""
    return [float(v) if v else float("nan") for v in re.findall(r'data-value="([^"]*)"', row)]


def _rows(section: str, kind: str) -> list[int]:
    """The rows of the sample cards under the best or worst heading, in the page's order."""
    start = section.index(f'data-kind="{kind}">')
    end = section.find("<h3>", start)
    cards = section[start : end if end >= 0 else len(section)]
    return [int(r) for r in re.findall(r'<figure class="sample" data-row="(\d+)"', cards)]


def test_defaults():
    args = _parser().parse_args(["report", "s.jsonl"])
    assert (args.out, args.top) == ("report.html", DEFAULT_TOP)
    assert args.manifest is args.config is args.compare is None


def test_errors_are_rewardzoo_errors(tmp_path):
    """cli.main prints a RewardZooError as one line; every bad input must be one."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n", encoding="utf-8")
    args = _parser().parse_args(["report", str(bad), "--out", str(tmp_path / "r.html")])
    with pytest.raises(RewardZooError):
        args.func(args)


def test_rewardzoo_report(synthetic, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli.main(["report", str(synthetic.scores), "-m", str(synthetic.manifest), "-o", str(out)]) == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a cat"}\n', encoding="utf-8")
    assert cli.main(["report", str(bad), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rewardzoo: error: score file") and "line 1" in err and "Traceback" not in err


def test_score_with_report(demo, tmp_path):
    out, html = tmp_path / "s.jsonl", tmp_path / "r.html"
    assert cli.main(["score", "demo", "-i", str(demo.manifest), "-o", str(out), "-q", "--report", str(html)]) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    page = html.read_text(encoding="utf-8")
    assert _fact(page, "rows") == f"{len(records):,}" and _fact(page, "config") == "demo"
    names = list(records[0]["rewards"])
    assert _fact(page, "rewards") == str(len(names)) and "jpeg_compressibility" in names
    for name in names:
        x = np.array([np.nan if r["rewards"][name] is None else r["rewards"][name] for r in records], float)
        section = _section(page, name)
        if np.isnan(x).all():
            continue
        stats = _values(re.search(r'<table class="stats">.*?<tr><td>all</td>(.*?)</tr>', section, re.S).group(1))
        assert stats[1] == (~np.isnan(x)).sum() and stats[2] == pytest.approx(np.nanmean(x), rel=1e-6), name
