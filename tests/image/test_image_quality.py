"""image_quality / video_quality against pyiqa's own metric on the same random-init weights.

Each arch is built random-init (pyiqa's class with ``pretrained=False``; its timm / torchvision backbones
random-init through a monkeypatch written here, independent of the reward's), saved as safetensors and
loaded through ``model_path``. The reference is ``pyiqa.create_metric(name, pretrained=False, ...)`` with
the same state loaded into ``metric.net``, run through pyiqa's own ``InferenceModel.forward``.
"""

from __future__ import annotations

import copy
import importlib

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from rewardzoo import load_reward
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.image.image_quality import VARIANTS
from rewardzoo.spec.sample import Sample

pyiqa = pytest.importorskip("pyiqa")
timm = pytest.importorskip("timm")
import torchvision

#: variant -> arch options shrinking the test cost (fewer crops / a tiny MUSIQ); topiq_nr needs facexlib (scripts/test
#: installs it); the larger archs (maniqa: ViT-B/8, nima: Inception-ResNet-v2) and the dataset rows are in
#: test_image_quality_rows.py.
CASES = {
    "musiq": {"hidden_size": 32, "mlp_dim": 64, "num_heads": 2, "num_layers": 2},
    "hyperiqa": {"num_crop": 2},
    "dbcnn": {},
    "nima-vgg16-ava": {},
    "topiq_nr": {},
}


@pytest.fixture
def offline_backbones(monkeypatch):
    create = timm.create_model
    monkeypatch.setattr(timm, "create_model", lambda *a, **k: create(*a, **{**k, "pretrained": False}))
    for name in ("vgg16", "resnet50"):
        builder = getattr(torchvision.models, name)
        monkeypatch.setattr(torchvision.models, name, lambda *a, _b=builder, **k: _b(*a, **{**k, "weights": None}))
    dbcnn = importlib.import_module("pyiqa.archs.dbcnn_arch")
    monkeypatch.setattr(dbcnn, "load_pretrained_network", lambda *a, **k: None)


def saved_metric(name, tmp_path):
    """pyiqa's metric (random init, perturbed so the heads spread) and its state saved as safetensors."""
    arch = CASES[name]
    torch.manual_seed(0)
    ref = pyiqa.create_metric(name, device="cpu", pretrained=False, **arch)
    with torch.no_grad():
        for p in ref.net.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    path = tmp_path / f"{name}.safetensors"
    save_file({k: v.contiguous() for k, v in ref.net.state_dict().items()}, str(path))
    return ref, str(path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pyiqa(name, offline_backbones, tmp_path):
    if name.startswith("topiq"):
        pytest.importorskip("facexlib")  # pyiqa's TOPIQ module imports it
    arch = CASES[name]
    ref, path = saved_metric(name, tmp_path)
    reward = load_reward({"name": "image_quality", "model_path": path, "kwargs": {"metric": name, "arch": arch}})
    images = [torch.rand(3, 224, 224, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    images.append(torch.rand(3, 256, 240, generator=torch.Generator().manual_seed(9)))
    ours = np.asarray(reward(image=images).rewards, dtype=np.float64)
    want = np.array([float(ref(img[None])) for img in images])  # pyiqa's own forward, one image at a time
    np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-6)
    assert np.ptp(want) > 0  # the images are told apart


def test_table_is_pyiqas():
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    for name, row in VARIANTS.items():
        cfg = DEFAULT_CONFIGS[row.pyiqa or name]
        assert cfg["metric_mode"] == "NR", name
        assert row.lower_better == cfg.get("lower_better", False), name
        assert row.score_range == cfg["score_range"], name
        assert row.arch.endswith(":" + cfg["metric_opts"]["type"]), name


def test_unknown_and_unbuilt_variants():
    with pytest.raises(ConfigError, match="did you mean 'maniqa'"):
        load_reward({"name": "image_quality", "model_path": "x.safetensors", "kwargs": {"metric": "maniq"}})
    with pytest.raises(ConfigError, match="kwargs.arch must not set"):
        load_reward(
            {
                "name": "image_quality",
                "model_path": "x.safetensors",
                "kwargs": {"metric": "dbcnn", "arch": {"pretrained": True}},
            }
        )


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("lpips", "pyiqa's 'lpips' is a full-reference metric"),
        ("topiq_fr", "pyiqa's 'topiq_fr' is a full-reference metric"),
        ("brisque", "pyiqa's 'brisque' is not built by rewardzoo \\(a classical, hand-crafted metric: BRISQUE\\)"),
        ("niqe_matlab", "not built by rewardzoo \\(a classical"),
        ("fid", "pyiqa's 'fid' is a distribution metric"),
        ("qualiclip", "pyiqa's 'qualiclip' is not built by rewardzoo \\(its constructor always downloads"),
        ("topiq_nr-face", "face alignment downloads"),
    ],
)
def test_pyiqa_metric_not_a_row_says_why(name, why):
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    assert name in DEFAULT_CONFIGS and name not in VARIANTS
    with pytest.raises(ConfigError, match=why) as info:
        load_reward({"name": "image_quality", "model_path": "x.safetensors", "kwargs": {"metric": name}})
    assert info.value.field == "kwargs.metric"
    assert "unknown" not in str(info.value)


