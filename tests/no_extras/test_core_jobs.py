"""The job layer: one config resolver, one output check and atomic writer, input rows with their labels, one
error relocation API, and nothing importing the CLI."""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import rewardzoo
from rewardzoo.cli import main
from rewardzoo.core.resolve import config_source, load_config, resolve_config
from rewardzoo.errors import InputError, RewardExecutionError, RewardOutputError, RewardZooError, UnknownConfigError
from rewardzoo.jobs import ScoreJob, check_output, plan_job, read_input, write_jsonl, write_scores_parquet, write_text
from rewardzoo.jobs.output import write_atomically
from rewardzoo.spec.config import RewardConfig

PACKAGE = Path(rewardzoo.__file__).parent
RECORDS = [
    {"rewards": {"jpeg": 1.5}, "total": 1.5, "applied": ["jpeg"]},
    {"rewards": {"jpeg": None}, "total": None, "applied": []},
]


@pytest.fixture
def images(tmp_path):
    (tmp_path / "img").mkdir()
    rows = []
    for i in range(4):
        Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(tmp_path / "img" / f"{i}.png")
        rows.append({"image": f"img/{i}.png", "prompt": f"p{i}", "dataset": "t2i" if i != 2 else "t2j"})
    return tmp_path, rows


@pytest.fixture
def umask_002():
    old = os.umask(0o002)
    yield 0o664
    os.umask(old)


# ----------------------------------------------------------------------------------------------- resolver
def test_the_resolver_reads_every_kind_of_source(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("rewards: [jpeg_compressibility]\n")
    assert config_source(str(path)) == str(path)
    assert config_source("demo").name == "demo.yaml"
    assert config_source("jpeg_compressibility")["rewards"][0]["kwargs"] == {"quality": 95}  # the card's example
    assert config_source("jpeg_compressibility", reward="entry") == {"rewards": [{"name": "jpeg_compressibility"}]}
    loaded = load_config({"rewards": ["jpeg_compressibility"]})
    assert resolve_config(loaded) is loaded
    assert isinstance(resolve_config({"rewards": ["jpeg_compressibility"]}), RewardConfig)
    assert resolve_config(str(path)).rewards[0].name == "jpeg_compressibility"


def test_an_unknown_config_suggests_rewards_and_shipped_configs(capsys, tmp_path):
    with pytest.raises(
        UnknownConfigError,
        match="neither a file, a shipped config nor a reward name "
        r"\(did you mean 'jpeg_compressibility'",
    ):
        config_source("jpeg_compresibility")
    with pytest.raises(UnknownConfigError, match="did you mean 'demo'"):
        resolve_config("dmeo")
    assert main(["score", "jpeg_compresibility", "-i", str(tmp_path / "m.jsonl"), "-o", str(tmp_path / "o")]) == 2
    assert "did you mean 'jpeg_compressibility'" in capsys.readouterr().err


def test_every_entry_point_takes_a_reward_name():
    from rewardzoo.core.api import build_processors
    from rewardzoo.integrations.common import specs_of

    assert [s.name for s in specs_of("jpeg_compressibility")] == ["jpeg_compressibility"]
    train, _ = build_processors("jpeg_compressibility")
    assert [s.name for s in train.specs] == ["jpeg_compressibility"]


# ------------------------------------------------------------------------------------- output and writer
def test_every_output_gets_the_mode_of_a_new_file(tmp_path, umask_002):
    write_jsonl(tmp_path / "s.jsonl", RECORDS)
    write_text(tmp_path / "r.html", "<p>é</p>")
    pytest.importorskip("pyarrow")
    write_scores_parquet(tmp_path / "s.parquet", RECORDS, ["jpeg"])
    for name in ("s.jsonl", "r.html", "s.parquet"):
        assert (tmp_path / name).stat().st_mode & 0o777 == umask_002, name
    assert (tmp_path / "r.html").read_bytes() == "<p>é</p>".encode()
    assert [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()] == RECORDS


def test_a_failed_write_leaves_the_old_file_and_no_partial_one(tmp_path):
    out = tmp_path / "s.jsonl"
    out.write_text("old\n")
    with pytest.raises(TypeError):  # the second record cannot be written: the first was, into the temp file
        write_jsonl(out, [RECORDS[0], {"bad": object()}])
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]

    def half(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "new.html", half)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_an_output_that_is_an_input_is_refused_before_scoring(images, capsys):
    folder, rows = images
    manifest = folder / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = manifest.read_bytes()
    with pytest.raises(RewardZooError, match="is --input; write the scores to another file"):
        check_output(manifest, {"--input": manifest})
    with pytest.raises(RewardZooError, match="is the score file; write the report to another file"):
        check_output(folder / "x" / ".." / "m.jsonl", {"the score file": manifest}, holds="the report")
    assert main(["score", "jpeg_compressibility", "-i", str(manifest), "-o", str(manifest)]) == 2
    assert "is --input" in capsys.readouterr().err and manifest.read_bytes() == before
    out = folder / "o.jsonl"
    assert main(["score", "jpeg_compressibility", "-i", str(manifest), "-o", str(out), "--report", str(out)]) == 2
    assert f"--report '{out}' is --out; write the report to another file" in capsys.readouterr().err
    assert main(["score", "jpeg_compressibility", "-i", str(manifest), "-o", str(out), "--report", str(manifest)]) == 2
    assert f"--report '{manifest}' is --input; write the report to another file" in capsys.readouterr().err
    assert manifest.read_bytes() == before and not out.exists()


