"""Scores through ``rewardzoo serve`` equal the local processor's: image, video, audio and groupwise rewards on
tiny random-init models, through :mod:`rewardzoo.serve.client`, the ``remote`` reward and flow_grpo's call.

One server (a subprocess on a free port) serves every test of this module.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")
pytest.importorskip("transformers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("msgpack")

from PIL import Image

import rewardzoo
from rewardzoo import testing as rzt
from rewardzoo.errors import ConfigError
from rewardzoo.serve.client import RewardClient, multi_score

from .helpers import Server


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_scores")
    oc = rzt.tiny_open_clip_dir(root / "tiny-open-clip", seed=0)
    head = rzt.aesthetic_head_file(root / "head.safetensors", seed=7)
    clap = rzt.tiny_clap_dir(root / "clap", seed=0)
    aesthetic = {
        "reward_model": "laion_aesthetic",
        "model_path": str(head),
        "device": "cpu",
        "kwargs": {"clip_model": str(oc)},
    }
    cfg = {
        "rewards": [
            {"name": "aesthetic", **aesthetic, "batch_size": 3, "applicable_datasets": ["image"]},
            {
                "name": "clip",
                "reward_model": "clip_score",
                "model_path": str(oc),
                "device": "cpu",
                "applicable_datasets": ["image"],
                "weight": 0.5,
            },
            {
                "name": "rank",
                "reward_model": "group_rank",
                "kwargs": {"base": aesthetic},
                "applicable_datasets": ["image"],
            },
            {
                "name": "video_aes",
                "reward_model": "video_aesthetic",
                "model_path": str(head),
                "device": "cpu",
                "kwargs": {"num_frames": 4, "clip_model": str(oc), "clip_pretrained": None},
                "applicable_datasets": ["video"],
            },
            {
                "name": "clap",
                "reward_model": "clap_score",
                "model_path": str(clap),
                "device": "cpu",
                "applicable_datasets": ["audio"],
            },
            {"name": "loudness", "reward_model": "loudness", "applicable_datasets": ["audio"]},
        ]
    }
    import yaml

    path = root / "served.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def server(config):
    srv = Server(config, "--max-wait-ms", "300", "--max-batch", "64").start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def local(config):
    return rewardzoo.build_processors(config)[0]


def images(n: int, seed: int = 0, size: int = 40) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (size, size + i, 3), dtype=np.uint8)) for i in range(n)]


def image_samples(n: int = 7, seed: int = 0, groups: int = 3) -> list[rewardzoo.Sample]:
    return [
        rewardzoo.Sample(image=img, prompt=f"a photo number {i}", dataset="image", group_id=i % groups)
        for i, img in enumerate(images(n, seed))
    ]


def video_samples() -> list[rewardzoo.Sample]:
    from tests.video.media import textured_frames

    return [rewardzoo.Sample(video=textured_frames(t=6 + i, seed=i), dataset="video") for i in range(3)]


def audio_samples() -> list[rewardzoo.Sample]:
    from tests.audio.signals import noise, speech_like, tone

    return [
        rewardzoo.Sample(
            audio=speech_like(16000, 1.0).astype(np.float32),
            audio_sample_rate=16000,
            prompt="a person talking",
            dataset="audio",
        ),
        rewardzoo.Sample(
            audio=tone(22050, 0.7, channels=2).astype(np.float32),
            audio_sample_rate=22050,
            prompt="a tone",
            dataset="audio",
        ),
        rewardzoo.Sample(
            audio=(noise(16000, 0.5) * 32767).astype(np.int16),
            audio_sample_rate=16000,
            prompt="static",
            dataset="audio",
        ),
    ]


def assert_same(got, want) -> None:
    assert set(got.rewards) == set(want.rewards)
    for name in want.rewards:
        np.testing.assert_array_equal(got.rewards[name], want.rewards[name], err_msg=name)
    np.testing.assert_array_equal(got.total, want.total)
    assert got.applied == want.applied
    for name, extras in want.extras.items():
        for key, values in extras.items():
            np.testing.assert_array_equal(got.extras[name][key], values, err_msg=f"{name}.{key}")
    for name, w in want.weights.items():
        np.testing.assert_array_equal(got.weights[name], w)


@pytest.mark.parametrize("kind", ["image_and_groups", "video", "audio", "all_together"])
def test_client_scores_equal_the_local_processor(server, local, kind):
    samples = {
        "image_and_groups": image_samples,
        "video": video_samples,
        "audio": audio_samples,
        "all_together": lambda: image_samples(4) + video_samples() + audio_samples(),
    }[kind]()
    with RewardClient(server.url) as client:
        got = client.score(samples)
    want = local(samples)
    assert not np.isnan(want.total).any()
    assert_same(got, want)


@pytest.mark.parametrize("fmt,image_format", [("json", "png"), ("msgpack", "png"), ("json", "raw")])
def test_json_and_raw_images_give_the_same_scores(server, local, fmt, image_format):
    samples = image_samples(5, seed=3) + video_samples()[:1]
    with RewardClient(server.url, fmt=fmt, image_format=image_format) as client:
        assert_same(client.score(samples), local(samples))


def test_groups_of_concurrent_requests_are_batched_together_but_never_mixed(server, local):
    """Two clients send groups with the same group_ids at once: the server merges the requests into one batch
    (its metrics show a batch of 2 requests) and still ranks each request's groups on their own."""
    before = server.metrics()
    batches = [image_samples(6, seed=10), image_samples(6, seed=11)]
    results: list = [None, None]
    start = threading.Barrier(2, timeout=30)

    def send(i: int) -> None:
        with RewardClient(server.url) as client:
            start.wait()
            results[i] = client.score(batches[i], ["rank", "aesthetic"])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    after = server.metrics()
    merged = after["rewardzoo_batch_requests_count"] - before["rewardzoo_batch_requests_count"]
    one_request = after['rewardzoo_batch_requests_bucket{le="1"}'] - before['rewardzoo_batch_requests_bucket{le="1"}']
    assert merged == 1 and one_request == 0, "the two requests were not scored as one batch"
    local_subset = rewardzoo.RewardProcessor([s for s in local.specs if s.name in ("aesthetic", "rank")], local.loader)
    for got, samples in zip(results, batches):
        want = local_subset(samples)
        np.testing.assert_array_equal(got.rewards["rank"], want.rewards["rank"])
        np.testing.assert_array_equal(got.rewards["aesthetic"], want.rewards["aesthetic"])
    # had the groups been mixed, group 0 would hold 4 samples and the ranks would be thirds, not halves
    assert set(np.round(results[0].rewards["rank"] * 2, 6)) <= {0.0, 1.0, 2.0}


