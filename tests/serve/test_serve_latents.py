"""Latents on the wire (rewardzoo.transport.latents): a request carries float16 / bfloat16 / float32 latents, the
server decodes them with its config's ``decode:`` stage, and the scores equal those of diffusers' own decode of the
same latents given as images; latents the VAE cannot take are a 422 naming the field. The app is called in process
as ASGI (the middleware tests' helper); the body is the client's own encoding (``encode_request``)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
pytest.importorskip("starlette")
msgpack = pytest.importorskip("msgpack")

from rewardzoo import Sample
from rewardzoo import testing as rzt
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.serve.app import build_app
from rewardzoo.serve.service import RewardService
from rewardzoo.transport.latents import decode_latent, encode_latent
from rewardzoo.transport.wire import JSON, MSGPACK, WireError, encode_request

from .test_serve_middleware import call

SCALE, SHIFT = rzt.TINY_VAE_SCALING, rzt.TINY_VAE_SHIFT
REWARDS = ["jpeg_compressibility", {"name": "big", "reward_model": "jpeg_incompressibility", "weight": 0.01}]


@pytest.fixture(scope="module")
def vae_dir(tmp_path_factory):
    return str(rzt.tiny_vae_dir(tmp_path_factory.mktemp("wire_vae")))


@pytest.fixture(scope="module")
def service(vae_dir):
    return RewardService({"rewards": REWARDS, "decode": {"vae": vae_dir, "device": "cpu"}}).load()


def _post(service, body: bytes, fmt: str = MSGPACK) -> tuple[int, dict]:
    async def run():
        app = build_app(service)
        try:
            return await call(app, "POST", "/v1/score", [("Content-Type", fmt)], body)
        finally:
            app.state.batcher.close()

    status, _, raw = asyncio.run(run())
    return status, (msgpack.unpackb(raw) if fmt == MSGPACK else __import__("json").loads(raw))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_served_latents_score_as_diffusers_decode_of_the_same_latents(service, vae_dir, dtype):
    latents = torch.randn(3, 4, 16, 16, generator=torch.Generator().manual_seed(1)).to(getattr(torch, dtype))
    fmt = JSON if dtype == "float16" else MSGPACK  # JSON carries the bytes as base64
    status, answer = _post(service, encode_request([{"latent": x} for x in latents], fmt=fmt.split("/")[1]), fmt)
    assert status == 200, answer
    vae = diffusers.AutoencoderKL.from_pretrained(vae_dir).eval()
    with torch.no_grad():
        pixels = (vae.decode(latents.float() / SCALE + SHIFT).sample * 0.5 + 0.5).clamp(0, 1)
    local = RewardProcessor(REWARDS)([Sample(image=x) for x in pixels])
    for name in ("jpeg_compressibility", "big"):
        np.testing.assert_array_equal(np.float32(answer["rewards"][name]), local.rewards[name])


def test_a_1024_image_travels_as_a_128x128x16_latent():
    latent = torch.randn(16, 128, 128, dtype=torch.float16)
    wire = encode_latent(latent)
    assert wire["shape"] == [16, 128, 128] and len(wire["data"]) == 16 * 128 * 128 * 2  # 512 kB, not 3 MB of RGB
    back = decode_latent({**wire, "data": bytes(wire["data"])})
    assert back.dtype == torch.float16 and torch.equal(back, latent)
    bf16 = torch.randn(4, 2, 8, 8).to(torch.bfloat16)
    assert torch.equal(decode_latent({**encode_latent(bf16), "data": bytes(encode_latent(bf16)["data"])}), bf16)


def test_latents_of_the_wrong_shape_or_dtype_are_a_422_naming_the_field(service):
    good = encode_latent(torch.zeros(4, 8, 8))
    bad = {
        "dtype": {**good, "dtype": "float64"},
        "rank": {**good, "shape": [4, 64]},
        "bytes": {**good, "shape": [4, 8, 4]},
        "channels": encode_latent(torch.zeros(16, 8, 8)),
    }
    for what, latent in bad.items():
        body = msgpack.packb({"protocol": 1, "samples": [{"latent": good}, {"latent": latent}]}, use_bin_type=True)
        status, answer = _post(service, body)
        assert status == 422, (what, answer)
        assert "sample 1, field 'latent'" in answer["error"]["message"], (what, answer)
    with pytest.raises(WireError, match="field 'latent'.*float16, bfloat16, float32") as refused:
        decode_latent({**good, "dtype": "int8"}, error=WireError)
    assert refused.value.status == 422
