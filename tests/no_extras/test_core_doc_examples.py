"""The ```python blocks of README.md and docs/: each runs (here, those needing only the core install), or is marked.

A block that cannot run here carries ``<!-- example: not run (needs ...) -->`` on the line above it and its page
says so in a sentence; any other block needs a setup in ``doc_examples.SETUPS``, so a new page cannot skip it.
The blocks needing torch or a trainer run in tests/docs/test_doc_examples.py.
"""

from __future__ import annotations

import re

import pytest

from .doc_examples import NOT_RUN, ROOT, SETUPS, blocks, pages

BLOCKS = list(blocks())
CORE = [b for b in BLOCKS if b.not_run is None and b.key in SETUPS and not SETUPS[b.key].needs]


def test_every_block_runs_or_is_marked_and_its_page_says_so():
    assert len(BLOCKS) >= 10
    keys = {b.key for b in BLOCKS}
    assert not set(SETUPS) - keys, f"setups of blocks that are gone: {sorted(set(SETUPS) - keys)}"
    for block in BLOCKS:
        if block.not_run is None:
            assert block.key in SETUPS, f"{block.page}:{block.line} is neither run (doc_examples.SETUPS) nor marked"
            continue
        assert NOT_RUN.match(block.not_run), f"{block.page}:{block.line}: malformed marker {block.not_run!r}"
        assert block.key not in SETUPS, f"{block.page}:{block.line} is marked not run but has a setup"
        prose = re.sub(r"<!--.*?-->", "", (ROOT / block.page).read_text(encoding="utf-8"), flags=re.S)
        assert "not run" in prose, f"{block.page} does not say that an example is not run"


def test_no_python_example_hides_under_another_fence():
    """Only ```python blocks are extracted; ```pycon is doctested on getting-started.md (test_core_doctests)."""
    for path in pages():
        fences = re.findall(r"^\s*```(\w+)", path.read_text(encoding="utf-8"), flags=re.M)
        other = [f for f in fences if f in {"py", "python3", "ipython", "pycon"}]
        allowed = ["pycon"] if path.name == "getting-started.md" else []
        assert other in ([], allowed), f"{path.relative_to(ROOT)} has ```{other} blocks that no test runs"


@pytest.mark.parametrize("block", CORE, ids=lambda b: b.key)
def test_the_core_block_runs(block, tmp_path):
    from .doc_examples import run

    run(block, tmp_path)
