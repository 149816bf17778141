"""The ```python blocks of README.md and docs/ that need torch, a model extra or a trainer, run (tiny models).

The extraction, the markers and each page's setup: tests/no_extras/doc_examples.py (its core blocks and the
check that every block runs or is marked: tests/no_extras/test_core_doc_examples.py). A reward page's example whose
reward downloads weights runs with a tiny random-weight stand-in for the download set on its ``entry``
(tests/docs/stand_ins.py; every one but ``remote``'s, which needs a server), each built once per session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util

import pytest

from tests.no_extras.doc_examples import SETUPS, blocks, run

from .reward_examples import PAGES, SERVING, example_index
from .stand_ins import STAND_INS, swapped

EXTRA = [b for b in blocks() if b.not_run is None and b.key in SETUPS and SETUPS[b.key].needs]


def _reward(block) -> str | None:
    """The reward whose page's Python example ``block`` is, None for any other block."""
    from pathlib import Path

    page = Path(block.page)
    if page.parent.as_posix() != "docs/rewards" or example_index(PAGES / page.name) != block.index:
        return None
    return page.stem


@pytest.fixture(scope="session")
def stand_in_root(tmp_path_factory):
    """One folder for every stand-in of the session: each is built once, the examples sharing it reuse it."""
    return tmp_path_factory.mktemp("stand_ins")


def _stand_in(block, root, monkeypatch):
    """The block as run: a reward page's example with its stand-in for the download (and the stand-in's
    architecture constants patched in for the test)."""
    import importlib

    name = _reward(block)
    if name not in STAND_INS:
        return block
    swap = STAND_INS[name](root)
    note = " ".join((PAGES / f"{name}.md").read_text(encoding="utf-8").split("## Python example", 1)[1].split())
    named = [k for k in swap.kwargs if f"`{k}" not in note and f"kwargs.{k}" not in note]
    named += [attr for _, attr, _ in swap.patches if attr not in note]
    assert not named, f"{name}'s page does not say its stand-in sets {named}"  # the page says what is changed
    for module, attr, value in swap.patches:
        monkeypatch.setattr(importlib.import_module(module), attr, value())
    return dataclasses.replace(block, code=swapped(block.code, swap))


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
def test_the_block_runs(block, tmp_path, monkeypatch, stand_in_root):
    missing = [m for m in SETUPS[block.key].needs if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{block.key} needs {missing}")
    if block.key == SERVING:
        with _serving_page_server(block, tmp_path, monkeypatch) as served:
            run(served, tmp_path)
        return
    if _reward(block) is None or importlib.util.find_spec("transformers") is None:
        run(block, tmp_path)
        return
    from rewardzoo.rewards.image.iqa_qalign import llama_left_as_found

    with llama_left_as_found():  # pyiqa's import (image_quality) replaces transformers' Llama: put it back after
        run(_stand_in(block, stand_in_root, monkeypatch), tmp_path)


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


def test_every_reward_page_has_an_example_run_with_its_named_stand_in():
    """Every reward page has an example; every downloading reward but ``remote`` has a stand-in here and the
    page names it (build_docs' STAND_INS: the same rewards); the swap adds lines before the processor only."""
    import importlib.util
    from pathlib import Path

    pages = [p for p in sorted(PAGES.glob("*.md")) if p.name != "index.md"]
    assert pages and all(example_index(p) is not None for p in pages), [
        p.name for p in pages if example_index(p) is None
    ]
    spec = importlib.util.spec_from_file_location(
        "build_docs", Path(__file__).resolve().parents[2] / "scripts/build_docs.py"
    )
    build_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_docs)
    assert set(build_docs.STAND_INS) == set(STAND_INS)
    not_run = [b.page for b in blocks() if b.not_run is not None and _reward(b)]
    assert not_run == ["docs/rewards/remote.md"], not_run
    for name in STAND_INS:
        text = (PAGES / f"{name}.md").read_text(encoding="utf-8").split("## Python example", 1)[1]
        assert build_docs.STAND_INS[name] in " ".join(text.split()), name
    from .stand_ins import Swap

    code = 'entry = {"name": "hpsv2"}\ntrain, _ = rewardzoo.build_processors({"rewards": [entry]})\n'
    got = swapped(code, Swap("/t", {"clip_model": "/c"}))
    namespace: dict = {}
    exec(got.split("\ntrain,")[0], namespace)
    assert namespace["entry"] == {"name": "hpsv2", "model_path": "/t", "kwargs": {"clip_model": "/c"}}
    assert got.endswith('\ntrain, _ = rewardzoo.build_processors({"rewards": [entry]})\n')
