"""A third-party package that ships one reward class plus its model card, installed as a real distribution.

The package is built from a temp dir and installed with pip into a target folder; a subprocess with that
folder on ``PYTHONPATH`` is a Python environment with the plugin installed (no change to this one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

CARD = textwrap.dedent("""\
    ---
    name: word_count
    summary: "words in the prompt, lower is better"
    modality: text
    kind: pointwise
    extra: null
    higher_is_better: false
    score_range: [0.0, 20.0]
    download: false
    license: MIT
    reference:
      repository: https://example.invalid/zoo-plugin-demo
    ---

    # word_count

    ## What it measures
    The number of whitespace-separated words in the prompt.

    ## How to configure
    ```yaml
    rewards:
      - name: word_count
    ```
    """)

REWARD = textwrap.dedent("""\
    from rewardzoo.rewards.base import Inputs, PointwiseReward


    class WordCount(PointwiseReward):
        \"\"\"Score = number of words of the prompt (a plugin's reward; its facts are in its card).\"\"\"

        inputs = Inputs(("prompt",))

        def __call__(self, prompt, **_):
            return [float(len(p.split())) for p in prompt]
    """)

PYPROJECT = textwrap.dedent("""\
    [build-system]
    requires = ["setuptools>=68"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "zoo-plugin-demo"
    version = "0.1"

    [project.entry-points."rewardzoo.rewards"]
    word_count = "zoo_plugin_demo.reward:WordCount"

    [tool.setuptools]
    packages = ["zoo_plugin_demo", "zoo_plugin_demo.model_cards"]

    [tool.setuptools.package-data]
    "zoo_plugin_demo.model_cards" = ["*.md"]
    """)


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("plugin")
    src = root / "src"
    (src / "zoo_plugin_demo" / "model_cards").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "zoo_plugin_demo" / "__init__.py").write_text("")
    (src / "zoo_plugin_demo" / "reward.py").write_text(REWARD)
    (src / "zoo_plugin_demo" / "model_cards" / "__init__.py").write_text("")
    (src / "zoo_plugin_demo" / "model_cards" / "word_count.md").write_text(CARD)
    site = root / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return root, env


def _run(env, *args, code: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "rewardzoo.cli", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def test_plugin_shows_up_in_list_with_the_metadata_of_its_card(plugin_env):
    _, env = plugin_env
    out = _run(env, "list", "--json")
    assert out.returncode == 0, out.stderr
    row = {r["name"]: r for r in json.loads(out.stdout)}["word_count"]
    assert row["modality"] == "text" and row["higher_is_better"] is False and row["score_range"] == [0.0, 20.0]
    assert row["implementation"] == "zoo_plugin_demo.reward:WordCount" and row["source"] == "plugin zoo-plugin-demo"
    assert row["summary"] == "words in the prompt, lower is better"
    table = _run(env, "list", "--modality", "text").stdout
    assert "word_count" in table and "clip_score" not in table


def test_plugin_card_is_printed(plugin_env):
    _, env = plugin_env
    out = _run(env, "card", "word_count")
    assert out.returncode == 0 and out.stdout == CARD


def test_listing_a_plugin_does_not_import_it(plugin_env):
    _, env = plugin_env
    out = _run(env, code="import sys, rewardzoo; rewardzoo.list_rewards(); print('zoo_plugin_demo' in sys.modules)")
    assert out.stdout.strip() == "False", out.stderr


def test_plugin_card_facts_drive_scoring(plugin_env):
    root, env = plugin_env
    manifest = root / "m.jsonl"
    rows = [{"prompt": p, "group_id": 0} for p in ("a b c", "a", "a b")] + [{"prompt": "w " * 30}]
    manifest.write_text("\n".join(json.dumps(r) for r in rows[:3]) + "\n")
    config = root / "c.yaml"
    config.write_text(
        "rewards:\n  - word_count\n  - name: rank\n    reward_model: group_rank\n    kwargs: {base: word_count}\n"
    )
    out = _run(env, "score", str(config), "-i", str(manifest), "-o", str(root / "o.jsonl"), "-q")
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in (root / "o.jsonl").read_text().splitlines()]
    assert [r["rewards"]["word_count"] for r in records] == [3.0, 1.0, 2.0]
    assert [r["rewards"]["rank"] for r in records] == [0.0, 1.0, 0.5]  # lower is better: fewest words ranks top
    by_name = _run(env, "score", "word_count", "-i", str(manifest), "-o", str(root / "o2.jsonl"), "-q")
    assert by_name.returncode == 0, by_name.stderr  # the card's example config
    manifest.write_text(json.dumps(rows[3]) + "\n")
    out = _run(env, "score", str(config), "-i", str(manifest), "-o", str(root / "o3.jsonl"), "-q")
    assert out.returncode != 0 and "outside its declared score_range [0.0, 20.0]" in out.stderr
