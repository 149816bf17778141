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
    assert not image.flags.writeable and np.shares_memory(image, np.frombuffer(body, np.uint8))  # no copy
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


# ------------------------------------------------------------------ pooled segments and shared arrays
def _punch_hole(fd: int, length: int) -> None:
    """Free a file's pages without shrinking it (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE): what a client can
    still do to a segment sealed only against shrinking and growing."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    assert libc.fallocate(fd, 0x02 | 0x01, 0, length) == 0, os.strerror(ctypes.get_errno())


def test_pooled_segments_are_reused_once_answered_and_a_client_rewriting_one_harms_nobody(server, config):
    local = rewardzoo.build_processors(config)[0]
    first, second = samples(4, seed=1), samples(3, seed=2)
    with RewardClient(server.url) as client, RewardClient(server.url) as other:
        pool = client.server.segments
        for _ in range(3):
            np.testing.assert_array_equal(client.score(first).rewards["jpeg"], local(first).rewards["jpeg"])
        assert client.transport == "shm" and pool.made == 1 and pool.free == 1  # one segment, reused
        segment = pool._free[0]
        with pytest.raises(OSError):
            os.ftruncate(segment.fd, 0)  # sealed: it can never shrink under a server's mapping
        with pytest.raises(OSError):
            os.ftruncate(segment.fd, segment.size + 4096)
        segment.array[:] = 255  # the client scribbles over it and frees its pages after the answer
        _punch_hole(segment.fd, segment.size)
        np.testing.assert_array_equal(other.score(second).rewards["jpeg"], local(second).rewards["jpeg"])
        np.testing.assert_array_equal(client.score(second).rewards["jpeg"], local(second).rewards["jpeg"])
        # concurrent calls each hold their own segment
        import concurrent.futures as cf

        with cf.ThreadPoolExecutor(3) as threads:
            got = list(threads.map(lambda s: client.score(s).rewards["jpeg"], [first, second, first]))
        for scores, batch in zip(got, [first, second, first]):
            np.testing.assert_array_equal(scores, local(batch).rewards["jpeg"])
        assert pool.made >= 2 and pool.free == pool.made <= pool.max_free
        assert client.server._shm is True and other.server._shm is True  # never refused


def test_a_segment_is_dropped_not_reused_when_no_answer_came(server):
    from rewardzoo.errors import HttpError

    with RewardClient(server.url) as client:
        client.score(samples(2))
        pool = client.server.segments
        leased = pool._free[0]

        def no_answer(*args, **kwargs):
            raise HttpError(server.url, status=None, attempts=1, reason="no answer within 1 s")

        client.server._send = no_answer
        with pytest.raises(HttpError):
            client.score(samples(2))
        assert pool.free == 0 and leased not in pool._free  # the server may still read it: never handed out again


def test_rewriting_a_writable_segment_changes_only_its_raw_pixels_and_cannot_fault_the_server():
    from rewardzoo.transport.segments import SegmentPool, shared_request

    rng = np.random.default_rng(5)
    pixels, png_src = rng.integers(0, 256, (48, 40, 3), dtype=np.uint8), rng.integers(0, 256, (40, 48, 3), np.uint8)
    audio = np.linspace(-1, 1, 4096, dtype=np.float32)
    sample = {"image": pixels, "condition_images": [png_src], "audio": audio, "audio_sample_rate": 16000}
    payload = wire.request_map([sample], image_format="raw")
    payload["samples"][0]["condition_images"] = [wire.encode_image(png_src, "png")]
    pool = SegmentPool()
    body, lease = shared_request(payload, pool)
    assert lease is not None
    data = frames.loads_frames(body, shm_allowed=None)
    lease.array[:] = 0  # rewritten after the server parsed and checked the request
    audio_bytes = lease.array.nbytes
    lease.array[: audio_bytes // 4 * 4].view(np.float32)[:] = np.nan
    request = wire.decode_request_map(data).samples[0]
    np.testing.assert_array_equal(np.asarray(request["condition_images"][0]), png_src)  # copied before its checks
    np.testing.assert_array_equal(np.ravel(request["audio"]), audio)  # checked finite, then still finite: a copy
    assert not request["image"].flags.writeable and np.shares_memory(
        request["image"], data["samples"][0]["image"]["data"]
    )
    _punch_hole(lease.fd, lease.size)  # the pages gone: reading the mapping gives zeros, never a SIGBUS
    assert int(np.asarray(request["image"]).max()) == 0
    pool.give(lease)


def test_a_shared_array_travels_without_a_copy_and_its_segment_is_freed(server, config):
    import gc

    from rewardzoo.transport.segments import SegmentPool, shared_array, shared_request

    images = shared_array((3, 48, 40, 3))
    images[:] = np.stack([s.image[:48, :40] for s in samples(3, seed=4)])
    batch = [rewardzoo.Sample(image=images[i]) for i in range(3)]
    want = rewardzoo.build_processors(config)[0](batch).rewards["jpeg"]
    body, lease = shared_request(
        wire.request_map([{"image": s.image} for s in batch], image_format="raw"), SegmentPool()
    )
    assert lease is None  # nothing copied: the server maps the array's own segment
    data = frames.loads_frames(body, shm_allowed=None)
    decoded = wire.decode_request_map(data).samples
    with RewardClient(server.url) as client:
        np.testing.assert_array_equal(client.score(batch).rewards["jpeg"], want)
        assert client.server.segments.made == 0 and client.transport == "shm"
    images[1] += 1  # the server reads the caller's memory itself
    np.testing.assert_array_equal(decoded[1]["image"], images[1])
    head = msgpack.unpackb(body[8 : 8 + int.from_bytes(body[4:8], "little")])
    fd = head["shm"]["fd"]
    assert os.readlink(f"/proc/self/fd/{fd}").startswith(f"/memfd:{frames.SHM_NAME}")
    del images, batch, decoded, data
    gc.collect()
    assert not os.path.exists(f"/proc/self/fd/{fd}") or not os.readlink(f"/proc/self/fd/{fd}").startswith(
        f"/memfd:{frames.SHM_NAME}"
    )


def test_a_segment_not_sealed_against_shrinking_is_refused_and_a_prefix_is_accepted():
    fd = os.memfd_create(frames.SHM_NAME, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, 2 * mmap.PAGESIZE)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW)  # it could still shrink under the server's mapping
        with pytest.raises(frames.ShmRefused, match="growing and shrinking"):
            frames.loads_frames(_header_naming(fd, mmap.PAGESIZE), shm_allowed=None)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
        data = frames.loads_frames(_header_naming(fd, mmap.PAGESIZE), shm_allowed=None)  # the first page only
        assert wire.decode_request_map(data).samples[0]["image"].shape == (4, 4, 3)
    finally:
        os.close(fd)


def test_large_framed_bodies_read_into_place_keep_the_connection_for_the_next_requests(server, config):
    """Bodies of 1 MiB or more are read straight into one buffer (uvicorn_server.BodySink), bypassing the parser:
    the same keep-alive connection then carries a small request and another large one."""
    import http.client

    local = rewardzoo.build_processors(config)[0]
    rng = np.random.default_rng(9)
    big = [rewardzoo.Sample(image=rng.integers(0, 256, (640, 480 + 8 * i, 3), dtype=np.uint8)) for i in range(3)]
    small = samples(2)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        for batch in (big, small, big[::-1], small):
            pieces, size = frames.encode(wire.request_map([{"image": s.image} for s in batch], image_format="raw"))
            assert (size >= 2**20) == (batch is big or batch[0] is big[-1])
            conn.request(
                "POST", "/v1/score", body=pieces, headers={"Content-Type": frames.FRAMES, "Content-Length": str(size)}
            )
            answer = conn.getresponse()
            body = answer.read()
            assert answer.status == 200, body[:300]
            got = wire.decode_result(msgpack.unpackb(body))["rewards"]["jpeg"]
            np.testing.assert_array_equal(got, local(batch).rewards["jpeg"])
        assert conn.sock is not None  # one connection throughout
    finally:
        conn.close()


def test_a_reusable_segment_keeps_its_mapping_on_the_server_and_only_for_the_same_file():
    from rewardzoo.transport.segments import SegmentPool, shared_request

    image = np.full((64, 64, 3), 7, np.uint8)
    pool = SegmentPool()
    decoded = []
    for value in (7, 9):
        image[:] = value
        body, lease = shared_request(wire.request_map([{"image": image}], image_format="raw"), pool)
        decoded.append(wire.decode_request_map(frames.loads_frames(body, shm_allowed=None)).samples[0]["image"])
        pool.give(lease)
    assert pool.made == 1 and np.shares_memory(decoded[0], decoded[1])  # one mapping, the segment's new pixels
    assert int(decoded[1].max()) == 9
    # another file under the same descriptor number is mapped anew
    fd = pool._free[0].fd
    pool.close()
    import gc

    del lease, decoded
    gc.collect()
    assert not os.path.exists(f"/proc/self/fd/{fd}")
    other = os.memfd_create(frames.SHM_NAME, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        if other != fd:
            os.dup2(other, fd)
            os.close(other)
        os.ftruncate(fd, mmap.PAGESIZE)
        os.pwrite(fd, bytes([3]) * 48, 0)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        data = frames.loads_frames(_header_naming(fd, mmap.PAGESIZE), shm_allowed=None)
        assert (wire.decode_request_map(data).samples[0]["image"] == 3).all()
    finally:
        os.close(fd)
