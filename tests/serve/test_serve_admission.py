"""The memory budget counts parsed bodies (issue 49, item 1): a request reserves its body and what parsing it builds,
from its size, before it is parsed; bodies of tiny objects stay within 2x their bytes in the server, JSON
``/get_reward`` bodies of floats or empty strings included (their array items have no parser hook). Measured as the
peak RSS of a real server on 127.0.0.1 (VmHWM, reset through /proc/PID/clear_refs); every wait bounded."""

from __future__ import annotations

import json
import threading

import pytest

msgpack = pytest.importorskip("msgpack")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from rewardzoo.transport import wire

from .helpers import Server, error_of, request

MIB = 2**20
BUDGET_MB = 64
JSON = "application/json"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_admission")
    (root / "n.yaml").write_text("rewards:\n  - name: n\n    reward_model: tests.serve.rewards:SlowLength\n")
    srv = Server(root / "n.yaml", "--max-decoded-mb", str(BUDGET_MB)).start()
    yield srv
    srv.stop()


def rss_kb(pid: int, key: str) -> int:
    return next(int(line.split()[1]) for line in open(f"/proc/{pid}/status") if line.startswith(key + ":"))


def peak_growth_mib(server: Server, sends) -> tuple[float, list]:
    """The server's peak RSS over its RSS before ``sends`` (requests run at once), and their answers."""
    pid = server.proc.pid
    with open(f"/proc/{pid}/clear_refs", "w") as fh:
        fh.write("5")
    before = rss_kb(pid, "VmRSS")
    answers: list = [None] * len(sends)

    def one(i):
        answers[i] = request(server.url, "POST", *sends[i], timeout=60)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(sends))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not any(t.is_alive() for t in threads)
    return (rss_kb(pid, "VmHWM") - before) / 1024, answers


def score(text: str) -> tuple[str, bytes, dict]:
    body = json.dumps({"protocol": 1, "samples": [{"prompt": text}]}).encode()
    return "/v1/score", body, {"Content-Type": "application/json"}


def test_a_body_whose_parse_is_over_the_budget_is_413_before_it_is_parsed(server):
    assert wire.parse_bytes(30 * MIB, "json") > BUDGET_MB * MIB  # a 30 MB prompt: ~90 MB parsed, over 64
    growth, [(status, answer, _)] = peak_growth_mib(server, [score("x" * 30 * MIB)])
    error = error_of(answer)
    assert status == 413 and error["limit"] == "max_decoded_bytes" and "body parsed" in error["message"], error
    assert growth < 1.5 * 30, growth  # the body received, never parsed
    status, answer, _ = request(server.url, "POST", *score("y" * MIB))  # within the budget: scored
    assert status == 200 and json.loads(answer)["rewards"]["n"] == [float(MIB)]


@pytest.mark.parametrize(
    "item", [b"0.5", b'""', b"{}"], ids=["floats", "empty-strings", "empty-maps"]
)  # 8x, 2.7x and 20x their bytes once built
def test_a_json_get_reward_of_tiny_items_stays_within_2x_its_body(server, item):
    size = 8 * MIB
    body = b'{"query":[' + b",".join([item] * (size // (len(item) + 1))) + b'],"prompts":[]}'
    growth, [(status, answer, _)] = peak_growth_mib(server, [("/get_reward", body, {"Content-Type": JSON})])
    assert status == 413 and error_of(answer)["limit"] == "max_samples", answer[:300]
    assert growth < 2 * len(body) / MIB, growth


def test_four_concurrent_msgpack_bodies_of_empty_maps_stay_within_2x_their_bodies(server):
    n = 8 * MIB - 5
    body = b"\xdd" + n.to_bytes(4, "big") + b"\x80" * n  # an array of 8M empty maps
    sends = [("/v1/score", body, {"Content-Type": "application/msgpack"})] * 4
    growth, answers = peak_growth_mib(server, sends)
    assert {status for status, _, _ in answers} == {413}, answers
    assert growth < 2 * 4 * len(body) / MIB, growth
