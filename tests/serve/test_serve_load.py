"""Load, faults and backpressure against real servers on 127.0.0.1: many clients at once, a server killed and
restarted mid-run, a server that hangs, and a full queue answered with 503 + Retry-After."""

from __future__ import annotations

import http.server
import json
import threading
import time

import numpy as np
import pytest

pytest.importorskip("msgpack")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from PIL import Image

import rewardzoo
from rewardzoo.errors import HttpError, RewardExecutionError
from rewardzoo.serve.client import RewardClient
from rewardzoo.transport import wire

from .helpers import Server, free_port, request

JPEG = "rewards:\n  - name: jpeg\n    reward_model: jpeg_compressibility\n"
CLIENTS, REQUESTS, PER_REQUEST = 8, 50, 2


def tiny_image(seed: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (8, 8 + seed % 5, 3), dtype=np.uint8))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_load")
    (root / "jpeg.yaml").write_text(JPEG)
    (root / "slow.yaml").write_text(
        "rewards:\n  - name: slow\n    reward_model: tests.serve.rewards:SlowLength\n    kwargs: {delay: 0.3}\n"
    )
    return root


@pytest.fixture(scope="module")
def local(root):
    return rewardzoo.build_processors(root / "jpeg.yaml")[0]


def test_8_clients_x_50_requests_every_sample_answered_once_and_batched(root, local):
    server = Server(root / "jpeg.yaml", "--max-batch", "64", "--max-wait-ms", "20").start()
    try:
        n = CLIENTS * REQUESTS * PER_REQUEST
        samples = [rewardzoo.Sample(image=tiny_image(i)) for i in range(n)]
        want = local(samples).rewards["jpeg"]
        got = np.full(n, np.nan, dtype=np.float32)
        answered = np.zeros(n, dtype=int)
        errors: list[BaseException] = []

        def client(c: int) -> None:
            try:
                with RewardClient(server.url, timeout_s=30) as rc:
                    for r in range(REQUESTS):
                        first = (c * REQUESTS + r) * PER_REQUEST
                        result = rc.score(samples[first : first + PER_REQUEST])
                        got[first : first + PER_REQUEST] = result.rewards["jpeg"]
                        answered[first : first + PER_REQUEST] += 1
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=240)
        assert not any(t.is_alive() for t in threads), "a client did not finish within 240 s"
        assert not errors, errors[0]
        assert (answered == 1).all()
        np.testing.assert_array_equal(got, want)  # every sample got its own score: none lost, swapped or doubled
        m = server.metrics()
        assert m["rewardzoo_samples_total"] == n
        assert m['rewardzoo_requests_total{endpoint="/v1/score",status="200"}'] == CLIENTS * REQUESTS
        assert m["rewardzoo_batch_samples_sum"] == n
        mean_batch = m["rewardzoo_batch_samples_sum"] / m["rewardzoo_batch_samples_count"]
        assert mean_batch > PER_REQUEST, f"server batches ({mean_batch:.2f} samples) no larger than a client's"
        assert m['rewardzoo_batch_requests_bucket{le="1"}'] < m["rewardzoo_batch_requests_count"]
    finally:
        server.stop()


def test_a_server_killed_and_restarted_mid_run_the_remote_reward_finishes(root, local):
    port = free_port()
    server = Server(root / "jpeg.yaml", port=port).start()
    cfg = {
        "rewards": [
            {
                "name": "jpeg",
                "reward_model": "remote",
                "batch_size": 2,
                "kwargs": {
                    "url": server.url,
                    "rewards": ["jpeg"],
                    "retries": 12,
                    "backoff_s": 0.2,
                    "max_backoff_s": 1.0,
                    "timeout_s": 20,
                },
            }
        ]
    }
    trainer = rewardzoo.build_processors(cfg)[0]
    samples = [rewardzoo.Sample(image=tiny_image(1000 + i)) for i in range(80)]
    restarted = threading.Event()

    def kill_and_restart() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if server.metrics()["rewardzoo_samples_total"] >= 10:
                    break
            except OSError:
                pass
            time.sleep(0.02)
        server.kill()
        time.sleep(0.5)
        server.start(wait=False)
        restarted.set()

    killer = threading.Thread(target=kill_and_restart)
    try:
        killer.start()
        result = trainer(samples)
        killer.join(timeout=90)
        assert restarted.is_set()
        np.testing.assert_array_equal(result.rewards["jpeg"], local(samples).rewards["jpeg"])
        assert result.applied == [["jpeg"]] * len(samples)
        server.wait_ready(30)
        second = server.metrics()["rewardzoo_samples_total"]
        assert 0 < second < len(samples), "the run did not span the restart"
        short = {"rewards": [{**cfg["rewards"][0], "kwargs": {**cfg["rewards"][0]["kwargs"], "retries": 1}}]}
        trainer = rewardzoo.build_processors(short)[0]
        server.stop()
        with pytest.raises(RewardExecutionError) as exc:  # a dead server: the error names it and the served reward
            trainer([rewardzoo.Sample(image=tiny_image(1))])
        assert server.url in str(exc.value) and "served reward(s) jpeg" in str(exc.value)
        assert "after 2 tries" in str(exc.value)
    finally:
        killer.join(timeout=90)
        server.stop()


