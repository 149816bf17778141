"""Malformed and hostile requests: each is refused with a 4xx and a message that says what is wrong (naming the
limit where one applies), nothing is executed, and the server keeps answering the next valid request."""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import zlib

import numpy as np
import pytest

msgpack = pytest.importorskip("msgpack")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from PIL import Image

from rewardzoo.transport import wire

from .helpers import Server, environment, request

TOKEN = "test-token-7f3a"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MP = {"Content-Type": "application/msgpack", **AUTH}
CONFIG = (
    "rewards:\n  - name: jpeg\n    reward_model: jpeg_compressibility\n    applicable_datasets: [image]\n"
    "  - name: loud\n    reward_model: loudness\n    applicable_datasets: [audio]\n"
    "  - name: flicker\n    reward_model: video_temporal_flickering\n    applicable_datasets: [video]\n"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_payloads")
    (root / "cfg.yaml").write_text(CONFIG)
    srv = Server(
        root / "cfg.yaml",
        "--token-env",
        "RZ_TEST_TOKEN",
        "--max-request-mb",
        "1",
        "--max-samples",
        "4",
        "--max-pixels",
        "250000",
        "--max-audio-seconds",
        "2",
        "--max-frames",
        "8",
        env=environment(RZ_TEST_TOKEN=TOKEN),
    ).start()
    srv.root = root
    yield srv
    srv.stop()


def png(h: int = 16, w: int = 16, seed: int = 0) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def png_header(width: int, height: int) -> bytes:
    """A PNG signature and a valid IHDR chunk announcing width x height, and nothing else."""
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return wire._PNG_SIGNATURE + struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))


def body(samples, **top) -> bytes:
    return msgpack.packb({"protocol": 1, "samples": samples, **top}, use_bin_type=True)


def image_sample(**image) -> dict:
    return {"dataset": "image", "image": image}


def audio(arr: np.ndarray, rate: int = 16000, dtype: str = "float32") -> dict:
    return {"format": "raw", "dtype": dtype, "shape": list(arr.shape), "sample_rate": rate, "data": arr.tobytes()}


class Evil:
    """A pickle that would create a directory if anything unpickled it."""

    marker = ""

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


