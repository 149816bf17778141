"""Worker-backed entries behind the other front doors: ``rewardzoo serve`` (the worker is the server's child and
goes with it) and the distributed processor of a single rank."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import rewardzoo

from .conftest import HERE, alive, gone_within, needs_linux
from .worker_rewards import brightness

pytestmark = [needs_linux, pytest.mark.usefixtures("no_leftover_workers")]


def test_serve_scores_through_a_worker_that_stops_with_the_server(tmp_path):
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    from rewardzoo.serve import RewardClient
    from tests.serve.helpers import Server

    config = tmp_path / "served.yaml"
    config.write_text(
        f"rewards:\n  - name: bright\n    reward_model: {HERE}:Brightness\n    device: cpu\n"
        f"    environment: {{python: {sys.executable}}}\n"
    )
    server = Server(config).start()
    try:
        rng = np.random.default_rng(3)
        images = [rng.integers(0, 256, (96, 128, 3), dtype=np.uint8) for _ in range(3)]
        with RewardClient(server.url) as client:
            result = client.score([rewardzoo.Sample(image=img, prompt="x") for img in images])
            assert client.rewards[0]["higher_is_better"] is False  # the worker's class says so
        np.testing.assert_allclose(result.rewards["bright"], brightness(images), rtol=1e-6)
        worker = int(result.extras["bright"]["pid"][0])
        assert worker not in (server.proc.pid,) and alive(worker)
    finally:
        server.stop()
    assert gone_within(worker, 5)


def test_the_distributed_processor_of_one_rank_scores_through_a_worker():
    from rewardzoo.core.api import build_processors

    config = {
        "rewards": [
            {
                "name": "bright",
                "reward_model": f"{HERE}:Brightness",
                "device": "cpu",
                "environment": {"python": sys.executable},
            }
        ]
    }
    train, evals = build_processors(config, distributed=True)
    try:
        assert train.rewards["bright"] is evals.rewards["bright"]  # one instance, one worker
        images = [np.full((8, 8, 3), v, np.uint8) for v in (0, 51, 255)]
        result = train([rewardzoo.Sample(image=img, prompt="x") for img in images])
        np.testing.assert_allclose(result.rewards["bright"], [0.0, 0.2, 1.0], rtol=1e-6)
    finally:
        train.loader.close()
