"""Submit / collect (``POST /v1/jobs``, ``GET|DELETE /v1/jobs/{id}``) against ``rewardzoo serve`` in a subprocess, and
an entry's deadline honoured by the server; the tickets' memory accounting in process."""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest

from rewardzoo import Sample
from rewardzoo.serve import RewardClient
from rewardzoo.transport.wire import encode_request

from .helpers import Server, request

TTL_S = 1.5


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_jobs")
    (root / "jobs.yaml").write_text(
        "rewards:\n"
        "  - name: quick\n    reward_model: tests.serve.rewards:SlowLength\n    kwargs: {delay: 0.2}\n"
        "  - name: held\n    reward_model: tests.serve.rewards:HeldLength\n    timeout_s: 0.5\n    optional: true\n"
        f"    kwargs: {{started: '{root / 'started'}', release: '{root / 'release'}', hold_s: 20}}\n"
        "  - name: centered\n    reward_model: tests.no_extras.rewards:CenteredLength\n"
    )
    srv = Server(
        root / "jobs.yaml", "--max-wait-ms", "1", "--max-jobs-per-token", "3", "--job-ttl-s", str(TTL_S)
    ).start()
    srv.release = root / "release"
    yield srv
    srv.release.touch()
    srv.stop()


@pytest.fixture()
def tokens(monkeypatch):
    monkeypatch.setenv("JOBS_TOKEN_A", "alice")
    monkeypatch.setenv("JOBS_TOKEN_B", "bob")


def _samples(n: int = 5) -> list[Sample]:
    return [Sample(prompt="p" * (i + 1), group_id=i % 2) for i in range(n)]