# (id, body, headers, status, words in the message, limit)
def cases(marker: str) -> list[tuple]:
    Evil.marker = marker
    evil = pickle.dumps({"images": [Evil()]})
    good_png = png()
    return [
        (
            "no_token",
            body([image_sample(format="png", data=good_png)]),
            {"Content-Type": "application/msgpack"},
            401,
            "Bearer",
            None,
        ),
        (
            "wrong_token",
            body([image_sample(format="png", data=good_png)]),
            {"Content-Type": "application/msgpack", "Authorization": "Bearer nope"},
            403,
            "not valid",
            None,
        ),
        (
            "basic_auth",
            body([image_sample(format="png", data=good_png)]),
            {"Content-Type": "application/msgpack", "Authorization": "Basic dXNlcjpwYXNz"},
            401,
            "Bearer",
            None,
        ),
        ("pickle_content_type", evil, {"Content-Type": "application/python-pickle", **AUTH}, 415, "pickles", None),
        ("pickle_octet_stream", evil, {"Content-Type": "application/octet-stream", **AUTH}, 415, "Content-Type", None),
        ("pickle_as_msgpack", evil, MP, 400, "MessagePack", None),
        ("pickle_as_json", evil, {"Content-Type": "application/json", **AUTH}, 400, "JSON", None),
        ("bad_json", b'{"protocol": 1, "samples": [', {"Content-Type": "application/json", **AUTH}, 400, "JSON", None),
        (
            "json_nan",
            b'{"protocol": 1, "samples": [{"prompt": NaN}]}',
            {"Content-Type": "application/json", **AUTH},
            400,
            "NaN",
            None,
        ),
        (
            "deep_json",  # deeper than the parser recurses, within the containers a request may hold
            b'{"protocol": 1, "samples": ' + b"[" * 2000 + b"]" * 2000 + b"}",
            {"Content-Type": "application/json", **AUTH},
            400,
            "JSON",
            None,
        ),
        (
            "json_container_flood",  # counted before it is parsed: 200,000 arrays are more than 512 samples hold
            b'{"protocol": 1, "samples": ' + b"[" * 200000 + b"]" * 200000 + b"}",
            {"Content-Type": "application/json", **AUTH},
            413,
            "maps, arrays and items",
            "max_samples",
        ),
        ("json_array", b"[1, 2]", {"Content-Type": "application/json", **AUTH}, 400, "map", None),
        ("msgpack_garbage", b"\xc1\xc1\xc1", MP, 400, "MessagePack", None),
        (
            "msgpack_ext",
            msgpack.packb({"protocol": 1, "samples": [msgpack.ExtType(42, b"x")]}),
            MP,
            400,
            "extension type 42",
            None,
        ),
        (
            "wrong_protocol",
            body([image_sample(format="png", data=good_png)], protocol=2),
            MP,
            400,
            "protocol version 2",
            None,
        ),
        ("no_protocol", msgpack.packb({"samples": [{"prompt": "x"}]}), MP, 400, "protocol version None", None),
        (
            "bytes_key_top",
            msgpack.packb({b"x": 1, "y": 2, "protocol": 1, "samples": [{"prompt": "a"}]}, use_bin_type=True),
            MP,
            400,
            "keys must be strings",
            None,
        ),
        ("bytes_key_sample", body([{b"dataset": "image"}]), MP, 400, "keys must be strings", None),
        (
            "unknown_key",
            body([image_sample(format="png", data=good_png)], code="print(1)"),
            MP,
            400,
            "unknown request key",
            None,
        ),
        ("empty_samples", body([]), MP, 400, "non-empty list", None),
        ("unknown_field", body([{"dataset": "image", "shell": "rm -rf /"}]), MP, 400, "unknown field", None),
        (
            "float_group_id",
            body([{**image_sample(format="png", data=good_png), "group_id": 1.5}]),
            MP,
            400,
            "int or a string",
            None,
        ),
        (
            "metadata_list",
            body([{**image_sample(format="png", data=good_png), "metadata": [1]}]),
            MP,
            400,
            "map or a JSON string",
            None,
        ),
        (
            "unknown_reward",
            body([image_sample(format="png", data=good_png)], rewards=["jpegg"]),
            MP,
            400,
            "unknown reward 'jpegg'",
            None,
        ),
        ("not_png", image_sample(format="png", data=b"GIF89a" + b"\0" * 40), None, 400, "not a PNG", None),
        ("jpeg_format", image_sample(format="jpeg", data=b"\xff\xd8\xff"), None, 400, "not supported", None),
        (
            "png_50000_square_header",
            image_sample(format="png", data=png_header(50000, 50000)),
            None,
            413,
            "50000x50000",
            "max_pixels",
        ),
        ("png_truncated", image_sample(format="png", data=good_png[:60]), None, 400, "cannot be decoded", None),
        (
            "raw_truncated",
            image_sample(format="raw", dtype="uint8", shape=[10, 10, 3], data=b"\0" * 299),
            None,
            400,
            "299 bytes",
            None,
        ),
        (
            "raw_shape_mismatch",
            image_sample(format="raw", dtype="uint8", shape=[10, 10, 3], data=b"\0" * 400),
            None,
            400,
            "needs 300",
            None,
        ),
        (
            "raw_float_image",
            image_sample(format="raw", dtype="float32", shape=[2, 2, 3], data=b"\0" * 48),
            None,
            400,
            "uint8",
            None,
        ),
        (
            "raw_negative_shape",
            image_sample(format="raw", dtype="uint8", shape=[-1, 4, 3], data=b""),
            None,
            400,
            "positive ints",
            None,
        ),
        (
            "raw_too_many_pixels",
            image_sample(format="raw", dtype="uint8", shape=[1000, 1000, 1], data=b""),
            None,
            413,
            "1000x1000",
            "max_pixels",
        ),
        ("json_bad_base64", None, None, 400, "base64", None),
        ("nan_audio", {"dataset": "audio", "audio": audio(np.full(1600, np.nan, np.float32))}, None, 422, "NaN", None),
        (
            "audio_too_long",
            {"dataset": "audio", "audio": audio(np.zeros(48000, np.float32))},
            None,
            413,
            "3.0 s",
            "max_audio_seconds",
        ),
        (
            "audio_rate_zero",
            {"dataset": "audio", "audio": audio(np.zeros(160, np.float32), rate=0)},
            None,
            400,
            "sample_rate",
            None,
        ),
        (
            "audio_float64",
            {"dataset": "audio", "audio": {**audio(np.zeros(160)), "dtype": "float64"}},
            None,
            400,
            "dtype",
            None,
        ),
        (
            "video_too_many_frames",
            {"dataset": "video", "video": {"frames": [{"format": "png", "data": good_png}] * 9}},
            None,
            413,
            "9 frames",
            "max_frames",
        ),
        (
            "too_many_samples",
            body([image_sample(format="png", data=good_png)] * 5),
            MP,
            413,
            "5 samples",
            "max_samples",
        ),
        (
            "over_size_limit",
            body([image_sample(format="raw", dtype="uint8", shape=[400, 600, 3], data=b"\0" * 720000)] * 2),
            MP,
            413,
            "bytes",
            "max_request_bytes",
        ),
        (
            "missing_required_field",
            body([{"dataset": "image", "prompt": "no image"}]),
            MP,
            422,
            "field 'image', reward 'jpeg': missing required field",
            None,
        ),
    ]


