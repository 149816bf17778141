"""Joinable outputs (issue 50): a manifest's ``id`` and ``metadata`` reach every output row unchanged, the rewards'
extras with ``--extras`` (JSONL and Parquet, resumed or not), and the ids are checked (unique, all or none).

Run as a user runs the command: from a folder that is neither the data's nor the checkout's, paths relative."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from rewardzoo.cli import main
from rewardzoo.errors import InputError
from rewardzoo.jobs import read_input
from rewardzoo.spec.sample import Sample, field_names

LINES = [
    {"id": "a", "prompt": "an owl", "metadata": {"seed": 1, "tags": ["x", "y"]}},
    {"id": 7, "prompt": "quiet night"},  # its 'vowels' extra is not reported (NaN)
    {"id": 2.5, "prompt": "sea", "metadata": '{"raw": "text as given"}'},
    {"id": True, "prompt": "a long prompt", "metadata": {"nested": {"k": None}}},
]
CONFIG = "rewards:\n  - name: words\n    reward_model: tests.no_extras.rewards:Spelled\n    batch_size: 2\n"


def _vowels(text: str) -> float:
    return float(len(re.findall("[aeiou]", text)))


def _score(*args) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["score", *map(str, args), "-q"])
    return code, err.getvalue()


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def job(tmp_path, monkeypatch):
    """A manifest (a blank line after its first line) and a config in data/; the working folder is elsewhere/."""
    data = tmp_path / "data"
    data.mkdir()
    text = json.dumps(LINES[0]) + "\n\n" + "".join(json.dumps(x) + "\n" for x in LINES[1:])
    (data / "m.jsonl").write_text(text)
    (data / "c.yaml").write_text(CONFIG)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return Path("../data/c.yaml"), Path("../data/m.jsonl")


def test_ids_metadata_and_extras_reach_each_row_unchanged(job):
    config, manifest = job
    assert _score(config, "-i", manifest, "-o", "with.jsonl", "--extras")[0] == 0
    assert _score(config, "-i", manifest, "-o", "without.jsonl")[0] == 0
    with_extras, without = _rows(Path("with.jsonl")), _rows(Path("without.jsonl"))
    assert len(with_extras) == len(LINES)
    for line, row, plain in zip(LINES, with_extras, without):
        assert row["id"] == line["id"] and type(row["id"]) is type(line["id"])
        assert row.get("metadata", "absent") == line.get("metadata", "absent")  # a mapping stays one, text stays text
        assert row["rewards"] == {"words": float(len(line["prompt"]))} and row["applied"] == ["words"]
        expected = {"shout": line["prompt"].upper()}
        if "quiet" not in line["prompt"]:
            expected["vowels"] = _vowels(line["prompt"])
        assert row["extras"] == {"words": expected}
        assert "extras" not in plain and plain == {k: v for k, v in row.items() if k != "extras"}
    # the id is the manifest's, never a sample's: rewards cannot receive it, and a Sample still refuses it
    assert "id" not in field_names()
    with pytest.raises(InputError, match="field 'id': unknown field"):
        Sample.from_dict({"id": 1, "prompt": "p"})


def test_rows_without_ids_are_named_by_their_index_not_their_line(job, tmp_path):
    config, _ = job
    manifest = tmp_path / "data" / "plain.jsonl"
    manifest.write_text('{"prompt": "a"}\n\n{"prompt": "b"}\n{"prompt": "c", "metadata": {"m": 1}}\n')
    assert _score(config, "-i", manifest, "-o", "o.jsonl")[0] == 0
    rows = _rows(Path("o.jsonl"))
    assert [r["id"] for r in rows] == [0, 1, 2] and rows[2]["metadata"] == {"m": 1} and "metadata" not in rows[0]


@pytest.mark.parametrize(
    "ids, match",
    [
        (["a", "b", "a"], r"line 3, field 'id': 'a' is also the id of line 1; ids must be unique"),
        ([1, 2, 1.0], r"line 3, field 'id': 1\.0 is also the id of line 1"),  # one number
        (["a", None, "c"], r"line 2, field 'id': missing, while line 1 has one"),
        ([None, "b"], r"line 1, field 'id': missing, while line 2 has one"),
        (["a", {"k": 1}], r"line 2, field 'id': must be a JSON scalar .* got an object"),
        (["a", [1]], r"line 2, field 'id': must be a JSON scalar .* got an array"),
    ],
)
def test_bad_ids_are_input_errors_naming_the_lines(tmp_path, ids, match):
    manifest = tmp_path / "m.jsonl"
    lines = [{"prompt": f"p{k}", **({"id": i} if i is not None else {})} for k, i in enumerate(ids)]
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(InputError, match=match):
        read_input(manifest)


def test_true_and_one_are_two_ids_and_a_duplicate_writes_nothing(job, tmp_path):
    config, _ = job
    manifest = tmp_path / "data" / "m2.jsonl"
    manifest.write_text('{"id": true, "prompt": "a"}\n{"id": 1, "prompt": "b"}\n')
    assert [r for r in read_input(manifest).ids or []] == [True, 1]
    manifest.write_text('{"id": "x", "prompt": "a"}\n{"id": "y", "prompt": "b"}\n{"id": "x", "prompt": "c"}\n')
    code, err = _score(config, "-i", manifest, "-o", "o.jsonl")
    assert code == 2 and "line 3, field 'id': 'x' is also the id of line 1" in err and not Path("o.jsonl").exists()


def test_parquet_output_holds_the_rows_of_the_jsonl_output(job):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    config, manifest = job
    assert _score(config, "-i", manifest, "-o", "o.jsonl", "--extras")[0] == 0
    assert _score(config, "-i", manifest, "-o", "o.parquet", "--extras")[0] == 0
    table = pq.read_table("o.parquet")
    assert table.column_names == ["id", "words", "total", "applied", "index", "extras", "metadata"]
    assert table.column("id").to_pylist() == ['"a"', "7", "2.5", "true"]  # mixed kinds: each id's JSON text
    for row, line in zip(table.to_pylist(), _rows(Path("o.jsonl"))):
        assert row["words"] == line["rewards"]["words"] and row["applied"] == line["applied"]
        assert {k: v for k, v in row["extras"]["words"].items() if v is not None} == line["extras"]["words"]
        meta = line.get("metadata")
        assert row["metadata"] == (meta if meta is None or isinstance(meta, str) else json.dumps(meta))
    # ids of one kind keep their type
    (Path("../data") / "s.jsonl").write_text('{"id": "q", "prompt": "a"}\n{"id": "r", "prompt": "b"}\n')
    assert _score(config, "-i", "../data/s.jsonl", "-o", "s.parquet")[0] == 0
    assert pq.read_table("s.parquet").column("id").to_pylist() == ["q", "r"]
    assert "extras" not in pq.read_table("s.parquet").column_names


def test_a_resumed_run_writes_the_rows_of_an_uninterrupted_one_with_or_without_extras_before(job, tmp_path):
    _, manifest = job
    armed = tmp_path / "armed"
    tripping = tmp_path / "data" / "trip.yaml"
    tripping.write_text(CONFIG + f"    kwargs: {{armed: {json.dumps(str(armed))}, trip: sea}}\n")
    assert _score(tripping, "-i", manifest, "-o", "whole.jsonl", "--extras", "--chunk-size", 1)[0] == 0
    for first in ([], ["--extras"]):
        armed.touch()
        code, err = _score(tripping, "-i", manifest, "-o", "o.jsonl", "--chunk-size", 1, *first)
        assert code == 2 and "the 2 rows scored so far are kept" in err, err
        armed.unlink()
        code, err = _score(tripping, "-i", manifest, "-o", "o.jsonl", "--chunk-size", 1, "--extras", "--resume")
        assert code == 0 and "not kept" not in err, err
        assert Path("o.jsonl").read_bytes() == Path("whole.jsonl").read_bytes()


def test_table_rows_take_their_ids_from_an_id_column_and_keep_their_metadata(tmp_path):
    from rewardzoo.jobs.inputs import rows_of_records

    records = [
        {"id": "a", "prompt": "x", "metadata": {"k": 1}},
        {"id": "b", "prompt": "y", "metadata": None},
    ]
    rows = rows_of_records(records, tmp_path)
    assert [rows.carried(i) for i in range(2)] == [{"id": "a", "metadata": {"k": 1}}, {"id": "b"}]
    assert rows.samples[0].metadata == '{"k": 1}' and "id" not in rows.rows[0]  # the sample's, as JSON text
    with pytest.raises(InputError, match=r"row 1, field 'id': 'a' is also the id of row 0"):
        rows_of_records([records[0], {**records[1], "id": "a"}], tmp_path)
    with pytest.raises(InputError, match=r"row 1, field 'id': missing, while row 0 has one"):
        rows_of_records([records[0], {**records[1], "id": None}], tmp_path)  # a null cell: no id


def test_a_parquet_out_is_refused_before_scoring_without_pyarrow_or_with_a_reward_named_like_a_column(
    job, tmp_path, monkeypatch
):
    import importlib.util

    config, manifest = job
    clash = tmp_path / "data" / "clash.yaml"
    clash.write_text(CONFIG.replace("name: words", "name: id"))
    code, err = _score(clash, "-i", manifest, "-o", "o.parquet")
    assert code == 2 and "reward 'id' has the name of a column of the Parquet output" in err, err
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    code, err = _score(config, "-i", manifest, "-o", "o.parquet")
    assert code == 2 and "a .parquet --out needs pyarrow" in err and not Path("o.parquet").exists()
