"""Framed bodies and same-host shared memory: negotiated locally, refused otherwise, the same scores as the body;
PNG images decoded in parallel give the pixels (and scores) of the serial decode."""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import tempfile

import msgpack
import numpy as np
import pytest
import yaml

import rewardzoo
from rewardzoo.serve.client import RewardClient
from rewardzoo.transport import frames, wire

from .helpers import Server, request

pytestmark = pytest.mark.skipif(not frames.shm_available(), reason="needs memfd_create and file seals (Linux)")


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve_shm") / "jpeg.yaml"
    path.write_text(yaml.safe_dump({"rewards": [{"name": "jpeg", "reward_model": "jpeg_compressibility"}]}))
    return path


@pytest.fixture(scope="module")
def server(config):
    srv = Server(config, "--max-wait-ms", "0").start()
    yield srv
    srv.stop()


def samples(n: int = 5, seed: int = 0) -> list[rewardzoo.Sample]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):  # sizes differ; smooth and noisy images score apart
        h, w = 48 + 8 * i, 40 + 4 * i
        base = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3)).repeat(8, 0).repeat(8, 1)[:h, :w]
        noise = rng.integers(-40 * (i % 2), 40 * (i % 2) + 1, (h, w, 3))
        out.append(rewardzoo.Sample(image=np.clip(base + noise, 0, 255).astype(np.uint8), prompt=f"p{i}"))
    return out


def test_shm_is_negotiated_locally_and_scores_equal_the_body_and_in_process(server, config):
    want = rewardzoo.build_processors(config)[0](samples()).rewards["jpeg"]
    got = {}
    for name, kwargs in {
        "shm": {},
        "frames": {"shm": False},
        "json": {"fmt": "json"},
        "png": {"image_format": "png"},
    }.items():
        with RewardClient(server.url, **kwargs) as client:
            got[name] = client.score(samples()).rewards["jpeg"]
            assert client.transport == {"json": "body", "png": "shm"}.get(name, name)
            assert client.server._shm is kwargs.get("shm", True)  # no refusal fell back to the body
    for name, scores in got.items():
        np.testing.assert_array_equal(scores, want, err_msg=name)


def test_a_remote_looking_client_is_refused_and_the_client_falls_back_to_the_body(server):
    payload = wire.request_map([{"image": s.image} for s in samples(2)], image_format="raw")
    with frames.SharedBody(payload) as shared:
        for headers in ({"X-Forwarded-For": "10.1.2.3"}, {"Forwarded": "for=10.1.2.3"}):
            status, body, _ = request(
                server.url, "POST", "/v1/score", shared.body, {"Content-Type": frames.FRAMES, **headers}
            )
            assert status == 403, body
            assert msgpack.unpackb(body)["error"]["kind"] == "shm"
        status, body, _ = request(server.url, "POST", "/v1/score", shared.body, {"Content-Type": frames.FRAMES})
        assert status == 200, body  # the same request from the loopback itself
    # a client whose requests arrive through a proxy: refused once, then the media travel in the body
    with RewardClient(server.url) as client:
        client.server.http._headers["X-Forwarded-For"] = "10.1.2.3"
        assert client.transport == "shm"
        direct = client.score(samples(2)).rewards["jpeg"]
        assert client.transport == "frames" and client.server._shm is False
    with RewardClient(server.url, shm=False) as plain:
        np.testing.assert_array_equal(direct, plain.score(samples(2)).rewards["jpeg"])


def test_who_is_local():
    assert frames.client_is_local(("127.0.0.1", 5000), {}) is None
    assert frames.client_is_local(("::1", 5000), {}) is None
    assert "loopback" in frames.client_is_local(("10.0.0.7", 5000), {})
    assert "loopback" in frames.client_is_local(("testclient", 50000), {})
    assert "loopback" in frames.client_is_local(None, {})
    assert "proxy" in frames.client_is_local(("127.0.0.1", 5000), {"x-forwarded-for": "1.2.3.4"})


def _header_naming(fd: int, size: int, host: str | None = None) -> bytes:
    host = frames.host_identity() if host is None else host
    head = {"protocol": 1, "rewards": None, "samples": [{"image": {"format": "raw", "dtype": "uint8"}}]}
    head["samples"][0]["image"].update(shape=[4, 4, 3], data=[0, 48])
    head["shm"] = {"pid": os.getpid(), "fd": fd, "size": size, "host": host}
    return frames._header(head)