def _prepared(case, marker):
    name, payload, headers, status, words, limit = case
    if name == "json_bad_base64":
        payload = json.dumps(
            {"protocol": 1, "samples": [{"dataset": "image", "image": {"format": "png", "data": "!!not base64!!"}}]}
        ).encode()
        headers = {"Content-Type": "application/json", **AUTH}
    elif isinstance(payload, dict):  # one sample
        payload, headers = body([payload]), MP
    return name, payload, headers, status, words, limit


CASE_IDS = [c[0] for c in cases("")]


def test_there_are_at_least_25_hostile_payloads():
    assert len(CASE_IDS) >= 25 and len(set(CASE_IDS)) == len(CASE_IDS)


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_hostile_payload_is_refused_and_the_server_keeps_serving(server, case_id):
    marker = str(server.root / "pwned")
    case = next(c for c in cases(marker) if c[0] == case_id)
    _name, payload, headers, status, words, limit = _prepared(case, marker)
    before = server.metrics(TOKEN)["rewardzoo_samples_total"]
    got, answer, _ = request(server.url, "POST", "/v1/score", payload, headers)
    assert got == status, answer[:300]
    error = (msgpack.unpackb(answer) if headers.get("Content-Type") == "application/msgpack" else json.loads(answer))[
        "error"
    ]  # refusals come in the request's format
    assert words in error["message"], error
    assert error["limit"] == limit
    assert not os.path.exists(marker), "a pickle was executed"
    assert server.metrics(TOKEN)["rewardzoo_samples_total"] == before, "a refused request was scored"
    # the next valid request is answered
    ok, answer, _ = request(server.url, "POST", "/v1/score", body([image_sample(format="png", data=png(seed=1))]), MP)
    assert ok == 200
    result = wire.decode_result(msgpack.unpackb(answer))
    assert result["applied"] == [["jpeg"]] and result["rewards"]["jpeg"][0] < 0


def test_a_50000_square_png_header_is_refused_without_decoding():
    """The PNG header is read before any decoding: refusing it allocates nothing near 7.5 GB (here: < 1 MB)."""
    import tracemalloc

    tracemalloc.start()
    with pytest.raises(wire.WireError) as exc:
        wire.decode_image({"format": "png", "data": png_header(50000, 50000) + b"\0" * 64}, wire.WireLimits())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert exc.value.status == 413 and exc.value.limit == "max_pixels" and peak < 2**20


def test_health_and_ready_need_no_token_but_the_rest_does(server):
    assert request(server.url, "GET", "/health")[0] == 200
    assert request(server.url, "GET", "/ready")[0] == 200
    for path in ("/v1/rewards", "/metrics"):
        status, _answer, headers = request(server.url, "GET", path)
        assert status == 401 and headers.get("www-authenticate") == "Bearer"
        assert request(server.url, "GET", path, headers=AUTH)[0] == 200
    assert request(server.url, "GET", "/v1/score", headers=AUTH)[0] == 405
    assert TOKEN not in server.output()


def test_refusals_are_counted_by_kind(server):
    metrics = server.metrics(TOKEN)
    assert metrics.get('rewardzoo_errors_total{kind="limit"}', 0) >= 1
    assert metrics.get('rewardzoo_errors_total{kind="auth"}', 0) >= 1


def test_the_client_cuts_a_call_into_requests_within_the_size_limit(server, monkeypatch):
    import rewardzoo
    from rewardzoo.errors import InputError
    from rewardzoo.serve.client import RewardClient

    monkeypatch.setenv("RZ_TEST_TOKEN", TOKEN)
    rng = np.random.default_rng(3)
    samples = [
        rewardzoo.Sample(image=Image.fromarray(rng.integers(0, 256, (400, 600, 3), dtype=np.uint8)), dataset="image")
        for _ in range(3)
    ]  # 720 kB each raw: one per 1 MiB request
    before = server.metrics(TOKEN)['rewardzoo_requests_total{endpoint="/v1/score",status="200"}']
    with RewardClient(server.url, token_env="RZ_TEST_TOKEN") as client:
        got = client.score(samples)
        want = rewardzoo.RewardProcessor(
            [{"name": "jpeg", "reward_model": "jpeg_compressibility", "applicable_datasets": ["image"]}]
        )(samples)
        np.testing.assert_array_equal(got.rewards["jpeg"], want.rewards["jpeg"])
        after = server.metrics(TOKEN)['rewardzoo_requests_total{endpoint="/v1/score",status="200"}']
        assert after - before == 3
        video = rewardzoo.Sample(video=np.zeros((8, 300, 300, 3), np.uint8), dataset="video")
        with pytest.raises(InputError, match="max_request_bytes=1048576") as exc:
            client.score([samples[0], video])  # one sample too large on its own: refused before it is sent
        assert exc.value.sample == 1
