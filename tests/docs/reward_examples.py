"""The Python example of each reward page (``## Python example``, written by scripts/build_docs.py from the card):
what it needs, and the tiny model that stands in for a download; and the serving guide's client example, run
against the server its page starts (tests/docs/test_doc_examples.py starts it).

An example whose reward downloads nothing runs as the page shows it. Of the rewards that download weights, one per
model family runs with a tiny random-weight model in place of the download (:data:`TINY`: the example's ``entry``
line gets a ``model_path`` to it, nothing else changes); the others are marked ``not run`` on their page, which says
so. Core-only examples run in tests/no_extras (test_core_doc_examples), the others in tests/docs
(test_doc_examples). This module imports only the core.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "rewards"
HEADING = "## Python example"


def _tiny_clip(tmp: Path) -> str:
    from rewardzoo.testing import tiny_open_clip_dir

    return str(tiny_open_clip_dir(tmp / "clip"))


def _tiny_clap(tmp: Path) -> str:
    from rewardzoo.testing import tiny_clap_dir

    return str(tiny_clap_dir(tmp / "clap"))


def _tiny_sequence_model(tmp: Path) -> str:
    from rewardzoo.testing import tiny_text_models

    return str(tiny_text_models(tmp / "models")["gpt2_cls"])


def _tiny_qwen_vl(tmp: Path) -> str:
    from rewardzoo.testing.vlm import tiny_vlm_dir

    return str(tiny_vlm_dir(tmp / "qwen2_5_vl", "qwen2_5_vl"))


#: reward -> a function writing its tiny stand-in under a folder and returning the ``model_path``: one reward per
#: model family that downloads (image, video, audio, text, vision-language judges)
TINY: dict[str, Callable[[Path], str]] = {
    "clip_score": _tiny_clip,
    "video_clip_score": _tiny_clip,
    "clap_score": _tiny_clap,
    "sequence_reward": _tiny_sequence_model,
    "vqascore": _tiny_qwen_vl,
}


def example_index(page: Path) -> int | None:
    """The index (among the page's ```python blocks) of its Python example, None when it has none."""
    text = page.read_text(encoding="utf-8")
    at = text.find(f"\n{HEADING}\n")
    if at < 0:
        return None
    return len(re.findall(r"^```python$", text[:at], flags=re.M))


def with_model_path(code: str, model_path: str) -> str:
    """The example's code with ``entry["model_path"]`` set right before the processor is built (the only change)."""
    build = "\ntrain, _ = rewardzoo.build_processors("
    assert build in code, "the example builds no processor"
    return code.replace(build, f'\nentry["model_path"] = {model_path!r}{build}', 1)


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
