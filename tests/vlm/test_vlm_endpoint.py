"""The OpenAI-compatible endpoint backend against real servers on 127.0.0.1 running the tiny model.

- ``transformers serve`` (shipped with transformers; needs its ``serving`` extra: fastapi, uvicorn, openai):
  generation (UnifiedReward, the Think judge, a regex rubric). Its chat completions ignore ``logprobs``,
  so it cannot serve yes/no probabilities here;
- ``openai_server.ChatServer`` (this folder): the same tiny model through transformers alone behind the
  chat-completions JSON shape with ``logprobs`` / ``top_logprobs`` (VQAScore, yes/no rubrics), and the
  faults: 503 twice then success, an answer that never comes (timeout), a body that is not JSON.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

import rewardzoo
from rewardzoo.errors import ConfigError, RewardOutputError
from rewardzoo.rewards.models.vlm.backbone import VLMQuery
from rewardzoo.rewards.models.vlm.endpoint import OpenAIVLM
from tests.execution.rewards import Rendezvous, overlapping, path
from tests.execution.test_execution_overlap import one_by_one

from .openai_server import ChatServer


@pytest.fixture(scope="module")
def server(vlm_dir):
    srv = ChatServer(vlm_dir)
    yield srv
    srv.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def transformers_serve(vlm_dir, tmp_path_factory):
    """``transformers serve <tiny model>`` in a subprocess; the test fails if it does not come up in 120 s."""
    if importlib.util.find_spec("openai") is None or importlib.util.find_spec("fastapi") is None:
        pytest.skip("transformers serve needs transformers[serving] (fastapi, uvicorn, openai)")
    exe = shutil.which("transformers") or sys.executable
    port = _free_port()
    cmd = ([exe] if exe != sys.executable else [sys.executable, "-m", "transformers.cli.transformers"]) + [
        "serve",
        vlm_dir,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
        "--dtype",
        "float32",
    ]
    log = open(tmp_path_factory.mktemp("serve") / "serve.log", "wb")
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            urllib.request.urlopen(url + "/health", timeout=2).read()
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
    if proc.poll() is not None:
        log.close()
        pytest.fail(f"transformers serve did not start: {open(log.name, 'rb').read()[-2000:].decode(errors='replace')}")
    yield url + "/v1"
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def endpoint(url, model, **extra):
    return {"backend": "openai", "endpoint": {"url": url, "model": model, **extra}}


# ---------------------------------------------------------------------------------- yes/no (logprobs)


def test_vqascore_from_the_endpoint_equals_the_local_backend(server, vlm_dir, images, prompts):
    local = rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir})
    remote = rewardzoo.load_reward({"name": "vqascore", "kwargs": endpoint(server.url, vlm_dir, top_logprobs=1000)})
    np.testing.assert_allclose(
        remote(prompt=prompts, image=images).rewards, local(prompt=prompts, image=images).rewards, rtol=1e-4
    )
    body = server.bodies[-1]["body"]
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["temperature"] == 0
    part = body["messages"][-1]["content"][0]
    assert part["type"] == "image_url" and part["image_url"]["url"].startswith("data:image/png;base64,")


def test_an_answer_outside_the_top_logprobs_has_probability_zero(server, vlm_dir, images):
    remote = rewardzoo.load_reward({"name": "vqascore", "kwargs": endpoint(server.url, vlm_dir, top_logprobs=1)})
    local = rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir})
    # the random model's most likely token is not "Yes" for these inputs (checked locally), so the score is 0
    bb = local.backend.backbone
    top = bb.last_logits([VLMQuery.of('Does this figure show "a cat"? Please answer Yes or No.', image=images[0])])
    assert int(top.argmax()) != bb.first_token_ids(["Yes"])[0]
    assert remote(prompt=["a cat"], image=images[:1]).rewards[0] == 0.0


def test_an_endpoint_judge_keeps_its_requests_in_flight_while_a_local_stream_scores(
    server, vlm_dir, images, prompts, monkeypatch
):
    """In one processor call the endpoint judge (io-bound) runs on its own thread: a barrier joins its requests and
    the local entry's call, so scored one after the other this call would fail; the scores are those in turn."""
    barrier, spans = threading.Barrier(2, timeout=60), []
    answer_probs = OpenAIVLM.answer_probs

    def met(self, queries, answers):
        start = time.perf_counter()
        if Rendezvous.barrier is barrier:
            barrier.wait()
        try:
            return answer_probs(self, queries, answers)
        finally:
            spans.append(("endpoint", start, time.perf_counter()))

    monkeypatch.setattr(OpenAIVLM, "answer_probs", met)
    proc = rewardzoo.RewardProcessor(
        [
            {"name": "local", "reward_model": path(Rendezvous), "kwargs": {"tag": "local"}},
            {"name": "vqa", "reward_model": "vqascore", "kwargs": endpoint(server.url, vlm_dir, top_logprobs=1000)},
        ]
    )
    samples = [rewardzoo.Sample(prompt=p, image=img) for p, img in zip(prompts, images)]
    Rendezvous.intervals.clear()
    Rendezvous.barrier = barrier
    try:
        result = proc(samples)
    finally:
        Rendezvous.barrier = None
        barrier.abort()
    assert overlapping(spans[0], Rendezvous.intervals[0])
    assert proc.rewards["vqa"].io_bound and not proc.rewards["local"].io_bound
    in_turn = one_by_one(proc, samples)
    np.testing.assert_array_equal(result.rewards["vqa"], in_turn.rewards["vqa"])
    np.testing.assert_array_equal(result.total, in_turn.total)


