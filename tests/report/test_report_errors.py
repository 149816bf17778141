"""Bad input gives one clear error naming the file and the line, never a traceback from deep inside."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.report import (
    ReportConfigError,
    ReportDependencyError,
    ReportMismatchError,
    ScoreFileError,
    build_report,
)

from .conftest import write_manifest, write_scores

GOOD = {"rewards": {"a": 1.0, "b": None}, "total": 1.0, "applied": ["a"]}


def _lines(tmp_path, *lines, name="s.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines))
    return path


@pytest.mark.parametrize(
    "lines, line, words",
    [
        (
            [json.dumps({"prompt": "a cat", "image": "a.png"})],
            1,
            ["not a rewardzoo score line", "looks like a manifest"],
        ),
        ([json.dumps(GOOD), "{not json"], 2, ["not valid JSON"]),
        ([json.dumps(GOOD), "[1, 2]"], 2, ["must be a JSON object"]),
        ([json.dumps(GOOD), "", json.dumps({**GOOD, "rewards": {"a": 1.0}})], 3, ["differ from the first row"]),
        ([json.dumps({**GOOD, "rewards": {"a": "high", "b": None}})], 1, ["'rewards.a' must be a number or null"]),
        ([json.dumps({**GOOD, "rewards": {"a": True, "b": None}})], 1, ["'rewards.a' must be a number or null"]),
        (['{"rewards": {"a": NaN, "b": null}, "total": null, "applied": []}'], 1, ["'rewards.a' is nan"]),
        ([json.dumps({**GOOD, "total": "x"})], 1, ["'total' must be a number"]),
        ([json.dumps({**GOOD, "applied": ["c"]})], 1, ["'applied' names 'c'"]),
        ([json.dumps({**GOOD, "applied": "a"})], 1, ["'applied' must be a list"]),
        ([json.dumps({**GOOD, "extra": 1})], 1, ["unknown key(s) 'extra'"]),
        ([json.dumps({**GOOD, "rewards": {}})], 1, ["non-empty object"]),
        ([json.dumps(GOOD), b"\xff\xfe"], 2, ["not UTF-8"]),
        (
            [json.dumps(GOOD), '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"],
            2,
            ["nests deeper than the parser allows"],
        ),
    ],
)
def test_a_bad_score_file_names_file_and_line(tmp_path, lines, line, words):
    path = _lines(tmp_path, *lines)
    with pytest.raises(ScoreFileError) as err:
        build_report(path, out=tmp_path / "r.html")
    message = str(err.value)
    assert str(path) in message and f"line {line}" in message, message
    for word in words:
        assert word in message, message
    assert err.value.line == line and isinstance(err.value, InputError)
    assert not (tmp_path / "r.html").exists()


def test_empty_and_missing_score_files(tmp_path):
    with pytest.raises(ScoreFileError, match="is empty"):
        build_report(_lines(tmp_path, "", "  "), out=tmp_path / "r.html")
    with pytest.raises(InputError, match="score file not found"):
        build_report(tmp_path / "missing.jsonl", out=tmp_path / "r.html")
    with pytest.raises(InputError, match="is a directory"):
        build_report(tmp_path, out=tmp_path / "r.html")


def test_ids_on_some_rows_only(tmp_path):
    path = _lines(tmp_path, json.dumps({**GOOD, "id": "x"}), json.dumps(GOOD))
    with pytest.raises(ScoreFileError, match="1 of its 2 rows have an 'id'"):
        build_report(path, out=tmp_path / "r.html")


def test_a_manifest_with_another_number_of_rows(synthetic, tmp_path):
    manifest = write_manifest(tmp_path / "m.jsonl", [{"prompt": "x"}] * 3)
    with pytest.raises(ReportMismatchError) as err:
        build_report(synthetic.scores, manifest=manifest, out=tmp_path / "r.html")
    assert f"has 3 samples but the score file '{synthetic.scores}' has 240 rows" in str(err.value)


def test_a_malformed_manifest_line(synthetic, tmp_path):
    manifest = write_manifest(tmp_path / "m.jsonl", [{"prompt": "x"}, {"promt": "y"}])
    with pytest.raises(InputError) as err:
        build_report(synthetic.scores, manifest=manifest, out=tmp_path / "r.html")
    assert f"manifest '{manifest}': line 2, field 'promt'" in str(err.value)


def test_scores_from_another_manifest_are_caught_by_the_config(demo, tmp_path):
    rows = [json.loads(line) for line in demo.manifest.read_text().splitlines()]
    audio = max(i for i, row in enumerate(rows) if row.get("dataset") == "audio")
    rows[0], rows[audio] = rows[audio], rows[0]  # an audio line where an image was scored
    manifest = write_manifest(demo.folder / "swapped.jsonl", rows)
    with pytest.raises(ReportMismatchError) as err:
        build_report(demo.scores, manifest=manifest, config="demo", out=tmp_path / "r.html")
    assert f"'{demo.scores}', line 1" in str(err.value) and "dataset 'audio'" in str(err.value)


def test_a_config_that_did_not_make_the_scores(synthetic, tmp_path):
    with pytest.raises(ReportConfigError) as err:
        build_report(synthetic.scores, config="demo", out=tmp_path / "r.html")
    assert isinstance(err.value, ConfigError) and "give the config the scores were computed with" in str(err.value)
    with pytest.raises(ReportConfigError, match="neither a file"):
        build_report(synthetic.scores, config="no_such_config", out=tmp_path / "r.html")


def test_compare_files_that_do_not_match(synthetic, tmp_path):
    short = write_scores(tmp_path / "short.jsonl", {k: v[:10] for k, v in synthetic.values.items()})
    with pytest.raises(ReportMismatchError, match="has 240 rows and .* has 10: rows are matched by position"):
        build_report(synthetic.scores, compare=short, out=tmp_path / "r.html")
    unrelated = write_scores(tmp_path / "other.jsonl", {"something_else": np.zeros(240)})
    with pytest.raises(ReportMismatchError, match="share no reward"):
        build_report(synthetic.scores, compare=unrelated, out=tmp_path / "r.html")


def test_compare_by_id(tmp_path):
    a = write_scores(tmp_path / "a.jsonl", {"r": np.array([1.0, 2.0, 3.0])}, [{"id": i} for i in "xyz"])
    b = write_scores(tmp_path / "b.jsonl", {"r": np.array([30.0, 10.0, 20.0])}, [{"id": i} for i in "zxy"])
    page = build_report(a, compare=b, out=tmp_path / "r.html").read_text("utf-8")
    assert "rows matched by id" in page and 'data-value="6.0"' not in page
    assert 'data-value="18.0"' in page  # B - A = 10 - 1, 20 - 2, 30 - 3: mean 18, so ids were matched
    missing = write_scores(tmp_path / "c.jsonl", {"r": np.zeros(3)}, [{"id": i} for i in "xyw"])
    both_sides = r"1 id\(s\) only in .*a.jsonl' \(e.g. 'z'\).*only in .*c.jsonl' \(e.g. 'w'\)"
    with pytest.raises(ReportMismatchError, match=both_sides):
        build_report(a, compare=missing, out=tmp_path / "r.html")
    twice = write_scores(tmp_path / "d.jsonl", {"r": np.zeros(3)}, [{"id": i} for i in "xxy"])
    with pytest.raises(ReportMismatchError, match="line 2: id 'x' is used twice"):
        build_report(a, compare=twice, out=tmp_path / "r.html")


def test_bad_options_and_outputs(synthetic, tmp_path):
    with pytest.raises(ReportConfigError, match="--top must be an integer from 0 to 50"):
        build_report(synthetic.scores, top=-1, out=tmp_path / "r.html")
    with pytest.raises(InputError, match="is the score file"):
        build_report(synthetic.scores, out=synthetic.scores)
    with pytest.raises(InputError, match="is a directory"):
        build_report(synthetic.scores, out=tmp_path)


def test_missing_report_extra(monkeypatch, synthetic, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(ReportDependencyError, match=r"pip install 'rewardzoo\[report\]'"):
        build_report(synthetic.scores, out=tmp_path / "r.html")


@pytest.mark.parametrize("reader", ["manifest", "scores", "monitor log"])
@pytest.mark.parametrize(
    "bad, words",
    [
        (b'{"a": \xe9}', ["is not UTF-8 text", "is 0xe9"]),
        (b"{not json", ["not valid JSON", "at column 2"]),
        (b'["a list"]', ["each line must be a JSON object, got list"]),
    ],
)
def test_every_jsonl_reader_names_the_line_and_the_byte_alike(tmp_path, reader, bad, words):
    from rewardzoo.jobs.manifest import read_manifest
    from rewardzoo.monitor.log import read_monitor_log
    from rewardzoo.report.scores import read_scores

    first = (
        json.dumps({"prompt": "a cat"})
        if reader == "manifest"
        else json.dumps(GOOD)
        if reader == "scores"
        else json.dumps({"step": 0, "split": "train", "metrics": {}, "alarms": [], "inseparable_groups": {}})
    )
    path = _lines(tmp_path, first, "", bad)
    read = {"manifest": read_manifest, "scores": read_scores, "monitor log": read_monitor_log}[reader]
    with pytest.raises(InputError) as err:
        read(path)
    message = err.value.with_label(lambda i: f"line {i}")  # a manifest's error counts lines as samples
    if bad.startswith(b'{"a": \xe9'):  # the offset in the file: the first two lines, then 6 bytes in
        words = [*words, f"byte {len(first) + 2 + 6}"]
    assert "line 3" in message and all(word in message for word in words), message


def test_the_manifest_is_keyed_to_the_score_rows_by_id(tmp_path):
    """Issue 50: a score file with ids (a subset of the manifest's rows, in another order, with the metadata and
    extras `rewardzoo score` copies) is matched to the manifest by id: each card shows its own row's prompt."""
    import html
    import re

    ids = [f"s{k}" for k in range(12)] + [3.5]  # any JSON scalar
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": i, "prompt": f"prompt-{i}"} for i in ids])
    keep = [12, 11, 0, 7, 5, 2, 9, 4]
    values = np.array([float(k) for k in keep])
    carried = [{"id": ids[k], "metadata": {"k": k}, "extras": {"r": {"t": str(k)}}} for k in keep]
    scores = write_scores(tmp_path / "s.jsonl", {"r": values}, carried)
    page = build_report(scores, manifest=manifest, out=tmp_path / "r.html", top=3).read_text("utf-8")
    cards = re.findall(r'<figure class="sample"[^>]*data-id="([^"]+)".*?</figure>', page, re.S)
    assert len(cards) >= 6
    for card in re.finditer(r'<figure class="sample"[^>]*data-id="([^"]+)"(.*?)</figure>', page, re.S):
        row_id = json.loads(html.unescape(card.group(1)))
        assert f"prompt-{row_id}" in card.group(2) and f"id {json.dumps(row_id)}" in html.unescape(card.group(2))
    other = write_manifest(tmp_path / "other.jsonl", [{"id": f"t{k}", "prompt": "p"} for k in range(13)])
    with pytest.raises(ReportMismatchError, match=r"line 1: row id 3.5 is not an id of the manifest"):
        build_report(scores, manifest=other, out=tmp_path / "r.html")
