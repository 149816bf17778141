"""A user's first hour with the command line (issue 50, item 6), each run as a user runs it: ``python -m
rewardzoo.cli`` in a folder outside the checkout (under ``scripts/test``: the installed package).

``--version``; ``list`` filtered by kind, family, installed code and downloaded weights; ``load_config`` taking a
shipped config's name as the command line does; ``score``'s one-line summary on stderr with stdout clean; the
report naming a constant reward as why there is nothing to correlate."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from rewardzoo.registry import builtin


def _cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rewardzoo.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_version(tmp_path):
    import rewardzoo

    out = _cli(tmp_path, "--version")
    assert out.returncode == 0 and out.stdout.strip() == f"rewardzoo {rewardzoo.__version__}", out


def test_list_filters(tmp_path):
    """Each filter keeps exactly the cards it names (compared with the registry's own records)."""
    every = builtin()  # the shipped cards: what a fresh `rewardzoo list` process sees (not rewards registered here)
    out = _cli(tmp_path, "list", "--json", "--kind", "groupwise", "--family", "group")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    want = {
        n for n, e in every.items() if e.kind == "groupwise" and e.implementation.startswith("rewardzoo.rewards.group.")
    }
    assert {r["name"] for r in rows} == want != set()
    assert all(r["family"] == "group" and "weights" not in r for r in rows)  # --json looks for weights on request

    out = _cli(tmp_path, "list", "--json", "--downloaded", "--family", "group")  # the family keeps it to seconds
    rows = json.loads(out.stdout)
    assert rows and all(r["installed"] and r["weights"] in ("yes", "not needed") for r in rows)
    # the group rewards that download nothing and whose code is here are all ready, and only installed ones listed
    from rewardzoo.registry import extra_installed

    ready = {n for n in want if not every[n].download and extra_installed(every[n].extra, every[n].add_ons)}
    assert ready <= {r["name"] for r in rows}

    out = _cli(tmp_path, "list", "--installed", "--modality", "image", "--no-weights")
    assert out.returncode == 0, out.stderr
    names = {line.split()[0] for line in out.stdout.splitlines()[2:]}
    assert names == {n for n, e in every.items() if e.modality == "image" and extra_installed(e.extra, e.add_ons)}
    assert "installed:" in out.stderr and "weights:" in out.stderr  # the legend goes to stderr, not the table

    bad = _cli(tmp_path, "list", "--family", "nope")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_load_config_takes_a_shipped_config_name(tmp_path, monkeypatch):
    import rewardzoo
    from rewardzoo.core.resolve import resolve_config

    monkeypatch.chdir(tmp_path)
    assert rewardzoo.load_config("demo") == resolve_config("demo")  # what `rewardzoo score demo` reads
    (tmp_path / "demo").write_text("rewards: [jpeg_compressibility]\n")  # a file of that name wins, as on the CLI
    assert [s.name for s in rewardzoo.load_config("demo").rewards] == ["jpeg_compressibility"]
    with pytest.raises(rewardzoo.ConfigError, match="not found"):
        rewardzoo.load_config("demo_typo")


@pytest.fixture
def same_images(tmp_path):
    """Four copies of one image: every reward of the config is constant on them."""
    pixels = np.random.default_rng(0).integers(0, 256, (24, 24, 3), dtype=np.uint8)
    lines = []
    for i in range(4):
        Image.fromarray(pixels).save(tmp_path / f"{i}.png")
        lines.append(json.dumps({"image": f"{i}.png", "prompt": "p"}))
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "c.yaml").write_text("rewards: [jpeg_compressibility, jpeg_incompressibility]\n")
    return tmp_path


def test_score_prints_one_summary_line_and_keeps_stdout_clean(same_images):
    out = _cli(same_images, "score", "c.yaml", "--input", "m.jsonl", "--out", "s.jsonl")
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""  # a pipe gets nothing but what it asked for
    line = out.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"rewardzoo: scored 4 rows with 2 rewards \(jpeg_compressibility, jpeg_incompressibility\) in [0-9.]+ s: "
        r"wrote s\.jsonl",
        line,
    ), line
    assert len((same_images / "s.jsonl").read_text().splitlines()) == 4
    quiet = _cli(same_images, "score", "c.yaml", "--input", "m.jsonl", "--out", "q.jsonl", "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == quiet.stderr == "", quiet


def test_the_report_names_a_constant_reward(same_images):
    """Both rewards are constant on copies of one image: the report says so, not "too few scores"."""
    pytest.importorskip("matplotlib", reason="the report extra")
    out = _cli(same_images, "score", "c.yaml", "--input", "m.jsonl", "--out", "s.jsonl", "--report", "r.html")
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1].endswith("wrote s.jsonl and r.html")
    html = (same_images / "r.html").read_text("utf-8")
    note = html[html.index('id="correlation"') :].split("</section>", 1)[0]
    kb = json.loads((same_images / "s.jsonl").read_text().splitlines()[0])["rewards"]["jpeg_incompressibility"]
    assert (
        "jpeg_compressibility: constant" in note and f"jpeg_incompressibility: constant, every score {kb:.6g}" in note
    )
    assert "fewer than 3" not in note
