"""The command line: the subparser `add_report_arguments` builds, and `rewardzoo report` / `score --report`
once rewardzoo/cli/commands.py registers them (skipped until then)."""

from __future__ import annotations

import argparse

import pytest

from rewardzoo.cli import commands as cli
from rewardzoo.errors import RewardZooError
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
    assert (tmp_path / "r.html").is_file() and "wrote" in capsys.readouterr().out


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


def _wired(command: str, option: str | None = None) -> bool:
    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    if command not in sub.choices:
        return False
    return option is None or any(option in a.option_strings for a in sub.choices[command]._actions)


@pytest.mark.skipif(
    not _wired("report"), reason="`rewardzoo report` is not registered in rewardzoo/cli/commands.py yet"
)
def test_rewardzoo_report(synthetic, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli.main(["report", str(synthetic.scores), "-m", str(synthetic.manifest), "-o", str(out)]) == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a cat"}\n', encoding="utf-8")
    assert cli.main(["report", str(bad), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rewardzoo: error: score file") and "line 1" in err and "Traceback" not in err


@pytest.mark.skipif(
    not _wired("score", "--report"), reason="`rewardzoo score --report` is not in rewardzoo/cli/commands.py yet"
)
def test_score_with_report(demo, tmp_path):
    out, html = tmp_path / "s.jsonl", tmp_path / "r.html"
    assert cli.main(["score", "demo", "-i", str(demo.manifest), "-o", str(out), "-q", "--report", str(html)]) == 0
    assert out.is_file() and "jpeg_compressibility" in html.read_text(encoding="utf-8")
