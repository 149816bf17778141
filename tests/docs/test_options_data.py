"""Each reward's typed options as the docs and ``rewardzoo card`` show them: ``rewardzoo/catalog/options.json``
is what ``scripts/gen_options.py`` makes of the rewards' Options classes now, and each generated reward page has
the options table of its reward."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = json.loads((ROOT / "rewardzoo" / "catalog" / "options.json").read_text(encoding="utf-8"))


def test_options_json_is_what_the_rewards_declare():
    pytest.importorskip("torch")  # the reward modules (every extra: the dev environment)
    done = subprocess.run(
        [sys.executable, "scripts/gen_options.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    from rewardzoo.registry import resolve

    for name, found in DATA.items():  # and independently of the script: the classes' own declarations
        options = resolve(name).Options
        own = json.loads(json.dumps({"schema": options.model_json_schema(), "rows": options.rows()}))
        assert {k: found[k] for k in ("schema", "rows")} == own


@pytest.mark.parametrize("name", sorted(DATA))
def test_each_reward_page_has_its_options_table(name):
    page = (ROOT / "docs" / "rewards" / f"{name}.md").read_text(encoding="utf-8")
    assert page.count("\n## Options\n") == 1
    section = page.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    assert [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")] == [
        row["name"] for row in DATA[name]["rows"]
    ]
