"""The generated documentation is up to date, and the benchmark results it is generated from are sound.

The site's reward pages, reward table and Benchmarks page, each model card's Speed figures and the runs table
of benchmarks/README.md are written by ``scripts/build_docs.py`` from the cards' front matter and
``benchmarks/results/*.json``; a hand edit (or a new result not yet propagated) fails here. The README stays a
short landing page whose quick start CI runs, with links into ``docs/`` that resolve.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
CARDS = {p.stem for p in (ROOT / "rewardzoo" / "model_cards").glob("*.md")}


def test_generated_docs_are_up_to_date():
    proc = subprocess.run(
        [sys.executable, "scripts/build_docs.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, (
        "generated docs are out of date; run `python scripts/build_docs.py`\n"
        + proc.stdout[-4000:]
        + proc.stderr[-4000:]
    )


def _figures():
    for path in RESULTS:
        for fig in json.loads(path.read_text(encoding="utf-8"))["figures"]:
            yield path.name, fig


def test_every_benchmark_script_has_results():
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert scripts <= {p.stem for p in RESULTS}, "a benchmark script has no results file"


def test_figure_ids_are_unique():
    seen: dict[str, str] = {}
    for name, fig in _figures():
        assert fig["id"] not in seen, f"figure id {fig['id']!r} is in both {seen[fig['id']]} and {name}"
        seen[fig["id"]] = name
    assert seen, "no benchmark figures"


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_results_follow_the_schema(path):
    run = json.loads(path.read_text(encoding="utf-8"))
    # scripts/scale_check.py writes benchmarks/results/scale.json (the name); the others are bench_*.py
    assert run["script"] == ("scale_check.py" if path.stem == "scale" else path.stem + ".py")
    assert isinstance(run["date"], str) and isinstance(run["machine"], str) and run["figures"]
    assert run["torch"] is None or isinstance(run["torch"], str)
    for fig in run["figures"]:
        assert isinstance(fig["id"], str) and fig["id"] and isinstance(fig["title"], str) and fig["title"]
        for side in (fig["value"], fig["baseline"]):
            if side is not None:
                assert set(side) == {"label", "value", "unit"}, fig["id"]
                assert side["value"] is None or isinstance(side["value"], (int, float)), fig["id"]
        assert fig["value"] is not None, fig["id"]
        assert fig["ratio"] is None or isinstance(fig["ratio"], (int, float)), fig["id"]
        assert fig["ratio"] is None or fig["ratio_label"], f"{fig['id']}: a ratio needs a ratio_label"
        assert fig["goal"] is None or isinstance(fig["goal"], str), fig["id"]
        assert isinstance(fig["rewards"], list), fig["id"]


def test_figure_rewards_name_existing_cards():
    for name, fig in _figures():
        unknown = [r for r in fig["rewards"] if r not in CARDS]
        assert not unknown, f"{name}: figure {fig['id']!r} names rewards without a model card: {unknown}"


def _quick_start_blocks() -> list[list[str]]:
    """The ```bash blocks of the README's Quick start section, as lists of lines."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return [block.split("```", 1)[0].strip().splitlines() for block in section.split("```bash\n")[1:]]


def test_the_quick_start_is_two_commands_and_ci_runs_the_second():
    blocks = _quick_start_blocks()
    assert [len(b) for b in blocks] == [1, 1], "the quick start is two one-line commands"
    (demo,), (tests,) = blocks
    assert "rewardzoo demo" in demo and "pip install" in demo
    assert tests == "scripts/test"
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    commands = [line for line in ci if line and not line.startswith(("#", "set ", "cd "))]
    assert commands == ["exec scripts/test"], "CI runs the README's test command and nothing else"
    # scripts/test step 3 runs the first command, read from the README the same way
    printed = subprocess.run(
        ["bash", str(ROOT / "scripts" / "test"), "--print-quickstart"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    assert printed == demo


README = ROOT / "README.md"


def test_the_readme_is_a_short_landing_page_whose_links_resolve():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= 12 * 1024, f"README.md is {len(text.encode())} bytes; the guides belong in docs/"
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local), "the README links into the documentation site"
    for link in local:
        assert (ROOT / link).is_file(), f"README.md links to {link}, which does not exist"
    for heading in ("## Quick start", "## Install", "## Documentation", "## Licence"):
        assert f"\n{heading}\n" in text, heading


def test_the_site_lists_every_reward_and_every_guide_it_has():
    """Each card has its generated page, linked from the table; every page under docs/ is in mkdocs.yml's nav
    (generated pages through build_docs, the others by hand), so none is built without a way to reach it."""
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    table = (ROOT / "docs" / "rewards" / "index.md").read_text(encoding="utf-8")
    for name in CARDS:
        assert f"rewards/{name}.md" in pages and f"]({name}.md)" in table, name
    missing = sorted(p for p in pages if not re.search(rf"(^|[\s:]){re.escape(p)}\s*$", nav, re.M))
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"
