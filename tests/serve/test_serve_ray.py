"""The Ray Serve deployment answers the same requests as the uvicorn server, byte for byte (one local Ray
instance for the module, 2 CPUs), and ``rewardzoo serve --ray`` wires its options into that deployment."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'rewardzoo[ray]')")
serve = pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'rewardzoo[serve-ray]')")
pytest.importorskip("msgpack")
pytest.importorskip("starlette")

from PIL import Image

import rewardzoo
from rewardzoo.serve import ServeOptions, reward_deployment
from rewardzoo.serve.client import RewardClient
from rewardzoo.transport import wire

from .helpers import ROOT, Server, free_port, request

CONFIG = (
    "rewards:\n  - name: jpeg\n    reward_model: jpeg_compressibility\n    batch_size: 3\n"
    "  - name: rank\n    reward_model: group_rank\n    kwargs: {base: jpeg_incompressibility}\n"
)


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve_ray") / "cfg.yaml"
    path.write_text(CONFIG)
    return path


@pytest.fixture(scope="module")
def ray_url(config):
    # address="local": a fresh instance, also beside a `ray start` cluster or the address file a stopped one left
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(
        reward_deployment(config, replicas=1, options=ServeOptions(max_wait_ms=2)), name="rewardzoo", route_prefix="/"
    )
    yield f"http://127.0.0.1:{port}"
    serve.shutdown()
    ray.shutdown()


@pytest.fixture(scope="module")
def uvicorn_url(config):
    server = Server(config).start()
    yield server.url
    server.stop()


def samples() -> list[dict]:
    rng = np.random.default_rng(4)
    return [
        {"image": Image.fromarray(rng.integers(0, 256, (12, 10 + i, 3), dtype=np.uint8)), "group_id": i % 3}
        for i in range(9)
    ]


@pytest.mark.parametrize("fmt,image_format", [("msgpack", "raw"), ("json", "png")])
def test_ray_serve_answers_exactly_like_the_uvicorn_server(ray_url, uvicorn_url, fmt, image_format):
    body = wire.encode_request(samples(), fmt=fmt, image_format=image_format)
    kind = wire.content_type(fmt)
    answers = [request(url, "POST", "/v1/score", body, {"Content-Type": kind}) for url in (ray_url, uvicorn_url)]
    assert [a[0] for a in answers] == [200, 200]
    assert answers[0][1] == answers[1][1]
    assert request(ray_url, "GET", "/v1/rewards")[1] == request(uvicorn_url, "GET", "/v1/rewards")[1]
    bad = wire.dumps({"protocol": 2, "samples": [{}]}, fmt)
    refused = [request(url, "POST", "/v1/score", bad, {"Content-Type": kind}) for url in (ray_url, uvicorn_url)]
    assert [r[0] for r in refused] == [400, 400] and refused[0][1] == refused[1][1]


def test_the_remote_reward_through_ray_serve_equals_local_scoring(ray_url, config):
    cfg = {
        "rewards": [
            {"name": "jpeg", "reward_model": "remote", "kwargs": {"url": ray_url, "rewards": ["jpeg"]}},
            {"name": "rank", "reward_model": "remote", "kwargs": {"url": ray_url, "rewards": ["rank"]}},
        ]
    }
    got = rewardzoo.build_processors(cfg)[0]([rewardzoo.Sample(**s) for s in samples()])
    want = rewardzoo.build_processors(config)[0]([rewardzoo.Sample(**s) for s in samples()])
    for name in ("jpeg", "rank"):
        np.testing.assert_array_equal(got.rewards[name], want.rewards[name])
    with RewardClient(ray_url) as client:
        assert [r["name"] for r in client.rewards] == ["jpeg", "rank"]


def test_the_ray_command_passes_its_options_to_the_deployment(config, monkeypatch, capsys):
    """``rewardzoo serve --ray``'s wiring, with Ray's start and run replaced (a second Ray instance in this
    module would be a second cluster on the machine); the deployment itself is the one tested above."""
    from rewardzoo.jobs import ServeJob
    from rewardzoo.serve import ray_serve
    from rewardzoo.serve.server import add_serve_arguments, serve_options

    seen: dict = {}
    monkeypatch.setattr(ray_serve.serve, "start", lambda **kw: seen.setdefault("start", kw))
    monkeypatch.setattr(ray_serve.serve, "run", lambda app, **kw: seen.setdefault("run", (app, kw)))
    monkeypatch.setattr(ray_serve.serve, "shutdown", lambda: seen.setdefault("serve_shutdown", True))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # this module's own Ray instance runs
    monkeypatch.setattr(ray, "init", lambda **kw: seen.setdefault("init", kw))
    monkeypatch.setattr(ray, "shutdown", lambda: seen.setdefault("ray_shutdown", True))
    monkeypatch.setattr(ray, "get_runtime_context", lambda: argparse.Namespace(gcs_address="10.0.0.1:6379"))
    drain_signal = object()
    monkeypatch.setattr(ray_serve, "DrainSignal", argparse.Namespace(remote=lambda: drain_signal))

    def interrupt(_):
        raise KeyboardInterrupt

    monkeypatch.setattr(ray_serve.time, "sleep", interrupt)
    args = add_serve_arguments(argparse.ArgumentParser()).parse_args(
        [
            str(config),
            "--ray",
            "--replicas",
            "3",
            "--gpus-per-replica",
            "0.5",
            "--port",
            "9123",
            "--max-batch",
            "7",
            "--address",
            "ray://head:10001",
        ]
    )
    job = ServeJob.from_options(vars(args))
    options, limits = serve_options(job)
    assert ray_serve.run_ray(str(config), job, options, limits) == 0
    assert seen["init"]["address"] == "ray://head:10001"
    assert seen["start"] == {"http_options": {"host": "127.0.0.1", "port": 9123}}
    app, kw = seen["run"]
    assert kw == {"name": "rewardzoo", "route_prefix": "/"}
    deployment = app._bound_deployment
    assert deployment.num_replicas == 3 and deployment.ray_actor_options["num_gpus"] == 0.5
    assert deployment.init_args[2].max_batch == 7 and deployment.init_args[1] == "train"
    assert deployment.init_args[4:] == (drain_signal, 25.0, ())  # drains on SIGTERM (test_serve_stop); no group
    assert seen["serve_shutdown"] and seen["ray_shutdown"]
    assert "this machine only" in capsys.readouterr().err
