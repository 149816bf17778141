"""The agreement section of `rewardzoo report`: the page of a `rewardzoo evaluate --out` folder holds, beside the
score sections, a table of each reward's agreement (the numbers of agreement.json, checked against NumPy on the
score file) and a plot of the rewards side by side; bad agreement files name the file."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("scipy")

from rewardzoo.cli import main
from rewardzoo.jobs.evaluation.run import EvaluateJob, run_evaluate
from rewardzoo.report import ReportInputError, build_report, evaluation_inputs
from tests.no_extras.test_core_evaluate import NEGATED, ORACLE, _pairs

from .dom import parse


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("evaluated")
    data = _pairs(folder, n=24, ties=3, seed=5)
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    for i, row in enumerate(rows):  # people disagree with brightness on every fourth untied pair
        if row["preferred"] != "tie" and i % 4 == 0:
            row["preferred"] = "b" if row["preferred"] == "a" else "a"
    data.write_text("".join(json.dumps(x) + "\n" for x in rows))
    job = EvaluateJob({"rewards": [ORACLE, NEGATED]}, str(data), "pairs", out=str(folder / "out"), quiet=True)
    run_evaluate(job)
    return folder / "out", rows


def test_the_report_of_an_evaluate_folder_holds_the_agreement_table_and_plot(evaluated, tmp_path, capsys):
    out, rows = evaluated
    assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    assert "wrote" in capsys.readouterr().out
    root, errors = parse((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert errors == []
    # the score report's own sections are there, and the agreement section with its nav link
    assert [s.attrs["data-reward"] for s in root.find_all("section", class_="reward")] == ["bright", "dark"]
    section = root.find("section", id="agreement")
    assert root.find_all("a", href="#agreement")
    assert section.find_all("svg")  # the plot of the rewards side by side
    table = {}
    for tr in section.find_all("tr"):
        cells = tr.find_all("td")
        if cells and cells[0].get_text().strip() in ("bright", "dark"):
            table[cells[0].get_text().strip()] = [c.attrs.get("data-value") for c in cells[2:6]]
    # an independent computation from the score file: accuracy over the untied pairs
    scores = [json.loads(x)["rewards"] for x in (out / "scores.jsonl").read_text().splitlines()]
    human = np.array([{"a": 1, "b": -1, "tie": 0}[r["preferred"]] for r in rows])
    for name in ("bright", "dark"):
        s = np.array([x[name] for x in scores])
        diff = (s[0::2] - s[1::2])[human != 0]
        want = float(np.mean(np.sign(diff) == human[human != 0]))
        value, low, high, n = table[name]
        assert float(value) == pytest.approx(want) and int(float(n)) == int((human != 0).sum())
        assert float(low) <= float(value) <= float(high)
    assert 0 < float(table["bright"][0]) < 1 and float(table["dark"][0]) == pytest.approx(1 - float(table["bright"][0]))


def test_agreement_option_beside_a_score_file_and_bad_agreement_files(evaluated, tmp_path, capsys):
    out, _ = evaluated
    files = evaluation_inputs(out)
    page = build_report(files["scores_path"], agreement=files["agreement"], out=tmp_path / "a.html")
    assert 'id="agreement"' in page.read_text(encoding="utf-8")
    plain = build_report(files["scores_path"], out=tmp_path / "plain.html").read_text(encoding="utf-8")
    assert 'id="agreement"' not in plain
    bad = tmp_path / "agreement.json"
    bad.write_text(json.dumps({"data": "x", "rewards": []}))
    with pytest.raises(ReportInputError, match=r"agreement.json'.*not the agreement.json.*format"):
        build_report(files["scores_path"], agreement=bad, out=tmp_path / "b.html")
    saved = json.loads(files["agreement"].read_text())
    del saved["rewards"][1]["ci_low"]
    bad.write_text(json.dumps(saved))
    assert main(["report", str(files["scores_path"]), "--agreement", str(bad), "--out", str(tmp_path / "c.html")])
    assert "agreement.json': rewards[1] lacks ci_low" in capsys.readouterr().err
    bad.write_text("{not json")
    with pytest.raises(ReportInputError, match="not JSON"):
        build_report(files["scores_path"], agreement=bad, out=tmp_path / "d.html")
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "e.html")])
    assert "not a `rewardzoo evaluate --out` folder" in capsys.readouterr().err
    with pytest.raises(ReportInputError, match="is --agreement; write the report to another file"):
        build_report(files["scores_path"], agreement=files["agreement"], out=files["agreement"])