def _post(url: str, token: str, samples: list[Sample], rewards=("quick",)) -> tuple[int, dict]:
    body = encode_request([{"prompt": s.prompt} for s in samples], list(rewards), fmt="json")
    status, data, _ = request(
        url, "POST", "/v1/jobs", body, {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    )
    return status, json.loads(data)


def _get(url: str, path: str, token: str, method: str = "GET") -> tuple[int, bytes, dict]:
    return request(url, method, path, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_submit_returns_at_once_and_collects_what_score_gives_also_after_a_reconnect(server, tokens):
    with RewardClient(server.url, token_env="JOBS_TOKEN_A", fmt="json") as client:
        direct = client.score(_samples(), ["quick"])
        start = time.monotonic()
        future = client.submit(_samples(), ["quick"])
        assert time.monotonic() - start < 0.2 and not future.done()  # the reward takes 0.2 s per call
        result = future.result(timeout=30)
        for name in ("total",):
            np.testing.assert_array_equal(getattr(result, name), getattr(direct, name))
        np.testing.assert_array_equal(result.rewards["quick"], [1, 2, 3, 4, 5])
        assert result.applied == direct.applied and result.group_ids == [0, 1, 0, 1, 0]
        # collected once: the client deletes its ticket (just after setting the result)
        (ticket,) = future.tickets
        deadline = time.monotonic() + 10
        while _get(server.url, f"/v1/jobs/{ticket}", "alice")[0] != 404 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _get(server.url, f"/v1/jobs/{ticket}", "alice")[0] == 404
        pending = client.submit(_samples(3), ["quick"])
    # another client (a reconnect, another process) collects by the tickets
    with RewardClient(server.url, token_env="JOBS_TOKEN_A", fmt="msgpack") as again:
        later = again.collect(pending.tickets, pending.positions, timeout=30)
    np.testing.assert_array_equal(later.rewards["quick"], [1, 2, 3])


def test_the_incremental_runner_submits_each_batch_and_keeps_groups_whole(server, tokens):
    samples = [Sample(prompt="p" * (i + 1), group_id=f"g{i % 3}") for i in range(9)]
    with RewardClient(server.url, token_env="JOBS_TOKEN_A", fmt="json") as client:
        direct = client.score(samples, ["quick", "centered"])
        with client.incremental(group_size=3, rewards=["quick", "centered"]) as runner:
            assert runner.add(samples[:4]) == range(0, 4)  # no group is complete yet: nothing is sent
            assert runner.add(samples[4:7]) == range(4, 7)  # g0 (0, 3, 6) is complete: submitted now
            runner.add(samples[7:])
            result = runner.finalize()
    assert result.applied == direct.applied and result.group_ids == direct.group_ids
    np.testing.assert_allclose(result.rewards["centered"], direct.rewards["centered"])
    np.testing.assert_array_equal(result.total, direct.total)
    assert np.abs(result.rewards["centered"]).sum() > 0  # centred within whole groups, not within requests


def _remote(url: str, submit: bool, **kwargs) -> dict:
    """A trainer's config naming the served ``quick`` through a ``remote`` entry."""
    options = {"url": url, "rewards": ["quick"], "format": "json", "token_env": "JOBS_TOKEN_E", "submit": submit}
    return {"rewards": [{"name": "quick", "reward_model": "remote", "kwargs": {**options, **kwargs}}]}


@pytest.fixture()
def posted(monkeypatch):
    """The tickets of every job a ``remote`` entry posts (the client's own ``JobTickets.post``, spied on)."""
    from rewardzoo.transport.jobs import JobTickets

    monkeypatch.setenv("JOBS_TOKEN_E", "erin")
    tickets: list[list[str]] = []
    post = JobTickets.post

    def spy(self, samples, rewards):
        out = post(self, samples, rewards)
        tickets.append(out[0])
        return out

    monkeypatch.setattr(JobTickets, "post", spy)
    return tickets


def test_a_remote_entry_with_submit_scores_through_jobs_in_a_trainer_adapter(server, posted):
    from rewardzoo.integrations import flow_grpo_reward_fn

    images, prompts = np.zeros((3, 8, 8, 3), np.uint8), ["a", "bb", "ccc"]
    direct, _ = flow_grpo_reward_fn(_remote(server.url, False))(images, prompts, [{}] * 3)
    assert posted == []  # without submit: /v1/score
    through_jobs, _ = flow_grpo_reward_fn(_remote(server.url, True))(images, prompts, [{}] * 3)
    assert len(posted) == 1 and len(posted[0]) == 1  # one job for the call
    np.testing.assert_array_equal(through_jobs["quick"], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(through_jobs["avg"], direct["avg"])
    assert _get(server.url, f"/v1/jobs/{posted[0][0]}", "erin")[0] == 404  # collected, then deleted


def test_a_broken_long_poll_asks_for_the_ticket_again_and_never_resends_the_samples(server, posted, monkeypatch):
    from rewardzoo import build_processors
    from rewardzoo.errors import HttpError, RewardExecutionError
    from rewardzoo.transport.http import HttpClient

    broken: list[str] = []
    request = HttpClient.request

    def drops_the_first_poll(self, method, path, *args, **kwargs):
        if method == "GET" and path.startswith("/v1/jobs/") and not broken:
            broken.append(path)
            raise HttpError(server.url + path, status=None, attempts=1, reason="connection reset by peer")
        return request(self, method, path, *args, **kwargs)

    monkeypatch.setattr(HttpClient, "request", drops_the_first_poll)
    train, _ = build_processors(_remote(server.url, True))
    result = train([Sample(prompt="p" * n) for n in (2, 4)])
    assert broken and len(posted) == 1  # the poll broke once; the samples were posted once
    np.testing.assert_array_equal(result.rewards["quick"], [2.0, 4.0])
    # a job that does not finish within timeout_s fails the call, naming the server (never a score)
    slow, _ = build_processors(_remote(server.url, True, timeout_s=0.05))
    with pytest.raises(RewardExecutionError, match="did not finish in time") as err:
        slow([Sample(prompt="p")])
    assert server.url in str(err.value) and "quick" in str(err.value)


def test_a_ticket_of_another_token_or_none_is_a_404_and_long_poll_answers_when_done(server):
    status, ticket = _post(server.url, "alice", _samples(2))
    assert status == 202 and ticket["status"] == "pending" and len(ticket["id"]) >= 20
    path = f"/v1/jobs/{ticket['id']}"
    for token, where in (("bob", path), ("alice", "/v1/jobs/nope"), ("bob", path + "?wait=5")):
        status, body, _ = _get(server.url, where, token)
        assert status == 404 and json.loads(body)["error"]["kind"] == "no_such_job" and b"quick" not in body
    assert _get(server.url, path, "bob", "DELETE")[0] == 404  # nor can another token delete it
    start = time.monotonic()
    status, body, _ = _get(server.url, path + "?wait=20", "alice")
    assert status == 200 and time.monotonic() - start < 5  # as soon as it finished, not after the wait
    assert json.loads(body)["rewards"]["quick"] == [1.0, 2.0]
    assert _get(server.url, path + "?wait=soon", "alice")[0] == 400
    assert _get(server.url, path, "alice", "DELETE")[0] == 204
    assert _get(server.url, path, "alice")[0] == 404


def test_tickets_are_bounded_per_token_and_expire(server):
    ids = []
    for _ in range(3):  # finished or not, uncollected tickets count
        status, ticket = _post(server.url, "carol", _samples(1))
        assert status == 202
        ids.append(ticket["id"])
    status, refused = _post(server.url, "carol", _samples(1))
    assert status == 429 and refused["error"]["limit"] == "max_jobs_per_token"
    assert _post(server.url, "dave", _samples(1))[0] == 202  # another token has its own
    assert _get(server.url, f"/v1/jobs/{ids[0]}?wait=20", "carol")[0] == 200
    assert _get(server.url, f"/v1/jobs/{ids[0]}", "carol", "DELETE")[0] == 204
    assert _post(server.url, "carol", _samples(1))[0] == 202  # room again
    for ticket in ids[1:]:
        assert _get(server.url, f"/v1/jobs/{ticket}?wait=20", "carol")[0] == 200
    deadline = time.monotonic() + TTL_S + 10  # finished tickets are forgotten job_ttl_s after they finish
    while _get(server.url, f"/v1/jobs/{ids[1]}", "carol")[0] != 404 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _get(server.url, f"/v1/jobs/{ids[1]}", "carol")[0] == 404
    assert _post(server.url, "carol", _samples(1))[0] == 202


def test_the_server_honours_an_entry_deadline_and_says_who_abstained(server, tokens):
    with RewardClient(server.url, token_env="JOBS_TOKEN_B", fmt="json", timeout_s=30) as client:
        start = time.monotonic()
        result = client.score(_samples(2), ["quick", "held"])  # 'held' never answers by itself: optional, 0.5 s
        assert time.monotonic() - start < 5
        assert result.abstained == {"held": [0, 1]} and result.applied == [["quick"], ["quick"]]
        np.testing.assert_array_equal(result.total, [1.0, 2.0])
        assert client.submit(_samples(2), ["quick", "held"]).result(timeout=30).abstentions == {"held": 2}


def test_finished_jobs_count_against_the_memory_budget():
    from rewardzoo.serve.jobs import Jobs
    from rewardzoo.serve.memory import DecodeBusy, MemoryBudget
    from rewardzoo.serve.refusals import Refusal

    async def scenario() -> None:
        budget = MemoryBudget(1000, wait_s=0.05)
        jobs = Jobs(budget, ttl_s=60, max_per_token=2, max_jobs=3)
        a, b = jobs.open("x"), jobs.open("y")
        await budget.keep(600, "the job's answer")
        jobs.finish(a, 200, b"s" * 600, "application/json", {}, 600)
        assert budget.used == 600
        with pytest.raises(DecodeBusy):  # a second answer has no room while the first is held
            await budget.keep(600, "the job's answer")
        with pytest.raises(Refusal) as err:
            jobs.find("y", a.id)
        assert err.value.status == 404
        jobs.open("x")
        with pytest.raises(Refusal) as err:
            jobs.open("x")
        assert (err.value.status, err.value.limit) == (429, "max_jobs_per_token")
        with pytest.raises(Refusal) as err:
            jobs.open("z")
        assert err.value.limit == "max_jobs"
        jobs.forget(jobs.find("x", a.id))
        assert budget.used == 0 and len(jobs) == 2
        jobs.finish(b, 200, b"t" * 10, "application/json", {}, 0)
        jobs.purge(now=time.monotonic() + 61)
        assert len(jobs) == 1 and jobs.expired == 1  # b finished and expired; the pending one stays

    asyncio.run(scenario())
