"""The ```python blocks of README.md and docs/ that need torch, a model extra or a trainer, run (tiny models).

The extraction, the markers and each page's setup: tests/no_extras/doc_examples.py (its core blocks and the
check that every block runs or is marked: tests/no_extras/test_core_doc_examples.py). A reward page's example whose
reward downloads weights runs with a tiny random-weight model as its entry's ``model_path``
(tests/docs/reward_examples.py).
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from tests.no_extras.doc_examples import SETUPS, blocks, run

from .reward_examples import TINY, example_index, with_model_path

EXTRA = [b for b in blocks() if b.not_run is None and b.key in SETUPS and SETUPS[b.key].needs]


def _tiny_swap(block, tmp_path):
    """The block as run: a reward page's example with a tiny model in place of the download."""
    from pathlib import Path

    page = Path(block.page)
    if page.parent.as_posix() != "docs/rewards" or page.stem not in TINY:
        return block
    from .reward_examples import PAGES

    if example_index(PAGES / page.name) != block.index:
        return block
    return dataclasses.replace(block, code=with_model_path(block.code, TINY[page.stem](tmp_path / "tiny")))


@pytest.mark.parametrize("block", EXTRA, ids=lambda b: b.key)
def test_the_block_runs(block, tmp_path):
    missing = [m for m in SETUPS[block.key].needs if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{block.key} needs {missing}")
    run(_tiny_swap(block, tmp_path), tmp_path)


def test_every_reward_page_has_an_example_and_the_tiny_ones_swap_only_the_path():
    from .reward_examples import PAGES

    pages = [p for p in sorted(PAGES.glob("*.md")) if p.name != "index.md"]
    assert pages and all(example_index(p) is not None for p in pages), [
        p.name for p in pages if example_index(p) is None
    ]
    code = 'entry = {"name": "clip_score"}\ntrain, _ = rewardzoo.build_processors({"rewards": [entry]})\n'
    swapped = 'entry = {"name": "clip_score"}\nentry["model_path"] = \'/t\'\ntrain, _ = rewardzoo.build_processors('
    assert with_model_path(code, "/t").startswith(swapped)