def test_a_remote_entry_scores_like_the_served_stream_and_carries_its_facts(server, local):
    cfg = {
        "rewards": [
            {
                "name": "aes",
                "reward_model": "remote",
                "batch_size": 2,
                "kwargs": {"url": server.url, "rewards": ["aesthetic"]},
            },
            {"name": "rnk", "reward_model": "remote", "kwargs": {"url": server.url, "rewards": ["rank"]}},
        ]
    }
    trainer = rewardzoo.build_processors(cfg)[0]
    samples = image_samples(7)
    got, want = trainer(samples), local(samples)
    with pytest.raises(rewardzoo.InputError, match="field 'dataset', reward 'aes': missing"):
        trainer([rewardzoo.Sample(image=samples[0].image, group_id=1)])  # the server routes by dataset
    # the served model sees batches of 2 (this entry's batch_size, as the server's batcher forms them) where the
    # local processor sees 7: float32 matrix kernels then round the last bit differently (seen: 1.5e-8, 1 ulp)
    np.testing.assert_allclose(got.rewards["aes"], want.rewards["aesthetic"], rtol=1e-6, atol=0)
    np.testing.assert_array_equal(got.rewards["rnk"], want.rewards["rank"])
    aes, rnk = trainer.rewards["aes"], trainer.rewards["rnk"]
    served = local.rewards["aesthetic"].info
    assert aes.info.score_range == served.score_range and aes.info.higher_is_better is served.higher_is_better
    assert aes.info.name == "remote" and aes.info.card.name == "remote.md"  # the card stays the record
    assert aes.kind == "pointwise" and rnk.kind == "groupwise" and rnk.info.kind == "groupwise"
    assert rnk.info.score_range == (0.0, 1.0)
    assert set(aes.inputs.fields) == {"image", "dataset"} and "group_id" in rnk.inputs.fields


