"""OpenRLHF's remote reward model protocol on ``rewardzoo serve`` (``POST /get_reward``), driven by OpenRLHF's own
client (``openrlhf.utils.agent.SingleTurnAgentExecutor._fetch_rewards_via_http``, installed with --no-deps) against
a loopback server: the scores equal the in-process processor's on the same prompts and completions; a query that
does not start with its prompt is a 422 naming its index; the token and the limits hold as on /v1/score."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
agent = pytest.importorskip("openrlhf.utils.agent", reason="OpenRLHF (pip install --no-deps openrlhf==0.11.2)")

import yaml

from rewardzoo.core.processor import RewardProcessor
from rewardzoo.core.resolve import load_config
from rewardzoo.spec.sample import Sample

from .helpers import Server, environment, error_of, request

PAIRS = [
    ("<bos> <user> what is the answer <assistant> ", "the answer is yes <eos>"),
    ("<bos> <user> how fast <assistant> ", "the cat ran fast <eos>"),
    ("<bos> <user> why <assistant> ", "because <eos>"),
]


@pytest.fixture(scope="module")
def entries(tmp_path_factory):
    from rewardzoo.testing.text import tiny_text_models

    models = tiny_text_models(tmp_path_factory.mktemp("openrlhf-text"))
    return [
        {"name": "rm", "reward_model": "sequence_reward", "model_path": models["gpt2_cls"], "device": "cpu"},
        {"name": "words", "reward_model": "tests.integrations.per_sample_rewards:Words", "weight": 0.25},
    ]


@pytest.fixture(scope="module")
def server(entries, tmp_path_factory):
    path = tmp_path_factory.mktemp("openrlhf") / "config.yaml"
    path.write_text(yaml.safe_dump({"rewards": entries}))
    srv = Server(path, "--max-samples", "4", "--token-env", "RZ_TOKEN", env=environment(RZ_TOKEN="s3cret")).start()
    yield srv
    srv.stop()


def post(url: str, payload, token: str | None = "s3cret"):
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    status, body, _ = request(url, "POST", "/get_reward", json.dumps(payload).encode(), headers)
    return status, body


def test_openrlhfs_client_gets_the_processors_scores(entries, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"rewards": entries}))
    srv = Server(path).start()  # OpenRLHF's client sends no token
    try:
        executor = agent.SingleTurnAgentExecutor(remote_rm_url=f"{srv.url}/get_reward")
        answers = asyncio.run(
            executor._fetch_rewards_via_http([p + c for p, c in PAIRS], [p for p, _ in PAIRS], ["yes", "fast", None])
        )
    finally:
        srv.stop()
    with RewardProcessor(load_config({"rewards": entries}).rewards) as processor:
        want = processor([Sample(prompt=p, completion=c) for p, c in PAIRS])
    (answer,) = answers  # one server: one request
    np.testing.assert_allclose(answer["rewards"], want.total, atol=1e-5, rtol=0)
    np.testing.assert_allclose(answer["scores"], want.total, atol=1e-5, rtol=0)
    np.testing.assert_allclose(answer["extra_logs"]["rm"], want.rewards["rm"], atol=1e-5, rtol=0)
    assert answer["extra_logs"]["words"] == [len(c.split()) for _, c in PAIRS]


def test_a_query_that_does_not_start_with_its_prompt_is_a_422_naming_it(server):
    queries = [p + c for p, c in PAIRS]
    queries[2] = "something else entirely"
    status, body = post(server.url, {"query": queries, "prompts": [p for p, _ in PAIRS], "labels": [None] * 3})
    assert status == 422 and "query 2" in error_of(body)["message"] and "sample 2" in error_of(body)["message"]


def test_token_and_limits_hold(server):
    payload = {"query": [p + c for p, c in PAIRS], "prompts": [p for p, _ in PAIRS]}
    assert post(server.url, payload, token=None)[0] == 401
    assert post(server.url, payload, token="wrong")[0] == 403
    status, body = post(server.url, {"query": [PAIRS[0][0] + "x"] * 5, "prompts": [PAIRS[0][0]] * 5})
    assert status == 413 and error_of(body)["limit"] == "max_samples"
    status, body = post(server.url, {"query": ["a"], "prompts": ["a"], "extra": 1})
    assert status == 400 and "extra" in error_of(body)["message"]
    status, body = post(server.url, payload)
    assert status == 200 and len(json.loads(body)["rewards"]) == 3
