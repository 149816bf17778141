"""The ```python blocks of README.md and docs/ that need torch, a model extra or a trainer, run (tiny models).

The extraction, the markers and each page's setup: tests/no_extras/doc_examples.py (its core blocks and the
check that every block runs or is marked: tests/no_extras/test_core_doc_examples.py).
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.no_extras.doc_examples import SETUPS, blocks, run

EXTRA = [b for b in blocks() if b.not_run is None and b.key in SETUPS and SETUPS[b.key].needs]


@pytest.mark.parametrize("block", EXTRA, ids=lambda b: b.key)
def test_the_block_runs(block, tmp_path):
    missing = [m for m in SETUPS[block.key].needs if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{block.key} needs {missing}")
    run(block, tmp_path)
