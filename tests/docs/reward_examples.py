"""The Python example of each reward page (``## Python example``, written by scripts/build_docs.py from the card):
what it needs, and the tiny model that stands in for a download; and the serving guide's client example, run
against the server its page starts (tests/docs/test_doc_examples.py starts it).

An example whose reward downloads nothing runs as the page shows it. Every reward that downloads weights (but
``remote``, which needs a server: the serving guide's example runs one) runs with a tiny random-weight stand-in for
the download (tests/docs/stand_ins.py: the example's ``entry`` gets its ``model_path`` and ``kwargs`` right before
the processor is built, nothing else changes; the page names the stand-in). Core-only examples run in
tests/no_extras (test_core_doc_examples), the others in tests/docs (test_doc_examples). This module imports only
the core.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "rewards"
HEADING = "## Python example"


def example_index(page: Path) -> int | None:
    """The index (among the page's ```python blocks) of its Python example, None when it has none."""
    text = page.read_text(encoding="utf-8")
    at = text.find(f"\n{HEADING}\n")
    if at < 0:
        return None
    return len(re.findall(r"^```python$", text[:at], flags=re.M))


def _needs(name: str) -> tuple[str, ...]:
    from rewardzoo.catalog.extras import extra_modules
    from rewardzoo.registry import info

    entry = info(name)
    assert entry is not None, name
    return tuple(dict.fromkeys([*extra_modules().get(entry.extra or "", ()), *entry.add_ons]))


def _check(name: str) -> Callable[[dict[str, Any]], None]:
    def check(ns: dict[str, Any]) -> None:
        import numpy as np

        scores = ns["result"].rewards[ns["entry"]["name"]]
        assert scores.shape == (len(ns["samples"]),) and np.isfinite(scores).all(), (name, scores)

    return check


#: The serving guide's client block and the modules it and its server need.
SERVING = "docs/guides/serving.md#0"
SERVE_NEEDS = ("numpy", "starlette", "uvicorn", "msgpack")


def _check_serving(ns: dict[str, Any]) -> None:
    import numpy as np

    scores = ns["result"].rewards["jpeg_compressibility"]
    assert scores.shape == (2,) and np.isfinite(scores).all() and np.isfinite(ns["result"].total).all()


def setups(setup: Callable[..., Any]) -> dict[str, Any]:
    """``doc_examples.SETUPS`` entries (built with its ``Setup``) of every reward page's example that is not marked
    not run: the modules its reward's extra needs, nothing to prepare (the example generates its inputs)."""
    out = {}
    for page in sorted(PAGES.glob("*.md")):
        index = example_index(page)
        if index is None:
            continue
        after = page.read_text(encoding="utf-8").split(f"\n{HEADING}\n", 1)[1].split("```python", 1)[0]
        if "<!-- example: not run" in after:
            continue
        name = page.stem
        needs = _needs(name)
        out[f"docs/rewards/{page.name}#{index}"] = setup(needs, lambda tmp: {}, _check(name))
    out[SERVING] = setup(SERVE_NEEDS, lambda tmp: {}, _check_serving)
    return out