def test_a_local_judge_is_not_io_bound(vlm_dir):
    assert rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir}).io_bound is False


def test_503_twice_then_success_is_retried(server, vlm_dir, images):
    remote = rewardzoo.load_reward(
        {"name": "vqascore", "kwargs": endpoint(server.url, vlm_dir, top_logprobs=1000, retries=3, backoff_s=0.01)}
    )
    before = server.requests
    server.fail_next(503, 2)
    out = remote(prompt=["a cat"], image=images[:1])
    assert server.requests - before == 3 and out.extras["substituted"][0] == 0.0 and out.rewards[0] > 0


def test_503_beyond_the_retries_is_an_error_naming_the_sample_and_status(server, vlm_dir, images):
    remote = rewardzoo.load_reward(
        {"name": "vqascore", "kwargs": endpoint(server.url, vlm_dir, retries=1, backoff_s=0.01)}
    )
    server.fail_next(503, 2)
    with pytest.raises(RewardOutputError, match="HTTP 503.*after 2 tries") as exc:
        remote(prompt=["a cat"], image=images[:1])
    assert exc.value.inputs == (0,)


def test_a_server_that_never_answers_times_out_and_can_be_substituted(server, vlm_dir, images):
    remote = rewardzoo.load_reward(
        {
            "name": "vqascore",
            "kwargs": {
                **endpoint(server.url, vlm_dir, timeout_s=0.5, top_logprobs=1000),
                "on_failure": {"substitute": 0.0},
            },
        }
    )
    server.hang_next(3.0)
    t0 = time.monotonic()
    out = remote(prompt=["a cat", "a dog"], image=images[:2])
    assert time.monotonic() - t0 < 2.5  # one timeout, not a retry loop of them
    assert list(out.extras["substituted"]) in ([1.0, 0.0], [0.0, 1.0])
    assert "no answer within 0.5 s" in "".join(out.extras["failure"])
    assert remote.substitutions == 1


def test_garbage_json_is_an_error_naming_the_body(server, vlm_dir, images):
    remote = rewardzoo.load_reward({"name": "vqascore", "kwargs": endpoint(server.url, vlm_dir)})
    server.garbage_next()
    with pytest.raises(RewardOutputError, match="not JSON.*upstream proxy error"):
        remote(prompt=["a cat"], image=images[:1])