# ------------------------------------------------------------------------------------------- input rows
def test_parquet_rows_are_named_rows_not_lines(images, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    folder, rows = images
    table = folder / "m.parquet"
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in rows[0]}), table)
    config = folder / "c.yaml"
    config.write_text("rewards:\n  - name: jpeg_compressibility\n    applicable_datasets: [t2i]\n")
    got = read_input(table, tables=True)
    assert got.labels == ["row 0", "row 1", "row 2", "row 3"] and got.samples[1].prompt == "p1"
    job = ScoreJob(config=str(config), input=str(table), out=str(tmp_path / "o.jsonl"), engine="ray")
    with pytest.raises(RewardZooError, match=r"^row 2, field 'dataset': 't2j' matches no reward"):
        plan_job(job)
    manifest = folder / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(RewardZooError, match=r"^line 3, field 'dataset'"):
        plan_job(ScoreJob(config=str(config), input=str(manifest), out=str(tmp_path / "o.jsonl")))
    bad = folder / "bad.parquet"
    pq.write_table(pa.table({"image": ["img/0.png", "img/1.png"], "prompt": ["a", "b"], "group_id": [1.5, 2.5]}), bad)
    with pytest.raises(RewardZooError, match=r"^row 0, field 'group_id'"):
        read_input(bad, tables=True)


def test_the_local_run_returns_the_records_it_wrote(images, tmp_path):
    from rewardzoo.jobs import run_local

    folder, rows = images
    manifest = folder / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = run_local(
        ScoreJob(
            config="jpeg_compressibility", input=str(manifest), out=str(tmp_path / "o.jsonl"), quiet=True, chunk_size=3
        )
    )
    assert run.plan.chunks == [[0, 1, 2], [3]]
    assert [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()] == run.records


def test_the_report_of_records_in_memory_is_the_report_of_the_files(images, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    pytest.importorskip("scipy")
    from rewardzoo.jobs import run_local
    from rewardzoo.report import build_report, build_report_from_records, plots

    folder, rows = images
    manifest = folder / "m.jsonl"
    manifest.write_text("".join(json.dumps({**r, "group_id": i // 2}) + "\n" for i, r in enumerate(rows)))
    run = run_local(
        ScoreJob(config="jpeg_compressibility", input=str(manifest), out=str(tmp_path / "o.jsonl"), quiet=True)
    )
    monkeypatch.setattr(plots, "_COUNTER", itertools.count())  # the SVG ids, as in a fresh process
    from_files = build_report(
        tmp_path / "o.jsonl", manifest=manifest, config="jpeg_compressibility", out=tmp_path / "a.html"
    )
    monkeypatch.setattr(plots, "_COUNTER", itertools.count())
    in_memory = build_report_from_records(
        run.records,
        scores_path=tmp_path / "o.jsonl",
        manifest=manifest,
        rows=run.plan.rows,
        config="jpeg_compressibility",
        out=tmp_path / "b.html",
    )
    date = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d \w+")  # the minute each was written
    assert date.sub(b"", from_files.read_bytes()) == date.sub(b"", in_memory.read_bytes())


# ----------------------------------------------------------------------------------------------- errors
def test_every_error_names_its_samples_one_way():
    assert InputError("x", field="image", sample=2).samples == (2,)
    assert InputError("x").samples is None and RewardZooError("x").samples is None
    moved = InputError("bad", field="image", sample=1).located(reward="r", indices=[10, 11])
    assert moved.samples == (11,) and str(moved) == "sample 11, field 'image', reward 'r': bad"
    assert moved.with_label(lambda i: f"line {i + 1}") == "line 12, field 'image', reward 'r': bad"
    out = RewardOutputError("nan", reward="r", inputs=[1]).located(indices=[5, 6, 7])
    assert out.samples == (6,) and out.with_label(lambda i: f"row {i}") == "reward 'r': nan (row 6)"
    run = RewardExecutionError("boom").located(reward="r", indices=[3, 4])
    assert run.samples == (3, 4) and str(run) == "reward 'r': boom (samples 3, 4)"
    named = RewardExecutionError("inner", reward="q", samples=[0])
    assert named.located(reward="r", indices=[9]) is named  # an inner call's samples are kept
    assert RewardZooError("plain").with_label(str) == "plain"


# ------------------------------------------------------------------------------------------ the layers
def _imported_modules(path: Path) -> set[str]:
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if path.name == "__init__.py":
        package += ".__init__"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("rewardzoo."):
            found.add(node.value)  # import_module("rewardzoo...") targets, lazy-attribute tables, entry points
    return found


def test_nothing_imports_the_cli():
    """Nothing outside ``rewardzoo/cli/`` imports the command parser (the demo and lint are the report's too)."""
    commands = {"rewardzoo.cli", "rewardzoo.cli.commands", "rewardzoo.cli.main"}
    importers = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "cli" not in p.relative_to(PACKAGE).parts[:1] and commands & _imported_modules(p)
    ]
    assert importers == []


def test_the_job_layer_imports_no_front_end():
    front = ("rewardzoo.cli", "rewardzoo.serve", "rewardzoo.ray", "rewardzoo.report", "rewardzoo.integrations")
    bad = {
        str(p.relative_to(PACKAGE)): sorted(m for m in _imported_modules(p) if m.startswith(front))
        for p in (PACKAGE / "jobs").glob("*.py")
    }
    assert {k: v for k, v in bad.items() if v} == {}
