"""The client's docstring example (:mod:`rewardzoo.serve.client`) runs as a doctest against a real server: a
``rewardzoo serve`` subprocess on a free 127.0.0.1 port, with a bearer token, every wait bounded."""

from __future__ import annotations

import doctest

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("msgpack")

import rewardzoo.serve.client as client_module

from .helpers import Server, environment

TOKEN = "doctest-token-51c2"
CONFIG = "rewards:\n  - name: jpeg_compressibility\n    reward_model: jpeg_compressibility\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_client_example")
    (root / "cfg.yaml").write_text(CONFIG)
    srv = Server(root / "cfg.yaml", "--token-env", "RZ_DOC_TOKEN", env=environment(RZ_DOC_TOKEN=TOKEN)).start()
    yield srv
    srv.stop()


def test_the_client_docstring_runs_against_a_server(server, monkeypatch):
    monkeypatch.setenv("REWARD_TOKEN", TOKEN)
    tests = doctest.DocTestFinder().find(client_module, globs={"url": server.url})
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    failed, tried = runner.summarize(verbose=False)
    assert tried >= 10 and failed == 0, f"{failed} of {tried} examples failed (the report is above)"