def test_shared_memory_the_server_must_not_trust_is_refused():
    refused = []
    # not sealed: the client could change or shrink it while the server reads it
    fd = os.memfd_create(frames.SHM_NAME, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 64)
    refused.append((_header_naming(fd, 64), "sealed"))
    # sealed, but not the size the request names
    sealed = os.memfd_create(frames.SHM_NAME, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(sealed, 64)
    fcntl.fcntl(sealed, fcntl.F_ADD_SEALS, frames._seal_bits())
    refused.append((_header_naming(sealed, 128), "holds 64 bytes"))
    # a file that is not a rewardzoo memfd (any file of this user's processes)
    other = tempfile.TemporaryFile()
    other.write(bytes(64))
    other.flush()
    refused.append((_header_naming(other.fileno(), 64), "not a rewardzoo shared memory"))
    refused.append((_header_naming(10**6, 64), "cannot open"))
    # another host's (or PID namespace's) process: its PID names nothing here
    refused.append((_header_naming(sealed, 64, host="another-boot/pid:[1]/0"), "another host"))
    try:
        for body, why in refused:
            with pytest.raises(frames.ShmRefused, match=why) as info:
                frames.loads_frames(body, shm_allowed=None)
            assert info.value.status == 403 and info.value.kind == "shm"
        with pytest.raises(frames.ShmRefused, match="not on this machine"):
            frames.loads_frames(_header_naming(sealed, 64), shm_allowed="the client is not on this machine")
        data = frames.loads_frames(_header_naming(sealed, 64), shm_allowed=None)  # the one it accepts
        image = wire.decode_request_map(data).samples[0]["image"]
        assert image.shape == (4, 4, 3) and not image.flags.writeable
    finally:
        os.close(fd)
        os.close(sealed)
        other.close()


def test_framed_bodies_are_views_and_bad_references_are_refused():
    arr = np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3)
    pieces, size = frames.encode(wire.request_map([{"image": arr, "prompt": "x"}], image_format="raw"))
    body = bytearray(b"".join(bytes(p) for p in pieces))
    assert len(body) == size
    image = wire.decode_request_map(frames.loads_frames(body)).samples[0]["image"]
    np.testing.assert_array_equal(image, arr)
    assert image.flags.writeable and np.shares_memory(image, np.frombuffer(body, np.uint8))  # the server's own bytes
    assert not wire.decode_request_map(frames.loads_frames(bytes(body))).samples[0]["image"].flags.writeable
    head = msgpack.unpackb(bytes(body[8 : 8 + int.from_bytes(body[4:8], "little")]))
    for bad in ([0, size], [-1, 10], [0], ["0", 1]):
        head["samples"][0]["image"]["data"] = bad
        with pytest.raises(wire.WireError, match="buffer reference") as info:
            frames.loads_frames(frames._header(head) + bytes(64))
        assert info.value.status == 400
    with pytest.raises(wire.WireError, match="RZF1"):
        frames.loads_frames(b"PK\x03\x04" + bytes(60))


def test_pngs_decoded_in_parallel_equal_the_serial_decode():
    from PIL import Image

    rng = np.random.default_rng(3)
    arrays = [rng.integers(0, 256, (30 + i, 20 + 2 * i, 3), dtype=np.uint8) for i in range(6)]
    video = {"frames": [wire.encode_image(a[:16, :16], "png") for a in arrays[:3]]}
    sample = {"image": wire.encode_image(arrays[0], "png"), "video": video}
    sample["condition_images"] = [wire.encode_image(a, "png") for a in arrays[1:]]
    data = {"protocol": 1, "rewards": None, "samples": [sample, {"image": wire.encode_image(arrays[5], "raw")}]}
    serial = wire.decode_request_map(data).samples
    parallel = wire.decode_request_map(data, threads=4).samples
    assert isinstance(parallel[0]["image"], Image.Image)
    for key in ("image", "condition_images", "video"):
        want = serial[0][key] if isinstance(serial[0][key], list) else [serial[0][key]]
        got = parallel[0][key] if isinstance(parallel[0][key], list) else [parallel[0][key]]
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(parallel[0]["image"]), arrays[0])
    np.testing.assert_array_equal(parallel[1]["image"], arrays[5])
    # a broken PNG among them names its sample and field, as the serial decode does
    broken = dict(sample, condition_images=[{"format": "png", "data": wire.png_bytes(arrays[1])[:60]}])
    data["samples"] = [sample, broken]
    for threads in (1, 4):
        with pytest.raises(wire.WireError, match="cannot be decoded") as info:
            wire.decode_request_map(data, threads=threads)
        assert (info.value.sample, info.value.field) == (1, "condition_images")


def test_mmap_pages_of_a_sealed_request_are_read_only():
    payload = wire.request_map([{"image": np.ones((40, 40, 3), np.uint8)}], image_format="raw")
    with frames.SharedBody(payload) as shared:
        with pytest.raises(PermissionError):
            mmap.mmap(shared.fd, 64)  # write-sealed: no writable shared mapping
        data = frames.loads_frames(shared.body)
    image = wire.decode_request_map(data).samples[0]["image"]
    assert (image == 1).all()  # the server's mapping outlives the client's descriptor


def test_the_listing_advertises_frames_and_this_host(server):
    status, body, _ = request(server.url, "GET", "/v1/rewards")
    assert status == 200, body
    listing = json.loads(body)
    assert listing["wire"]["frames"] is True and listing["wire"]["shm"] == frames.host_identity()