def test_a_remote_entry_of_a_served_groupwise_reward_is_groupwise_for_the_engine(server, local):
    cfg = {
        "rewards": [
            {
                "name": "rnk",
                "reward_model": "remote",
                "batch_size": 1,
                "kwargs": {"url": server.url, "rewards": ["rank"]},
            }
        ]
    }
    trainer = rewardzoo.build_processors(cfg)[0]
    rnk = trainer.rewards["rnk"]
    from rewardzoo.registry import info

    assert rnk.kind == "groupwise" and type(rnk).kind == info("remote").kind == "per-instance"
    samples = image_samples(7)
    # batch_size 1 would give a pointwise reward one sample per call: ranks in groups of one are all 0
    got = trainer(samples).rewards["rnk"]
    np.testing.assert_array_equal(got, local(samples).rewards["rank"])
    assert len(set(got.tolist())) > 1


def test_one_remote_entry_naming_several_served_rewards_sums_them_and_reports_each(server, local):
    cfg = {
        "rewards": [
            {
                "name": "both",
                "reward_model": "remote",
                "kwargs": {"url": server.url, "rewards": {"aesthetic": 1.0, "clip": 0.25}},
            }
        ]
    }
    trainer = rewardzoo.build_processors(cfg)[0]
    samples = image_samples(4, seed=5)
    got, want = trainer(samples), local(samples)
    np.testing.assert_allclose(
        got.rewards["both"],
        want.rewards["aesthetic"].astype(np.float64) + 0.25 * want.rewards["clip"].astype(np.float64),
        rtol=1e-6,
    )
    np.testing.assert_array_equal(got.extras["both"]["clip"], want.rewards["clip"])
    lo_a, hi_a = local.rewards["aesthetic"].info.score_range
    lo_c, hi_c = local.rewards["clip"].info.score_range
    assert trainer.rewards["both"].info.score_range == (lo_a + 0.25 * lo_c, hi_a + 0.25 * hi_c)
    assert set(trainer.rewards["both"].inputs.fields) == {"image", "prompt", "dataset"}


def test_unknown_served_names_and_a_model_path_are_config_errors(server):
    with pytest.raises(ConfigError, match="serves no reward 'aesthetik'.*did you mean 'aesthetic'") as exc:
        rewardzoo.build_processors(
            {
                "rewards": [
                    {"name": "x", "reward_model": "remote", "kwargs": {"url": server.url, "rewards": ["aesthetik"]}}
                ]
            }
        )
    assert "entry 'x'" in str(exc.value)
    with pytest.raises(ConfigError, match="no model_path"):
        rewardzoo.load_reward({"name": "remote", "model_path": "x", "kwargs": {"url": server.url, "rewards": ["clip"]}})


def test_flow_grpo_multi_score_drop_in(server, local):
    reward_fn = multi_score(server.url, {"aesthetic": 1.0, "clip": 2.0}, dataset_key="dataset")
    rng = np.random.default_rng(9)
    imgs = [Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(4)]
    batch = torch.stack([torch.from_numpy(np.asarray(i, dtype=np.float32) / 255).permute(2, 0, 1) for i in imgs])
    details, extra = reward_fn(batch, [f"p{i}" for i in range(4)], [{"dataset": "image"}] * 4, only_strict=True)
    subset = rewardzoo.RewardProcessor([s for s in local.specs if s.name in ("aesthetic", "clip")], local.loader)
    want = subset([rewardzoo.Sample(image=img, prompt=f"p{i}", dataset="image") for i, img in enumerate(imgs)])
    assert extra == {} and set(details) == {"aesthetic", "clip", "avg"}
    with pytest.raises(rewardzoo.InputError, match="no served reward gives this sample a score"):
        multi_score(server.url, {"aesthetic": 1.0})(batch, ["p"] * 4, [{}] * 4)  # no dataset: nothing applies
    np.testing.assert_array_equal(details["aesthetic"], want.rewards["aesthetic"])
    np.testing.assert_allclose(details["avg"], want.rewards["aesthetic"] + 2 * want.rewards["clip"], rtol=1e-6)


def test_reward_list_health_and_metrics(server, local):
    with RewardClient(server.url) as client:
        rows = {r["name"]: r for r in client.rewards}
        assert client.health()
    assert list(rows) == [s.name for s in local.specs]
    assert rows["rank"]["kind"] == "groupwise" and rows["clap"]["fields"] == list(local.rewards["clap"].inputs.fields)
    assert rows["aesthetic"]["applicable_datasets"] == ["image"] and rows["clip"]["weight"] == 0.5
    metrics = server.metrics()
    assert metrics["rewardzoo_ready"] == 1 and metrics["rewardzoo_samples_total"] > 0
    assert metrics['rewardzoo_requests_total{endpoint="/v1/score",status="200"}'] > 0
    assert "rewardzoo listening" not in server.output() and "reachable from this machine only" in server.output()
