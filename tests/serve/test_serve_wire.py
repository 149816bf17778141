"""The wire format on its own: media round trips, limits, chunking of requests, the facts a remote entry takes
from a server, the command line's safety defaults, and imports that stay light."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("msgpack")

from PIL import Image

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.info import RewardInfo
from rewardzoo.rewards.remote import served_facts, served_inputs
from rewardzoo.transport import wire
from rewardzoo.transport.served import concat_results, in_order, request_chunks

from .helpers import ROOT, environment

RNG = np.random.default_rng(0)


def roundtrip(sample: dict, fmt: str = "msgpack", image_format: str = "png", limits=wire.WireLimits()) -> dict:
    return wire.decode_request(wire.encode_request([sample], fmt=fmt, image_format=image_format), fmt, limits).samples[
        0
    ]


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
@pytest.mark.parametrize("image_format", ["png", "raw"])
def test_images_and_videos_round_trip_pixel_for_pixel(fmt, image_format):
    rgb = RNG.integers(0, 256, (9, 13, 3), dtype=np.uint8)
    rgba = RNG.integers(0, 256, (5, 4, 4), dtype=np.uint8)
    frames = RNG.integers(0, 256, (3, 6, 7, 3), dtype=np.uint8)
    got = roundtrip(
        {"image": Image.fromarray(rgb), "condition_images": [Image.fromarray(rgba, "RGBA")], "video": frames},
        fmt,
        image_format,
    )
    np.testing.assert_array_equal(np.asarray(got["image"]), rgb)
    np.testing.assert_array_equal(np.asarray(got["condition_images"][0])[..., :3], rgba[..., :3])
    video = got["video"]
    np.testing.assert_array_equal(
        np.stack([np.asarray(f) for f in video]) if isinstance(video, list) else video, frames
    )


def test_audio_keeps_its_sample_type_channels_and_rate():
    stereo = RNG.standard_normal((2, 300)).astype(np.float32)
    pcm = (RNG.standard_normal(200) * 3000).astype(np.int16)
    got = roundtrip(
        {
            "audio": stereo,
            "audio_sample_rate": 22050,
            "condition_audio": pcm,
            "condition_audio_sample_rate": 8000,
            "prompt": "p",
            "metadata": {"a": 1},
            "group_id": "g",
        }
    )
    assert got["audio"].dtype == np.float32 and got["audio_sample_rate"] == 22050
    np.testing.assert_array_equal(got["audio"], stereo)
    assert got["condition_audio"].dtype == np.int16 and got["condition_audio_sample_rate"] == 8000
    np.testing.assert_array_equal(got["condition_audio"], pcm)
    assert json.loads(got["metadata"]) == {"a": 1} and got["group_id"] == "g"


def test_the_protocol_version_and_unknown_fields_are_checked_on_both_sides():
    with pytest.raises(InputError, match="'shell' is not a field"):
        wire.encode_request([{"shell": "x"}])
    body = wire.dumps({"protocol": "1", "samples": [{"prompt": "x"}]}, "json")
    with pytest.raises(wire.WireError, match="protocol version '1' is not supported") as exc:
        wire.decode_request(body, "json")
    assert exc.value.status == 400 and exc.value.kind == "protocol"
    with pytest.raises(wire.WireError) as exc:
        wire.format_of("application/x-python-pickle")
    assert exc.value.status == 415


def test_limits_name_themselves_and_the_sample():
    limits = wire.WireLimits(max_request_pixels=1000, max_pixels=600)
    img = {"image": Image.fromarray(np.zeros((20, 20, 3), np.uint8))}  # 400 pixels each: two fit, three do not
    body = wire.encode_request([img, img, img])
    with pytest.raises(wire.WireError) as exc:
        wire.decode_request(body, "msgpack", limits)
    assert exc.value.limit == "max_request_pixels" and exc.value.sample == 2 and exc.value.status == 413
    with pytest.raises(wire.WireError, match="max_pixels=600") as exc:
        roundtrip({"video": np.zeros((2, 30, 30, 3), np.uint8)}, image_format="raw", limits=limits)
    assert "field 'video'" in str(exc.value)


def test_responses_carry_null_for_not_applicable_and_decode_to_nan():
    data = wire.encode_result(
        {"a": np.array([1.5, np.nan], np.float32)},
        np.array([1.5, np.nan], np.float32),
        [["a"], []],
        {"a": np.array([1, 0], np.float32)},
        {"a": {"text": np.array(["hi", None], dtype=object)}},
    )
    assert data["rewards"]["a"] == [1.5, None] and data["extras"]["a"]["text"] == ["hi", None]
    back = wire.decode_result(json.loads(wire.dumps(data, "json")))
    assert back["rewards"]["a"][0] == 1.5 and np.isnan(back["total"][1]) and back["applied"] == [["a"], []]


def test_requests_are_cut_with_groups_whole_and_answers_put_back_in_order():
    samples = [{"group_id": g} for g in [0, 1, 0, 2, 1, 0]] + [{}, {}]
    chunks = request_chunks(samples, 4)
    assert all(len(c) <= 4 for c in chunks) and sorted(i for c in chunks for i in c) == list(range(8))
    for gid in (0, 1, 2):
        members = [i for i, s in enumerate(samples) if s.get("group_id") == gid]
        assert any(set(members) <= set(c) for c in chunks)
    with pytest.raises(InputError, match="group of 3 samples is over the server's limit max_samples=2"):
        request_chunks(samples, 2)
    parts = [
        {
            "rewards": {"r": np.array(c, np.float32)},
            "total": np.array(c, np.float32),
            "weights": {},
            "applied": [[str(i)] for i in c],
            "extras": {},
        }
        for c in chunks
    ]
    merged = in_order(concat_results(parts), [i for c in chunks for i in c])
    np.testing.assert_array_equal(merged["rewards"]["r"], np.arange(8, dtype=np.float32))
    assert merged["applied"] == [[str(i)] for i in range(8)]


def test_a_remote_entry_takes_kind_range_direction_and_fields_from_the_served_records():
    rows = {
        "a": {
            "kind": "pointwise",
            "modality": "image",
            "higher_is_better": True,
            "score_range": [0.0, 10.0],
            "fields": ["image"],
            "applicable_datasets": None,
        },
        "b": {
            "kind": "groupwise",
            "modality": "group",
            "higher_is_better": True,
            "score_range": [0.0, 1.0],
            "fields": ["image", "group_id"],
            "applicable_datasets": ["t2i"],
        },
    }
    facts = served_facts(rows, {"a": 1.0, "b": 2.0}, "http://h:1")
    assert facts["kind"] == "groupwise" and facts["score_range"] == (0.0, 12.0) and facts["modality"] == "any"
    inputs = served_inputs(rows, facts["kind"], {"max_pixels": 99})
    assert inputs.fields == ("image", "group_id", "dataset") and inputs.max_pixels == 99 and not inputs.mono
    card = RewardInfo.of_class(type("X", (), {}))
    assert card.refined(facts).score_range == (0.0, 12.0) and card.refined(facts).kind == "groupwise"
    with pytest.raises(ValueError, match="cannot change"):
        card.refined({"download": True})
    rows["b"]["higher_is_better"] = False
    with pytest.raises(ConfigError, match="disagree on higher_is_better"):
        served_facts(rows, {"a": 1.0, "b": 1.0}, "http://h:1")


def test_serve_refuses_an_unset_token_variable_and_warns_when_bound_beyond_this_machine(tmp_path):
    from rewardzoo.serve.options import binding_notice

    cfg = tmp_path / "c.yaml"
    cfg.write_text("rewards: [jpeg_compressibility]\n")
    env = environment()
    env.pop("RZ_NOT_SET", None)
    out = subprocess.run(
        [sys.executable, "-m", "rewardzoo.cli", "serve", str(cfg), "--token-env", "RZ_NOT_SET"],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=120,
    )
    assert out.returncode == 2 and "RZ_NOT_SET" in out.stderr and "not set" in out.stderr
    assert "this machine only" in binding_notice("127.0.0.1", 1, False)
    assert "OTHER MACHINES" in binding_notice("0.0.0.0", 1, False) and "no --token-env" in binding_notice(
        "0.0.0.0", 1, False
    )
    assert "no --token-env" not in binding_notice("0.0.0.0", 1, True)


def test_importing_the_package_the_client_and_the_remote_reward_imports_no_server_library():
    code = (
        "import sys, rewardzoo, rewardzoo.serve, rewardzoo.serve.client, rewardzoo.rewards.remote,"
        " rewardzoo.cli.commands;"
        "rewardzoo.cli.commands._parser();"
        "print(sorted(m for m in ('starlette', 'uvicorn', 'ray', 'msgpack', 'fastapi') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment(), cwd=str(ROOT), timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_value_over_messagepacks_32_bit_length_is_refused_naming_the_field_and_sample():
    import mmap

    # a raw video of 2**32 bytes (one more than a bin can frame) over anonymous memory never touched: the
    # refusal comes before any copy, so this costs nothing
    big = memoryview(mmap.mmap(-1, 2**32))
    video = {"format": "raw", "dtype": "uint8", "shape": [2**18, 64, 64, 4], "data": big}
    request = {"protocol": 1, "rewards": None, "samples": [{"prompt": "a"}, {"prompt": "b", "video": video}]}
    with pytest.raises(InputError, match=r"sample 1.*'video'.*4294967296 bytes.*MessagePack's limit of 4294967295"):
        wire.dumps(request, "msgpack")
    with pytest.raises(InputError, match="a value of 4294967296 bytes"):  # a worker's frame: no sample to name
        wire.dumps({"op": "score", "data": big}, "msgpack")


def _chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """(type, data) of each chunk of a PNG, its CRC checked (the format's own definition)."""
    import struct
    import zlib

    out, at = [], 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        assert struct.unpack(">I", png[at + 8 + length : at + 12 + length])[0] == zlib.crc32(kind + data)
        out.append((kind, data))
        at += 12 + length
    return out


def test_png_data_past_a_chunks_31_bit_length_continues_in_further_idat_chunks(monkeypatch):
    # the real limit (2**31 - 1) needs over 2 GiB of compressed pixels; lowered here, the same code path
    rgb = RNG.integers(0, 256, (40, 50, 3), dtype=np.uint8)  # noise: ~6 KB compressed
    monkeypatch.setattr(wire, "PNG_MAX_INT", 1000)
    png = wire.png_bytes(rgb)
    chunks = _chunks(png)
    idat = [data for kind, data in chunks if kind == b"IDAT"]
    assert [k for k, _ in chunks] == [b"IHDR"] + [b"IDAT"] * len(idat) + [b"IEND"] and len(idat) > 5
    assert all(len(d) <= 1000 for d in idat) and len(idat[0]) == 1000
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png))), rgb)
    monkeypatch.undo()
    assert len([k for k, _ in _chunks(wire.png_bytes(rgb)) if k == b"IDAT"]) == 1  # one chunk below the limit


