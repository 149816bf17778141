"""The server's decoded-media budget counts what converting the media to the served rewards' forms allocates
(issue 47, item 2): a reward that wants float images holds 12 bytes per pixel, 4x the decoded 8-bit image, on
top of what decoding holds. Checked against the bytes the processor's own conversion produces, and end to end:
a budget that covers decoding but not the float conversion refuses the request (413), the same budget with a
reward that converts nothing answers it."""

from __future__ import annotations

import numpy as np
import pytest

msgpack = pytest.importorskip("msgpack")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
torch = pytest.importorskip("torch")

from rewardzoo.core.fields import convert_field
from rewardzoo.rewards.base import Inputs
from rewardzoo.serve.memory import ConversionCost
from rewardzoo.spec.sample import samples_of
from rewardzoo.transport import wire

from .helpers import Server, request

MIB = 2**20


class _Wants:
    def __init__(self, inputs: Inputs) -> None:
        self.inputs = inputs


def _request(h: int = 300, w: int = 400) -> dict:
    rng = np.random.default_rng(0)
    png = wire.png_bytes(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    raw = wire.raw_array(rng.integers(0, 256, (h // 2, w, 3), dtype=np.uint8))
    clip = wire.raw_array((rng.standard_normal((2, 48000)) * 3000).astype(np.int16), sample_rate=48000)
    return {
        "protocol": 1,
        "samples": [{"image": {"format": "png", "data": png}}, {"image": raw}, {"audio": clip}],
    }


def _converted_bytes(value) -> int:
    if isinstance(value, tuple):
        value = value[0]
    return value.numel() * value.element_size() if isinstance(value, torch.Tensor) else value.nbytes


@pytest.mark.parametrize(
    "inputs",
    [
        Inputs(("image",), images="float"),
        Inputs(("image",), images="uint8"),
        Inputs(("image",), images="native"),
        Inputs(("audio",), sample_rate=16000),
        Inputs(("audio",), mono=False),
        Inputs(("audio",), sample_rate=96000, mono=False),
    ],
    ids=["float", "uint8", "native", "audio-16k-mono", "audio-stereo", "audio-96k-stereo"],
)
def test_the_counted_conversion_covers_what_the_conversion_allocates(inputs):
    data = _request()
    samples = samples_of(wire.decode_request_map(msgpack.unpackb(msgpack.packb(data))).samples)
    field = inputs.fields[0]
    allocated = sum(
        _converted_bytes(convert_field(field, getattr(s, field), s, inputs))
        for s in samples
        if getattr(s, field) is not None
    )
    counted = ConversionCost.of([_Wants(inputs)]).bytes(data)
    if field == "image":  # the converted images, exactly: 12 bytes a pixel as float32, 3 as uint8
        per_pixel = 12 if inputs.images == "float" else 3
        assert allocated == per_pixel * (300 * 400 + 150 * 400)
        assert counted == allocated
    else:  # the result, and the float32 source the converter reads the int16 clip into
        assert allocated > 0 and counted == allocated + 4 * 2 * 48000


def test_float_images_count_four_times_the_decoded_image_and_pil_from_png_nothing():
    data = _request()
    pixels = 300 * 400 + 150 * 400
    assert ConversionCost.of([_Wants(Inputs(("image",), images="float"))]).bytes(data) == 12 * pixels
    assert ConversionCost.of([_Wants(Inputs(("image",), images="pil"))]).bytes(data) == 4 * 150 * 400  # the raw one
    both = [_Wants(Inputs(("image",), images="float")), _Wants(Inputs(("image",), images="uint8"))]
    assert ConversionCost.of(both).bytes(data) == 15 * pixels  # two distinct conversions, each held


def test_a_budget_covering_decoding_but_not_the_float_conversion_refuses_the_request(tmp_path):
    side = 512
    png = wire.png_bytes(np.random.default_rng(1).integers(0, 256, (side, side, 3), dtype=np.uint8))
    body = msgpack.packb({"protocol": 1, "samples": [{"image": {"format": "png", "data": png}}]}, use_bin_type=True)
    decoded = wire.decoded_bytes(msgpack.unpackb(body))
    assert decoded == 8 * side * side  # an RGB PIL image (4-byte pixels) and its decoding's transient
    parsed = wire.parse_bytes(len(body), "msgpack")  # the body and what parsing it builds, reserved first
    budget_mb = f"{(parsed + decoded + 6 * side * side) / MIB:.4f}"  # parsing, decoding and half the float copy
    statuses = {}
    for name, reward in (("mean", "ImageMean"), ("width", "ImageWidth")):
        config = tmp_path / f"{name}.yaml"
        config.write_text(f"rewards:\n  - name: {name}\n    reward_model: tests.serve.rewards:{reward}\n")
        server = Server(config, "--max-decoded-mb", budget_mb, log=tmp_path / f"{name}.log").start()
        try:
            status, answer, _ = request(server.url, "POST", "/v1/score", body, {"Content-Type": "application/msgpack"})
        finally:
            server.stop()
        statuses[name] = status
        if name == "mean":
            error = msgpack.unpackb(answer)["error"]
            assert error["limit"] == "max_decoded_bytes" and "converted" in error["message"], error
            assert str(parsed + decoded + 12 * side * side) in error["message"]
    assert statuses == {"mean": 413, "width": 200}
