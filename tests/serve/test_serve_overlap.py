"""A ``remote`` entry keeps its requests in flight while the local streams of the same processor call score.

The server (``rewardzoo serve`` in a subprocess on 127.0.0.1) sleeps 0.3 s per call. A barrier joins the local
reward's call and the remote entry's request: it lets both through only when they are in progress at the same
time, so the processor call fails when the entries are scored one after the other.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rewardzoo
from rewardzoo.rewards.remote import RemoteReward
from rewardzoo.transport.served import ServedRewards
from tests.execution.rewards import Rendezvous, overlapping, path
from tests.execution.test_execution_overlap import one_by_one

from .helpers import Server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_overlap")
    (root / "slow.yaml").write_text(
        "rewards:\n  - name: slow\n    reward_model: tests.serve.rewards:SlowLength\n    kwargs: {delay: 0.3}\n"
    )
    srv = Server(root / "slow.yaml", "--max-wait-ms", "5").start()
    yield srv
    srv.stop()


@pytest.fixture()
def meeting(monkeypatch):
    """Every ServedRewards.score and every Rendezvous call waits at one two-party barrier (until the test sets
    ``Rendezvous.barrier = None``); yields the intervals of the score calls."""
    barrier = threading.Barrier(2, timeout=20)
    intervals: list[tuple] = []
    score = ServedRewards.score

    def met(self, samples, rewards=None):
        import time

        start = time.perf_counter()
        if Rendezvous.barrier is barrier:  # switched off by the test for its baseline
            barrier.wait()
        try:
            return score(self, samples, rewards)
        finally:
            intervals.append(("remote", start, time.perf_counter(), threading.current_thread().name))

    monkeypatch.setattr(ServedRewards, "score", met)
    Rendezvous.intervals.clear()
    Rendezvous.barrier = barrier
    yield intervals
    Rendezvous.barrier = None
    barrier.abort()


def _config(url: str) -> dict:
    return {
        "rewards": [
            {"name": "local", "reward_model": path(Rendezvous), "kwargs": {"tag": "local"}},
            {"name": "remote", "reward_model": "remote", "batch_size": 8, "kwargs": {"url": url, "rewards": ["slow"]}},
        ]
    }


def test_the_remote_request_is_in_flight_while_the_local_stream_scores(server, meeting):
    proc = rewardzoo.build_processors(_config(server.url))[0]
    assert isinstance(proc.rewards["remote"], RemoteReward) and proc.rewards["remote"].io_bound
    assert not proc.rewards["local"].io_bound
    samples = [rewardzoo.Sample(prompt="p" * (i + 1)) for i in range(5)]
    result = proc(samples)  # one by one, the local call would wait at the barrier for a request never sent
    (remote,), (local,) = meeting, Rendezvous.intervals
    assert overlapping(remote, local) and local[3] == threading.current_thread().name != remote[3]
    np.testing.assert_array_equal(result.rewards["remote"], [1.0, 2.0, 3.0, 4.0, 5.0])
    Rendezvous.barrier = None
    in_turn = one_by_one(proc, samples)  # the barrier is off: the same numbers, scored in turn
    for name in ("local", "remote"):
        np.testing.assert_array_equal(result.rewards[name], in_turn.rewards[name], err_msg=name)
    np.testing.assert_array_equal(result.total, in_turn.total)


def test_a_remote_failure_while_overlapping_names_the_entry_and_its_samples(server):
    """The last test of the module: it stops the server."""
    cfg = _config(server.url)
    cfg["rewards"][1]["kwargs"].update(retries=0, timeout_s=5.0)
    proc = rewardzoo.build_processors(cfg)[0]
    server.stop()  # the connection is refused: the remote entry fails on its thread
    Rendezvous.intervals.clear()
    with pytest.raises(rewardzoo.RewardExecutionError, match=r"reward 'remote': rewardzoo server") as info:
        proc([rewardzoo.Sample(prompt="ab"), rewardzoo.Sample(prompt="c")])
    assert info.value.samples == (0, 1)
    assert [r[0] for r in Rendezvous.intervals] == ["local"]  # the local stream scored meanwhile
