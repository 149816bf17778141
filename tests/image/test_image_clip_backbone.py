"""The shared CLIP backbone loader: model_path forms, caching/sharing, fast text path, errors."""

from __future__ import annotations

import gc

import open_clip
import pytest
import torch
import torch.nn.functional as F

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.models.clip import cached_backbones, check_pairs, load_clip_backbone
from rewardzoo.rewards.models.weights import resolve_weights_file

from .media import PROMPTS

LONG = " ".join(["a very long caption about many colourful things"] * 20)  # > 77 tokens: truncated
TEXTS = PROMPTS + ["", "A", "!!", LONG, "a cat"]


def test_open_clip_dir_text_matches_encode_text(oc_dir, oc_reference):
    """The L-position shortcut gives open_clip's own 77-position encode_text embeddings."""
    model, _, tokenizer = oc_reference
    bb = load_clip_backbone(oc_dir)
    assert bb.backend == "open_clip"
    with torch.no_grad():
        ref = F.normalize(model.encode_text(tokenizer(TEXTS)), dim=-1)
    torch.testing.assert_close(bb.encode_text(TEXTS), ref, atol=2e-6, rtol=0)


@pytest.mark.parametrize("texts", [["x"], ["a photo", "a photo", "b"], PROMPTS * 3])
def test_each_unique_text_encoded_once_and_dedup_is_exact(oc_dir, texts, monkeypatch):
    bb = load_clip_backbone(oc_dir)
    seen = []
    original = bb._encode_unique_text
    monkeypatch.setattr(bb, "_encode_unique_text", lambda t: seen.append(list(t)) or original(t))
    out = bb.encode_text(texts)
    assert len(seen) == 1 and sorted(seen[0]) == sorted(set(texts))
    monkeypatch.undo()
    for i, t in enumerate(texts):
        torch.testing.assert_close(out[i], bb.encode_text([t])[0], atol=2e-6, rtol=0)


def test_hf_dir_is_detected_and_matches_transformers(hf_dir, hf_reference):
    model, processor = hf_reference
    bb = load_clip_backbone(str(hf_dir))
    assert bb.backend == "transformers" and bb.image_size == 64
    enc = processor.tokenizer(PROMPTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        ref = model.get_text_features(**enc)
        ref = ref if isinstance(ref, torch.Tensor) else ref.pooler_output
    torch.testing.assert_close(bb.encode_text(PROMPTS), F.normalize(ref, dim=-1), atol=2e-6, rtol=0)
    assert bb.logit_scale == pytest.approx(float(model.logit_scale.detach().exp()))


def test_same_weights_share_one_model(oc_dir):
    a = load_clip_backbone(oc_dir, device="cpu", dtype="float32")
    b = load_clip_backbone(str(oc_dir) + "/", device="cpu", dtype=torch.float32)
    assert a is b
    c = load_clip_backbone(oc_dir, dtype="float64")
    assert c is not a and c.dtype == torch.float64
    fresh = load_clip_backbone(oc_dir, cache=False)
    assert fresh is not a and all(x is not fresh for x in cached_backbones())


def test_cache_releases_unused_models(oc_dir):
    bb = load_clip_backbone(oc_dir, dtype="bfloat16")
    ident = id(bb)
    del bb
    gc.collect()
    assert all(id(x) != ident for x in cached_backbones())


@pytest.mark.parametrize(
    "path, backend, msg",
    [
        ("/nonexistent/dir/x", "auto", "not a local directory"),
        ("not-an-arch", "auto", "not a local directory"),
        ("ViT-B-32", "auto", "needs `pretrained`"),
        ("ViT-B-32", "nope", "backend must be one of"),
    ],
)
def test_bad_model_path_is_a_config_error(path, backend, msg):
    with pytest.raises(ConfigError, match=msg):
        load_clip_backbone(path, backend=backend)


def test_wrong_backend_for_directory(oc_dir, hf_dir, tmp_path):
    with pytest.raises(ConfigError, match="open_clip_config.json"):
        load_clip_backbone(hf_dir, backend="open_clip")
    with pytest.raises(ConfigError, match="neither"):
        load_clip_backbone(tmp_path)


def test_open_clip_hub_dir_with_pretrained_file_matches(oc_dir, oc_reference):
    """An architecture name + a weights file loads like the hub-style directory (add_model_config path)."""
    import json

    cfg = json.loads((oc_dir / "open_clip_config.json").read_text())["model_cfg"]
    arch_dir = oc_dir.parent / "arch"
    arch_dir.mkdir(exist_ok=True)
    (arch_dir / "rz-tiny-test.json").write_text(json.dumps(cfg))
    open_clip.add_model_config(arch_dir / "rz-tiny-test.json")
    bb = load_clip_backbone("rz-tiny-test", pretrained=str(oc_dir / "open_clip_model.safetensors"))
    torch.testing.assert_close(bb.encode_text(PROMPTS), load_clip_backbone(oc_dir).encode_text(PROMPTS))


def test_check_pairs_names_the_short_field():
    assert check_pairs(image=[1, 2], prompt=["a", "b"]) == 2
    with pytest.raises(InputError, match="mismatched") as info:
        check_pairs(image=[1, 2, 3], prompt=["a", "b"])
    assert info.value.field == "prompt" and info.value.sample == 2
    with pytest.raises(InputError) as info:
        check_pairs(image=[1], prompt=["a", "b"])
    assert info.value.field == "image" and info.value.sample == 1


def test_resolve_weights_file(tmp_path):
    f = tmp_path / "head.pth"
    f.write_bytes(b"x")
    assert resolve_weights_file(f) == str(f)
    assert resolve_weights_file(tmp_path, "head.pth") == str(f)
    with pytest.raises(ConfigError, match="no weights file"):
        resolve_weights_file(tmp_path, "other.pth")
    with pytest.raises(ConfigError, match="cannot fetch"):
        resolve_weights_file("rewardzoo-test/no-such-repo", "x.pt")  # offline: a clear error, not a crash


@pytest.mark.parametrize(
    "arch, tag, quick",
    [("ViT-B-32", "openai", True), ("ViT-L-14", "openai", True), ("ViT-H-14", "laion2b_s32b_b79k", False)],
)
def test_pretrained_tag_decides_quick_gelu(monkeypatch, arch, tag, quick):
    """open_clip 3.x only warns on a QuickGELU mismatch (OpenAI weights on a GELU config); we follow the tag."""
    seen = {}

    def fake_create_model(name, **kwargs):
        seen.update(kwargs, name=name)
        raise RuntimeError("stop before downloading")

    monkeypatch.setattr(open_clip, "create_model", fake_create_model)
    with pytest.raises(ConfigError, match="stop before downloading"):
        load_clip_backbone(arch, pretrained=tag, cache=False)
    assert seen["name"] == arch and seen["pretrained"] == tag and seen["force_quick_gelu"] is quick


def test_concurrent_loads_share_one_model(oc_dir):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: load_clip_backbone(oc_dir, dtype="float64"), range(4)))
    assert all(g is got[0] for g in got)
    with ThreadPoolExecutor(4) as pool:  # and concurrent scoring gives the same features as serial scoring
        feats = list(pool.map(lambda t: got[0].encode_text([t]), PROMPTS))
    torch.testing.assert_close(torch.cat(feats), got[0].encode_text(PROMPTS), atol=1e-9, rtol=0)
