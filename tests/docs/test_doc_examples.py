"""The ```python blocks of README.md and docs/ that need torch, a model extra or a trainer, run (tiny models).

The extraction, the markers and each page's setup: tests/no_extras/doc_examples.py (its core blocks and the
check that every block runs or is marked: tests/no_extras/test_core_doc_examples.py). A reward page's example whose
reward downloads weights runs with a tiny random-weight model as its entry's ``model_path``
(tests/docs/reward_examples.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util

import pytest

from tests.no_extras.doc_examples import SETUPS, blocks, run

from .reward_examples import SERVING, TINY, example_index, with_model_path

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


@contextlib.contextmanager
def _serving_page_server(block, tmp_path, monkeypatch):
    """The serving guide's server, started as its first ```bash block shows (``REWARD_TOKEN=... rewardzoo serve
    rewards.yaml --port 8765 --token-env REWARD_TOKEN``) in the example's folder, on a free port (the client
    block's 8765 becomes that port: the only change), with a ``rewards.yaml`` of ``jpeg_compressibility``."""
    import re
    import secrets
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    from tests.serve.helpers import free_port

    page = (Path(__file__).resolve().parents[2] / block.page).read_text(encoding="utf-8")
    bash = re.search(r"^```bash\n(.*?)^```$", page, flags=re.S | re.M).group(1)
    line = next(x for x in bash.splitlines() if x.startswith("REWARD_TOKEN=") and "--token-env" in x)
    command = line.split("#")[0].split()
    assert command[:3] == ["REWARD_TOKEN=...", "rewardzoo", "serve"], command
    port = free_port()
    args = [str(port) if a == "8765" else a for a in command[3:]]
    (tmp_path / "rewards.yaml").write_text("rewards: [jpeg_compressibility]\n")
    token = secrets.token_hex(8)
    monkeypatch.setenv("REWARD_TOKEN", token)
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rewardzoo.cli", "serve", *args], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2).status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the server was not ready in 120 s"
            time.sleep(0.2)
        yield dataclasses.replace(block, code=block.code.replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.mark.parametrize("block", EXTRA, ids=lambda b: b.key)
def test_the_block_runs(block, tmp_path, monkeypatch):
    missing = [m for m in SETUPS[block.key].needs if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{block.key} needs {missing}")
    if block.key == SERVING:
        with _serving_page_server(block, tmp_path, monkeypatch) as served:
            run(served, tmp_path)
        return
    run(_tiny_swap(block, tmp_path), tmp_path)


def test_the_serving_client_needs_the_token(tmp_path, monkeypatch):
    """Without ``token_env`` the page's client gets 401 from its server: the example's argument is what makes it
    work (the call the page showed before)."""
    if any(importlib.util.find_spec(m) is None for m in SETUPS[SERVING].needs):
        pytest.skip("the serve extra")
    from rewardzoo.errors import RewardZooError

    block = next(b for b in blocks() if b.key == SERVING)
    without = dataclasses.replace(block, code=block.code.replace(', token_env="REWARD_TOKEN"', ""))
    assert without.code != block.code
    with _serving_page_server(without, tmp_path, monkeypatch) as served:
        with pytest.raises(RewardZooError, match="401"):
            run(served, tmp_path)


def test_every_reward_page_has_an_example_and_the_tiny_ones_swap_only_the_path():
    from .reward_examples import PAGES

    pages = [p for p in sorted(PAGES.glob("*.md")) if p.name != "index.md"]
    assert pages and all(example_index(p) is not None for p in pages), [
        p.name for p in pages if example_index(p) is None
    ]
    code = 'entry = {"name": "clip_score"}\ntrain, _ = rewardzoo.build_processors({"rewards": [entry]})\n'
    swapped = 'entry = {"name": "clip_score"}\nentry["model_path"] = \'/t\'\ntrain, _ = rewardzoo.build_processors('
    assert with_model_path(code, "/t").startswith(swapped)