class _Hanging(http.server.BaseHTTPRequestHandler):
    """Answers the reward list at once; takes a score request and never answers it (within the test)."""

    def do_GET(self):
        data = json.dumps(
            {
                "protocol": 1,
                "limits": {},
                "rewards": [
                    {
                        "name": "jpeg",
                        "kind": "pointwise",
                        "modality": "image",
                        "higher_is_better": True,
                        "score_range": ["-inf", 0.0],
                        "fields": ["image"],
                        "applicable_datasets": None,
                    }
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.stop.wait(20)

    def log_message(self, *args):
        pass


def test_a_hanging_server_times_out_within_timeout_plus_one_retry_interval():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hanging)
    httpd.stop = threading.Event()
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        reward = rewardzoo.load_reward(
            {
                "name": "remote",
                "kwargs": {"url": url, "rewards": ["jpeg"], "timeout_s": 1.0, "retries": 2, "backoff_s": 0.5},
            }
        )
        assert reward.info.score_range == (-np.inf, 0.0)
        proc = rewardzoo.RewardProcessor(
            [
                {
                    "name": "r",
                    "reward_model": "remote",
                    "kwargs": {"url": url, "rewards": ["jpeg"], "timeout_s": 1.0, "retries": 2, "backoff_s": 0.5},
                }
            ]
        )
        started = time.monotonic()
        with pytest.raises(RewardExecutionError) as exc:
            proc([rewardzoo.Sample(image=tiny_image(0))])
        elapsed = time.monotonic() - started
        assert elapsed < 1.0 + 0.5 + 1.0, f"took {elapsed:.1f} s"
        assert url in str(exc.value) and "jpeg" in str(exc.value) and "no answer within 1 s" in str(exc.value)
        causes, cause = [], exc.value
        while cause is not None and len(causes) < 5:
            causes.append(cause)
            cause = cause.__cause__
        assert any(isinstance(c, HttpError) and c.status is None for c in causes)
    finally:
        httpd.stop.set()
        httpd.shutdown()
        httpd.server_close()


def test_a_full_queue_is_answered_503_with_retry_after_and_retries_get_through(root):
    server = Server(root / "slow.yaml", "--max-batch", "1", "--max-queue", "2").start()
    try:
        body = wire.encode_request([{"prompt": "abc"}])
        answers: list = []
        lock = threading.Lock()

        def send() -> None:
            got = request(server.url, "POST", "/v1/score", body, {"Content-Type": "application/msgpack"}, timeout=60)
            with lock:
                answers.append(got)

        threads = [threading.Thread(target=send) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        statuses = sorted(a[0] for a in answers)
        assert len(answers) == 8 and 503 in statuses and 200 in statuses, statuses
        refused = next(a for a in answers if a[0] == 503)
        assert int(refused[2]["retry-after"]) >= 1
        error = __import__("msgpack").unpackb(refused[1])
        assert error["error"]["limit"] == "max_queue" and "queue" in error["error"]["message"]
        # clients that retry (honouring Retry-After) all get their scores
        results: list = []

        def patient() -> None:
            with RewardClient(server.url, retries=20, backoff_s=0.2, max_backoff_s=2.0) as rc:
                results.append(rc.score([rewardzoo.Sample(prompt="abcd")]).rewards["slow"][0])

        threads = [threading.Thread(target=patient) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert results == [4.0] * 6
        assert server.metrics()['rewardzoo_errors_total{kind="overloaded"}'] >= 1
    finally:
        server.stop()


def test_ready_only_once_the_models_are_loaded_and_clients_wait_for_it(root):
    (root / "slow_load.yaml").write_text(
        "rewards:\n  - name: slow\n    reward_model: tests.serve.rewards:SlowToLoad\n    kwargs: {load_s: 4.0}\n"
    )
    server = Server(root / "slow_load.yaml").start(wait=False)
    try:
        deadline = time.monotonic() + 60
        while True:  # the process answers before its models are loaded
            try:
                health = request(server.url, "GET", "/health", timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, server.output()
                time.sleep(0.1)
        assert health[0] == 200
        ready = request(server.url, "GET", "/ready", timeout=5)
        scored = request(
            server.url,
            "POST",
            "/v1/score",
            wire.encode_request([{"prompt": "ab"}]),
            {"Content-Type": "application/msgpack"},
            timeout=5,
        )
        assert ready[0] == 503 and scored[0] == 503 and scored[2]["retry-after"]
        assert "still loading" in __import__("msgpack").unpackb(scored[1])["error"]["message"]
        # a remote entry built now waits for the reward list (bounded by ready_timeout_s), then scores
        trainer = rewardzoo.build_processors(
            {
                "rewards": [
                    {
                        "name": "slow",
                        "reward_model": "remote",
                        "kwargs": {"url": server.url, "rewards": ["slow"], "ready_timeout_s": 60},
                    }
                ]
            }
        )[0]
        assert request(server.url, "GET", "/ready", timeout=5)[0] == 200
        assert trainer([rewardzoo.Sample(prompt="abc")]).rewards["slow"][0] == 3.0
    finally:
        server.stop()


def test_a_config_whose_models_fail_to_load_stops_the_server_with_the_error(root):
    (root / "broken.yaml").write_text("rewards:\n  - name: broken\n    reward_model: tests.serve.rewards:FailsToLoad\n")
    server = Server(root / "broken.yaml").start(wait=False)
    try:
        server.proc.wait(timeout=60)
        assert server.proc.returncode == 2
        assert "loading the rewards failed" in server.output() and "/nowhere/model.safetensors" in server.output()
    finally:
        server.stop()