def test_a_png_wider_than_31_bits_is_refused():
    wide = np.zeros((1, 2**31, 1), np.uint8)  # never touched: no memory
    with pytest.raises(InputError, match="a PNG is at most 2147483647 pixels wide and high, got 2147483648x1"):
        wire.png_bytes(wide)


def _msgpack_array_of_empty_maps(n: int) -> bytes:
    """A MessagePack array of ``n`` empty maps, written directly (one byte each)."""
    import struct

    return b"\xdd" + struct.pack(">I", n) + b"\x80" * n


def _peak_mb_of(fn) -> float:
    def kb():
        return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))

    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # the peak RSS from here
    before = kb()
    fn()
    return (kb() - before) / 1024


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
@pytest.mark.parametrize("shape", ["flat", "nested"])
def test_a_body_of_tiny_containers_is_refused_while_it_is_parsed(fmt, shape):
    """8 MiB of empty maps became ~600 MB of Python objects before any limit applied (issue 49, item 1)."""
    import msgpack

    n = 8 * 2**20 // (1 if fmt == "msgpack" else 3)
    if shape == "flat":
        body = msgpack.packb([{}] * n) if fmt == "msgpack" else b"[" + b",".join([b"{}"] * n) + b"]"
    else:  # a valid-looking request whose samples carry the flood
        flood = [{}] * (n // 2)
        body = (
            msgpack.packb({"protocol": 1, "samples": [{"metadata": {"x": flood}}]})
            if fmt == "msgpack"
            else (b'{"protocol":1,"samples":[{"metadata":{"x":[' + b",".join([b"{}"] * (n // 2)) + b"]}}]}")
        )
    errors = []

    def parse():
        try:
            wire.loads(body, fmt, wire.WireLimits())
        except wire.WireError as exc:
            errors.append(exc)

    peak = _peak_mb_of(parse)
    assert errors and errors[0].status == 413 and errors[0].limit == "max_samples", errors
    assert peak < 2 * len(body) / 2**20 + 5, peak  # the goal: objects within 2x the body


def test_a_legitimate_request_of_max_samples_text_samples_still_parses():
    import msgpack

    limits = wire.WireLimits(max_samples=512)
    samples = [{"prompt": "p", "completion": "c", "metadata": {"a": [1, 2], "b": {"c": "d"}}}] * 512
    body = msgpack.packb({"protocol": 1, "samples": samples})
    assert wire.loads(body, "msgpack", limits)["samples"] == samples
    assert wire.loads(json.dumps({"protocol": 1, "samples": samples}).encode(), "json", limits)["samples"] == samples


def test_the_client_bounds_the_objects_of_an_answer_by_the_samples_it_asked_for():
    """A 24 MiB answer of empty maps took 1.9 GB in the client (issue 49, item 8)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import msgpack

    from rewardzoo.errors import HttpError
    from rewardzoo.transport.served import ServedRewards

    flood = (b"\x82" + msgpack.packb("protocol") + b"\x01" + msgpack.packb("rewards") + b"\x81" + msgpack.packb("r")
        + _msgpack_array_of_empty_maps(24 * 2**20))  # fmt: skip

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            body = json.dumps({"protocol": 1, "rewards": [], "limits": {"max_samples": 8}}).encode()
            self._send(body, "application/json")

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self._send(flood, "application/msgpack")

        def _send(self, body, kind):
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    errors = []
    try:
        client = ServedRewards(f"http://127.0.0.1:{httpd.server_address[1]}", owner="test")

        def call():
            try:
                client.score([{"prompt": "a"}, {"prompt": "b"}])
            except HttpError as exc:
                errors.append(exc)

        peak = _peak_mb_of(call)
        client.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert errors and "not a score response" in str(errors[0]) and "max_samples=2" in str(errors[0])
    assert peak < 2 * len(flood) / 2**20 + 20, peak


@pytest.mark.parametrize("item", [b"0.5", b'""', b"[]"], ids=["floats", "empty-strings", "empty-lists"])
def test_a_json_list_of_scalars_is_refused_before_it_is_built(item):
    """JSON arrays have no parser hook: a 60 MB /get_reward of floats built 15M of them (8x its bytes) before any
    limit (issue 49, item 1). Their items are counted outside the strings before parsing."""
    body = b'{"query":[' + b",".join([item] * (8 * 2**20 // (len(item) + 1))) + b'],"prompts":[]}'
    errors = []

    def parse():
        try:
            wire.loads(body, "json", wire.WireLimits())
        except wire.WireError as exc:
            errors.append(exc)

    peak = _peak_mb_of(parse)
    assert errors and errors[0].status == 413 and errors[0].limit == "max_samples", errors
    assert peak < 2 * len(body) / 2**20 + 5, peak


def test_commas_brackets_quotes_and_escapes_inside_json_strings_are_not_items():
    """The count outside strings against the parser's own: text full of separators parses, within the budget."""
    text = 'a, [b], {c}, "quoted", back\\slash\\\\, \\"' * 20_000  # 40 kB of separators per string
    data = {"protocol": 1, "samples": [{"prompt": text, "completion": text + "\\"}] * 4}
    body = json.dumps(data).encode()
    assert body.count(b",") > wire.item_budget(wire.WireLimits())  # a count with the strings' commas would refuse
    assert wire.loads(body, "json", wire.WireLimits()) == data
    # 1 + 2 per bracket + 1 per comma outside the strings: the outer map, its list of 4, each sample's map
    assert wire._json_items(body) == 1 + (2 + 1) + (2 + 3) + 4 * (2 + 1)


def test_a_dry_decode_refuses_a_30_image_request_from_its_headers_decoding_nothing(monkeypatch):
    """The 413 for 30 black 4096^2 PNGs came after 16 were decoded (1 GB) although every size is in the headers
    (issue 49, item 4): the dry decode the server runs first refuses it, naming the sample, with nothing decoded."""
    from PIL import Image as PILImage

    opened = []
    monkeypatch.setattr(PILImage, "open", lambda *a, **k: opened.append(1))
    black = wire.png_bytes(np.zeros((4096, 4096, 3), np.uint8), level=9)
    data = {"protocol": 1, "samples": [{"image": {"format": "png", "data": black}}] * 30}
    with pytest.raises(wire.WireError) as exc:
        wire.decode_request_map(data, wire.WireLimits(), dry=True)
    assert exc.value.status == 413 and exc.value.limit == "max_request_pixels" and exc.value.sample == 16
    assert opened == []
    assert wire.decode_request_map(data | {"samples": data["samples"][:2]}, dry=True).samples == [{"image": None}] * 2
    assert opened == []
