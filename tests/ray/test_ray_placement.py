"""Per-entry placement on Ray (``ray:`` blocks): each group of entries that share a model gets a Serve deployment
and a Ray Data stage of its own, with the block's resources as Ray reports them, and the answers equal the
in-process processor's. One Ray instance for the module, with logical GPUs declared on this GPU-less machine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'rewardzoo[ray]')")
serve = pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'rewardzoo[serve-ray]')")
pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'rewardzoo[ray]')")
pytest.importorskip("starlette")

from PIL import Image

from rewardzoo.serve import ServeOptions, reward_deployment
from rewardzoo.serve.app import _decode
from rewardzoo.serve.service import RewardService
from rewardzoo.transport import wire
from tests.serve.helpers import free_port, request

ROOT = Path(__file__).resolve().parents[2]


def config_text(marker: Path) -> str:
    return (
        "rewards:\n"
        "  - {name: jpeg, reward_model: jpeg_compressibility, batch_size: 3, weight: {a: 2.0, b: 0.5}}\n"
        "  - name: inc\n    reward_model: jpeg_incompressibility\n    applicable_datasets: [a]\n"
        "    ray: {num_gpus: 0.5, num_cpus: 0.5, replicas: 2, max_ongoing_requests: 8}\n"
        "  - {name: rank, reward_model: group_rank, kwargs: {base: jpeg_incompressibility}, weight: 0.25}\n"
        f"  - name: tiny\n    reward_model: tests.ray.rewards:TinyLinear\n    kwargs: {{marker: '{marker}'}}\n"
        "    batch_size: 4\n    ray: {num_gpus: 1, num_cpus: 0.25}\n"
    )


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    # address="local": a fresh instance; num_gpus: logical GPUs, which Ray schedules on although none exists
    ray.init(
        address="local",
        num_cpus=8,
        num_gpus=4,
        include_dashboard=False,
        logging_level="ERROR",
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("placement")
    (root / "cfg.yaml").write_text(config_text(root / "marker.txt"))
    rng = np.random.default_rng(7)
    lines = []
    for i in range(10):
        img = (rng.random((12 + i, 10, 3)) ** (i % 3 + 1) * 255).astype(np.uint8)
        Image.fromarray(img).save(root / f"{i}.png")
        lines.append({"image": f"{i}.png", "dataset": "a" if i % 3 else "b", "group_id": i % 2})
    (root / "m.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return root


def samples() -> list[dict]:
    rng = np.random.default_rng(4)
    return [
        {
            "image": Image.fromarray(rng.integers(0, 256, (12, 10 + i, 3), dtype=np.uint8)),
            "dataset": "a" if i % 4 else "b",
            "group_id": i % 3,
        }
        for i in range(9)
    ]


def test_serve_deploys_each_model_group_with_its_placement_and_answers_as_in_process(files):
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        app = reward_deployment(files / "cfg.yaml", options=ServeOptions(max_wait_ms=2), cpus_per_replica=0.5)
        serve.run(app, name="rewardzoo", route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        deployments = serve.status().applications["rewardzoo"].deployments
        running = {name: d.replica_states.get("RUNNING", 0) for name, d in deployments.items()}
        assert running == {"rewardzoo": 1, "rewardzoo-inc": 2, "rewardzoo-tiny": 1}  # rank shares inc's model

        from ray.serve.context import _get_global_client  # what `serve status` and the dashboard report

        details = _get_global_client().get_serve_details()["applications"]["rewardzoo"]["deployments"]
        config = {name: d["deployment_config"] for name, d in details.items()}
        placed = {
            name: (c["num_replicas"], c["ray_actor_options"]["num_gpus"], c["ray_actor_options"]["num_cpus"])
            for name, c in config.items()
        }
        assert placed == {"rewardzoo": (1, 0.0, 0.5), "rewardzoo-inc": (2, 0.5, 0.5), "rewardzoo-tiny": (1, 1.0, 0.25)}
        ongoing = {name: c["max_ongoing_requests"] for name, c in config.items()}
        assert ongoing == {"rewardzoo": 256, "rewardzoo-inc": 8, "rewardzoo-tiny": 256}
        used = {k: ray.cluster_resources()[k] - ray.available_resources().get(k, 0) for k in ("GPU", "CPU")}
        assert used == {"GPU": 2.0, "CPU": 1.75}  # what the replicas hold (Serve's own actors hold none)
        device, visible = (files / "marker.txt").read_text().split(" ")
        assert device == "cpu" and visible  # Ray set CUDA_VISIBLE_DEVICES; the reward still resolved the CPU

        body = wire.encode_request(samples(), fmt="json", image_format="png")
        status, got, _ = request(url, "POST", "/v1/score", body, {"Content-Type": wire.content_type("json")})
        assert status == 200, got
        service = RewardService(str(files / "cfg.yaml")).load()  # the in-process answer, from the same body
        key, batch = _decode(service, wire.loads(body, "json", service.limits), service.limits)
        want = service.score(key, [batch])[0]
        assert json.loads(got) == json.loads(wire.dumps(want, "json"))
        assert set(json.loads(got)["extras"]["tiny"]) == {"norm"}  # the placed entry's extras came back
        listed = json.loads(request(url, "GET", "/v1/rewards")[1])
        assert listed.pop("wire")["frames"] is True  # the server's transports (the same app as `serve`)
        assert listed == json.loads(wire.dumps(service.reward_list(), "json"))
    finally:
        serve.shutdown()


def test_ray_data_scores_each_model_group_in_a_stage_with_its_placement_equal_to_local(files):
    from rewardzoo.cli import main
    from rewardzoo.core.resolve import load_config
    from rewardzoo.jobs.inputs import read_input
    from rewardzoo.jobs.plan import group_preserving_chunks
    from rewardzoo.ray.engine import scored_chunks

    rows = read_input(files / "m.jsonl", tables=True)
    specs = list(load_config(files / "cfg.yaml").rewards)
    ds = scored_chunks(rows, group_preserving_chunks(rows.samples, 4), specs, 1, 0, 0.5)
    stages, op = [], ds._logical_plan.dag  # the map_batches stages, last first
    while op.input_dependencies:
        stages.append((op.compute.min_size, op.ray_remote_args.get("num_gpus"), op.ray_remote_args["num_cpus"]))
        op = op.input_dependencies[0]
    assert stages[::-1] == [(2, 0.5, 0.5), (1, 1.0, 0.25), (1, None, 0.5)]  # inc (+ rank), tiny, then jpeg
    common = ["--input", files / "m.jsonl", "-q", "--chunk-size", 4]
    assert main(["score", str(files / "cfg.yaml"), "--out", str(files / "local.jsonl"), *map(str, common)]) == 0
    ray_run = ["--out", files / "ray.jsonl", "--engine", "ray", "--cpus-per-actor", 0.5, *common]
    assert main(["score", str(files / "cfg.yaml"), *map(str, ray_run)]) == 0
    assert (files / "ray.jsonl").read_bytes() == (files / "local.jsonl").read_bytes()