def test_unknown_metric_without_pyiqa(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyiqa.default_model_configs", None)  # import fails: no pyiqa
    with pytest.raises(ConfigError, match="unknown pyiqa no-reference metric 'lpips'"):
        load_reward({"name": "image_quality", "model_path": "x.safetensors", "kwargs": {"metric": "lpips"}})


def test_processor_and_video_per_frame_mean(offline_backbones, tmp_path):
    ref, path = saved_metric("musiq", tmp_path)
    kwargs = {"metric": "musiq", "arch": CASES["musiq"]}
    arrays = [np.random.default_rng(i).integers(0, 256, (64, 80, 3), dtype=np.uint8) for i in range(2)]
    proc = RewardProcessor([{"name": "image_quality", "model_path": path, "kwargs": kwargs}])
    got = proc([Sample(image=Image.fromarray(a)) for a in arrays]).rewards["image_quality"]
    want = [float(ref(torch.from_numpy(a).permute(2, 0, 1)[None].float() / 255)) for a in arrays]
    np.testing.assert_allclose(got, want, rtol=1e-4)
    video = torch.from_numpy(np.stack(arrays + arrays[:1])).permute(0, 3, 1, 2)  # (T, C, H, W) uint8
    vproc = RewardProcessor([{"name": "video_quality", "model_path": path, "kwargs": {**kwargs, "num_frames": None}}])
    got_v = vproc([Sample(video=video)]).rewards["video_quality"][0]
    assert got_v == pytest.approx((2 * want[0] + want[1]) / 3, rel=1e-4)


#: tiny OpenAI-style CLIPs (pyiqa's CLIP class, random init): 64-wide text tower of 2 layers; CLIP-IQA's
#: default tower is a ResNet (RN50 layout, width 8), LIQE's a ViT-B/32 layout (width 64, 2 layers, 224 pixels).
TINY_CLIP = {
    "rn": {"vision_layers": (1, 1, 1, 1), "vision_width": 8, "vision_patch_size": None},
    "vit": {"vision_layers": 2, "vision_width": 64, "vision_patch_size": 32},
}
CLIP_CASES = {
    "clipiqa": ("rn", {}),
    "clipiqa+": ("rn", {}),
    "clipiqa+_rn50_512": ("rn", {}),
    "clipiqa+_vitL14_512": ("vit", {}),
    "liqe": ("vit", {}),
    "liqe_mix": ("vit", {"mtl": True}),
    "laion_aes": ("vit", {}),
}


def saved_clip_metric(name, tmp_path, monkeypatch, fp16=False):
    """pyiqa's CLIP-based metric on a tiny random CLIP given to its ``load``, and its state (the CLIP's entries
    under ``clip_model.``) saved as safetensors. ``fp16``: the CLIP's weights rounded as OpenAI's
    ``convert_weights`` leaves them (how LIQE's authors train it on CUDA), held in float32."""
    pytest.importorskip("clip")  # openai-clip's tokenizer, imported by pyiqa's CLIP archs
    from pyiqa.archs.clip_model import CLIP, convert_weights

    tower, arch = CLIP_CASES[name]
    if name == "laion_aes":  # openai-clip's own CLIP class, what its clip.load returns
        from clip.model import CLIP
    torch.manual_seed(0)
    clip = CLIP(
        embed_dim=32,
        image_resolution=224,
        context_length=77,
        vocab_size=49408,
        transformer_width=64,
        transformer_heads=1,
        transformer_layers=2,
        **TINY_CLIP[tower],
    )
    with torch.no_grad():
        for p in clip.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    if fp16:
        convert_weights(clip)
        clip.float()
    clip.eval()
    if name == "laion_aes":  # openai-clip's clip.load, (model, preprocess)
        module = importlib.import_module("pyiqa.archs.laion_aes_arch")
        monkeypatch.setattr(module.clip, "load", lambda *a, **k: (clip, None))
    else:
        module = importlib.import_module(f"pyiqa.archs.{'liqe' if name.startswith('liqe') else 'clipiqa'}_arch")
        monkeypatch.setattr(module, "load", lambda *a, **k: clip)
    if hasattr(module, "DEFAULT_CACHE_DIR"):
        monkeypatch.setattr(module, "DEFAULT_CACHE_DIR", str(tmp_path))  # LIQE's text-feature cache: fresh
    ref = pyiqa.create_metric(name, device="cpu", pretrained=False, **arch)
    state = {f"clip_model.{k}": v for k, v in clip.state_dict().items()} | ref.net.state_dict()
    path = tmp_path / f"{name}.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    return ref, str(path)


@pytest.mark.parametrize("name", sorted(CLIP_CASES))
def test_clip_metrics_match_pyiqa(name, tmp_path, monkeypatch):
    ref, path = saved_clip_metric(name, tmp_path, monkeypatch)
    monkeypatch.undo()  # the reward builds its own CLIP from the file
    reward = load_reward({"name": "image_quality", "model_path": path, "kwargs": {"metric": name}})
    images = [torch.rand(3, 224, 224, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    images.append(torch.rand(3, 256, 240, generator=torch.Generator().manual_seed(9)))
    ours = np.asarray(reward(image=images).rewards, dtype=np.float64)
    want = np.array([float(ref(img[None])) for img in images])
    np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-6)
    assert np.ptp(want) > 0
    if name != "laion_aes":  # a linear head: its ~1-10 is the trained model's, not a bound
        lo, hi = (1, 5) if name.startswith("liqe") else (0, 1)
        assert ((want >= lo) & (want <= hi)).all()


def test_clip_metric_errors(tmp_path, monkeypatch):
    pytest.importorskip("clip")
    with pytest.raises(ConfigError, match="no published checkpoint"):
        load_reward({"name": "image_quality", "kwargs": {"metric": "clipiqa"}})
    _, path = saved_clip_metric("liqe", tmp_path, monkeypatch)
    monkeypatch.undo()
    bare = tmp_path / "bare.safetensors"
    save_file({"x": torch.zeros(1)}, str(bare))
    with pytest.raises(ConfigError, match="no 'clip_model"):
        load_reward({"name": "image_quality", "model_path": str(bare), "kwargs": {"metric": "liqe"}})
    reward = load_reward({"name": "image_quality", "model_path": path, "kwargs": {"metric": "liqe"}})
    with pytest.raises(InputError, match=">= 224") as info:
        reward(image=[torch.rand(3, 224, 224), torch.rand(3, 200, 300)])
    assert info.value.sample == 1


def test_liqe_checkpoints_as_published(tmp_path, monkeypatch):
    """LIQE's checkpoints saved as their makers save them, read through ``model_path`` (``weights_only=True``).

    - The authors' ``LIQE.pt`` (zwx8981/LIQE ``demo.py`` / ``LIQE.py``: ``clip.load("ViT-B/32", jit=False)``, then
      ``model.load_state_dict(torch.load(ckpt))``): a bare OpenAI CLIP state dict, here with the fp16 Linear /
      Conv / attention weights their training leaves (``clip.model.convert_weights`` after each step), saved with
      ``torch.save(state_dict)``. It is their multitask model: ``liqe_mix``.
    - pyiqa's ``liqe_mix.pt`` / ``liqe_koniq.pt`` (``load_pretrained_network(..., weight_keys='params')``; pyiqa's
      ``save_network`` writes ``{'params': net.state_dict()}``).
    - The authors' training checkpoints (``{'epoch', 'model_state_dict', 'optimizer_state_dict', 'all_results'}``,
      SRCCs from scipy as NumPy scalars): refused, a ConfigError saying to convert.
    """
    from pyiqa.archs.clip_model import convert_weights

    ref, _ = saved_clip_metric("liqe_mix", tmp_path, monkeypatch, fp16=True)
    monkeypatch.undo()
    authors = copy.deepcopy(ref.net.clip_model)
    convert_weights(authors)
    state = authors.state_dict()
    assert state["text_projection"].dtype == torch.float16 and state["ln_final.weight"].dtype == torch.float32
    torch.save(state, tmp_path / "LIQE.pt")
    torch.save({"params": ref.net.state_dict()}, tmp_path / "liqe_mix.pt")
    images = [torch.rand(3, 224, 224, generator=torch.Generator().manual_seed(i)) for i in range(2)]
    want = np.array([float(ref(img[None])) for img in images])
    for file in ("LIQE.pt", "liqe_mix.pt"):
        spec = {"name": "image_quality", "model_path": str(tmp_path / file), "kwargs": {"metric": "liqe_mix"}}
        got = np.asarray(load_reward(spec)(image=images).rewards, dtype=np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6, err_msg=file)
    assert np.ptp(want) > 0
    optimizer = torch.optim.Adam(ref.net.clip_model.parameters())
    training = {
        "epoch": 3,
        "model_state_dict": state,
        "optimizer_state_dict": optimizer.state_dict(),
        "all_results": {"val": {"quality": {"koniq10k": np.float64(0.91)}}},
    }
    torch.save(training, tmp_path / "quality_best_ckpt.pt")
    spec = {"name": "image_quality", "model_path": str(tmp_path / "quality_best_ckpt.pt"), "kwargs": {"metric": "liqe"}}
    with pytest.raises(ConfigError, match="refusing to unpickle .*numpy.*convert it to safetensors") as info:
        load_reward(spec)
    assert info.value.field == "model_path"