def test_the_api_key_comes_from_the_named_variable_and_is_never_shown(server, vlm_dir, images, monkeypatch):
    monkeypatch.setenv("RZ_TEST_VLM_KEY", "sk-secret-123")
    remote = rewardzoo.load_reward(
        {"name": "vqascore", "kwargs": endpoint(server.url, vlm_dir, api_key_env="RZ_TEST_VLM_KEY", top_logprobs=1000)}
    )
    remote(prompt=["a cat"], image=images[:1])
    assert server.bodies[-1]["headers"]["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret" not in repr(remote.backend.client) + repr(remote)
    server.fail_next(400, 1)
    with pytest.raises(RewardOutputError) as exc:
        remote(prompt=["a cat"], image=images[:1])
    assert "HTTP 400" in str(exc.value) and "sk-secret" not in str(exc.value)
    monkeypatch.delenv("RZ_TEST_VLM_KEY")
    with pytest.raises(ConfigError, match="RZ_TEST_VLM_KEY is not set"):
        rewardzoo.load_reward(
            {"name": "vqascore", "kwargs": endpoint(server.url, vlm_dir, api_key_env="RZ_TEST_VLM_KEY")}
        )


def test_requests_run_max_concurrency_at_a_time_in_input_order(vlm_dir, images, prompts):
    slow = ChatServer(vlm_dir, delay_s=0.3)
    try:
        backend = OpenAIVLM(slow.url, vlm_dir, max_concurrency=4, top_logprobs=1000)
        queries = [
            VLMQuery.of(f'Does this figure show "{p}"? Please answer Yes or No.', image=im)
            for p, im in zip(prompts * 2, images * 2)
        ]
        t0 = time.monotonic()
        probs = backend.answer_probs(queries, ["Yes"])
        elapsed = time.monotonic() - t0
        assert slow.in_flight_max == 4 and elapsed < 10 * 0.3
        local = rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir})
        np.testing.assert_allclose(
            [p[0] for p in probs], local(prompt=prompts * 2, image=images * 2).rewards, rtol=1e-4
        )
        backend.close()
    finally:
        slow.close()


def test_a_refusal_is_a_failure_of_its_own_kind(server, vlm_dir, images, monkeypatch):
    remote = rewardzoo.load_reward({"name": "unified_reward", "kwargs": endpoint(server.url, vlm_dir)})

    def refuse(body):
        return {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
                }
            ]
        }

    monkeypatch.setattr(server, "complete", refuse)
    with pytest.raises(RewardOutputError, match="refusal: I can't help with that"):
        remote(prompt=["a cat"], image=images[:1])


# ------------------------------------------------------------------------- generation (transformers serve)


def test_unified_reward_through_transformers_serve_matches_the_local_backend(transformers_serve, vlm_dir, images):
    opts = {"max_new_tokens": 6, "on_failure": {"substitute": 0.0}}
    local = rewardzoo.load_reward({"name": "unified_reward", "model_path": vlm_dir, "kwargs": opts})
    remote = rewardzoo.load_reward(
        {
            "name": "unified_reward",
            "kwargs": {**opts, **endpoint(transformers_serve, vlm_dir, max_concurrency=2, timeout_s=120)},
        }
    )
    out_local = local(prompt=["a cat", "a dog"], image=images[:2])
    out_remote = remote(prompt=["a cat", "a dog"], image=images[:2])
    assert out_remote.extras["judgement"] == out_local.extras["judgement"]
    assert all(out_remote.extras["judgement"])  # the random model writes something (no Final Score: substituted)
    np.testing.assert_array_equal(out_remote.rewards, out_local.rewards)


def test_the_think_judge_through_transformers_serve(transformers_serve, vlm_dir, images):
    reward = rewardzoo.load_reward(
        {
            "name": "unified_reward_think",
            "kwargs": {
                "max_new_tokens": 4,
                "on_failure": {"substitute": 0.5},
                **endpoint(transformers_serve, vlm_dir, image_format="png", timeout_s=120),
            },
        }
    )
    out = reward(prompt=["a cat"] * 3, image=images[:3], group_id=[1, 1, 1])
    np.testing.assert_allclose(out.rewards, [0.5, 0.5, 0.5])
    assert reward.substitutions == 3
    assert reward.io_bound  # through the endpoint it overlaps with the local streams of a processor call
