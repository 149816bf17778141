"""A reward is one unit: its module, its card and its registration, and nothing else (issue 48, item 1).

A throwaway reward is written as a temporary plugin package (a module, its card, an entry point in the group
``rewardzoo.rewards``), installed with pip into a temporary folder, and a subprocess with that folder on its path
shows that ``rewardzoo list``, ``rewardzoo card``, the documentation build (``scripts/build_docs.py --page``, the page
the site renders from a card), ``rewardzoo plan`` and ``rewardzoo score`` all see it, while no file of the
installed rewardzoo package (or of the checkout's docs) changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rewardzoo

ROOT = Path(__file__).resolve().parents[2]
NAME = "vowel_share"

CARD = textwrap.dedent(f"""\
    ---
    name: {NAME}
    summary: "share of vowels among the prompt's letters (a throwaway reward)"
    modality: text
    kind: pointwise
    extra: null
    higher_is_better: true
    score_range: [0.0, 1.0]
    download: false
    license: MIT
    reference:
      repository: https://example.invalid/throwaway-reward
    ---

    # {NAME}

    ## What it measures
    The vowels among the prompt's letters, as a share: `score = vowels / letters` (0 without letters).

    ## How to configure
    ```yaml
    rewards:
      - name: {NAME}
    ```
    """)

MODULE = textwrap.dedent("""\
    from rewardzoo.rewards.base import Inputs, PointwiseReward


    class VowelShare(PointwiseReward):
        \"\"\"The share of vowels among a prompt's letters (its facts are in its card).\"\"\"

        inputs = Inputs(("prompt",))

        def __call__(self, prompt, **_):
            out = []
            for text in prompt:
                letters = [c for c in text.lower() if c.isalpha()]
                out.append(sum(c in "aeiou" for c in letters) / len(letters) if letters else 0.0)
            return out
    """)

PYPROJECT = textwrap.dedent(f"""\
    [build-system]
    requires = ["setuptools>=68"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "throwaway-reward"
    version = "0.1"

    [project.entry-points."rewardzoo.rewards"]
    {NAME} = "throwaway_reward.reward:VowelShare"

    [tool.setuptools]
    packages = ["throwaway_reward", "throwaway_reward.model_cards"]

    [tool.setuptools.package-data]
    "throwaway_reward.model_cards" = ["*.md"]
    """)


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` (compiled files aside): size and modification time."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture(scope="module")
def unit(tmp_path_factory):
    root = tmp_path_factory.mktemp("unit")
    src = root / "src"
    (src / "throwaway_reward" / "model_cards").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "throwaway_reward" / "__init__.py").write_text("")
    (src / "throwaway_reward" / "reward.py").write_text(MODULE)
    (src / "throwaway_reward" / "model_cards" / "__init__.py").write_text("")
    (src / "throwaway_reward" / "model_cards" / f"{NAME}.md").write_text(CARD)
    site = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(site), src],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    package = Path(rewardzoo.__file__).parent
    watched = {"package": (package, _snapshot(package)), "docs": (ROOT / "docs", _snapshot(ROOT / "docs"))}
    yield root, env
    for what, (folder, before) in watched.items():
        assert _snapshot(folder) == before, f"adding a plugin reward changed files of the {what} ({folder})"


def _run(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rewardzoo.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_list_shows_it(unit):
    _, env = unit
    out = _run(env, "list", "--json")
    assert out.returncode == 0, out.stderr
    row = {r["name"]: r for r in json.loads(out.stdout)}[NAME]
    assert row["implementation"] == "throwaway_reward.reward:VowelShare" and row["score_range"] == [0.0, 1.0]
    assert row["source"] == "plugin throwaway-reward"


def test_card_prints_it(unit):
    _, env = unit
    out = _run(env, "card", NAME)
    assert out.returncode == 0 and out.stdout == CARD, out.stderr


def test_the_docs_build_renders_its_page(unit):
    _, env = unit
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_docs.py"), "--page", NAME],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    page = out.stdout
    assert page.splitlines()[1] == f"# {NAME}"
    assert "| score range | [0, 1], higher is better |" in page
    assert "| family | a plugin's (`throwaway_reward.reward:VowelShare`) |" in page
    assert "The vowels among the prompt's letters, as a share" in page and "## How to configure" in page


def test_plan_counts_it(unit):
    _, env = unit
    out = _run(env, "plan", NAME, "--json")
    assert out.returncode == 0, out.stderr
    models = json.loads(out.stdout)["models"]
    assert [m["reward_model"] for m in models] == [NAME]


def test_score_runs_it(unit):
    root, env = unit
    manifest = root / "m.jsonl"
    manifest.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ("aeiou", "xyz", "a b", "12")))
    out = _run(env, "score", NAME, "-i", str(manifest), "-o", str(root / "o.jsonl"), "-q")
    assert out.returncode == 0, out.stderr
    scores = [json.loads(line)["rewards"][NAME] for line in (root / "o.jsonl").read_text().splitlines()]
    assert scores == [1.0, 0.0, 0.5, 0.0]
