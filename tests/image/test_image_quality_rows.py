"""image_quality's larger networks and dataset rows against pyiqa's own metric, on the same random-init weights.

Covers the rows ``test_image_quality.py`` leaves out: MANIQA (ViT-B/8 + Swin, 135M parameters) and NIMA
(Inception-ResNet-v2) at their published sizes, and the dataset rows of each network (``topiq_nr-flive`` /
``-spaq``, ``maniqa-kadid`` / ``-pipal``, ``nima-koniq`` / ``-spaq``, ``musiq-spaq`` / ``-paq2piq``).

Each network's state is built once per module (pyiqa's class, ``pretrained=False``, perturbed) and saved as
safetensors; rows that share a structure load the same file. For each row the reference is
``pyiqa.create_metric(row)`` built the way pyiqa builds it for real use (its ``DEFAULT_CONFIGS`` options,
``pretrained`` on), with the arch module's ``load_pretrained_network`` recording the checkpoint it would load
instead of loading it; the saved state is then loaded into it strictly. The test checks that this checkpoint is
the row's, that the reward's network holds the same settings as pyiqa's (every plain attribute of every
submodule: MANIQA's Swin ``scale``, CFANet's ``test_img_size``, NIMA's ``num_classes``, MUSIQ's patching
options, ...), and, where a forward is cheap, that the reward (loaded from the file through ``model_path``) gives
pyiqa's forward's score.

Cost: MANIQA's default of 20 test crops makes one 224-pixel image take about 58 s on this 2-core CPU (pyiqa's
forward, measured), and one crop 1.3-4.5 s (idle vs loaded machine). So ``maniqa`` is compared on one image with
pyiqa's own ``test_sample: 1`` constructor option, passed identically to pyiqa and to the reward (the same code
path, one crop instead of 20); ``maniqa-kadid`` / ``-pipal`` (the same network, other ``scale`` / checkpoint) are
checked on checkpoint, structure and settings without a forward.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from rewardzoo import load_reward
from rewardzoo.rewards.image.image_quality import VARIANTS

pyiqa = pytest.importorskip("pyiqa")
timm = pytest.importorskip("timm")

#: row -> (the row whose saved state it loads: same structure; arch options for both sides; image sizes of the
#: forward comparison, none where the forward is the same network's at MANIQA's cost).
ROWS = {
    "maniqa": ("maniqa", {"test_sample": 1}, [(224, 232)]),
    "maniqa-kadid": ("maniqa", {"test_sample": 1}, []),
    "maniqa-pipal": ("maniqa", {"test_sample": 1}, []),
    "nima": ("nima", {}, [(96, 80), (64, 64)]),
    "nima-koniq": ("nima-koniq", {}, [(96, 80), (64, 64)]),
    "nima-spaq": ("nima-koniq", {}, [(96, 80)]),
    "topiq_nr-flive": ("topiq_nr", {}, [(96, 80), (64, 64)]),
    "topiq_nr-spaq": ("topiq_nr", {}, [(96, 80)]),
    "musiq-spaq": ("musiq", {}, [(96, 80), (64, 64)]),
    "musiq-paq2piq": ("musiq", {}, [(96, 80)]),
    "musiq-ava": ("musiq-ava", {}, [(96, 80), (64, 64)]),
    "topiq_iaa_res50": ("topiq_iaa_res50", {}, [(96, 80)]),
    "topiq_iaa": ("topiq_iaa", {}, []),
    "tres": ("tres", {"test_sample": 1}, [(232, 240)]),
    "tres-flive": ("tres", {"test_sample": 1}, []),
    "cnniqa": ("cnniqa", {}, [(96, 80), (64, 64)]),
    "paq2piq": ("paq2piq", {}, [(96, 80), (64, 64)]),
    "wadiqam_nr": ("wadiqam_nr", {}, [(96, 80), (64, 64)]),
    "unique": ("unique", {}, [(96, 80), (64, 64)]),
    "uranker": ("uranker", {}, [(96, 80), (64, 64)]),
}
#: a tiny MUSIQ (its constructor's sizes), as in test_image_quality.py; the other networks at their real size.
SIZES = {"musiq": {"hidden_size": 32, "mlp_dim": 64, "num_heads": 2, "num_layers": 2}}
#: options pyiqa sets only when it loads the checkpoint (MUSIQ's AVA head), for the random-init build.
HEADS = {"musiq-ava": {"num_class": 10}}
#: how each arch is told not to load weights (CNNIQA: no checkpoint key; UNIQUE: no switch, its loader is recorded).
NO_WEIGHTS = {"cnniqa": {"pretrained": None}, "unique": {}}
ARCH_MODULES = (
    "maniqa_arch",
    "nima_arch",
    "topiq_arch",
    "musiq_arch",
    "tres_arch",
    "cnniqa_arch",
    "paq2piq_arch",
    "wadiqam_arch",
    "unique_arch",
    "uranker_arch",
)


def settings(net):
    """Every plain attribute of every submodule (the constructor's options as the network holds them)."""
    plain = (bool, int, float, str, tuple, list, dict, type(None))
    out = {}
    for prefix, module in net.named_modules():
        for key, value in vars(module).items():
            if key.startswith("_") or key == "training":
                continue
            if torch.is_tensor(value):
                value = value.tolist()
            if isinstance(value, list) and any(isinstance(v, torch.nn.Module) for v in value):
                continue  # URanker's lists of its own registered submodules: compared as modules
            if isinstance(value, plain):
                out[f"{prefix}.{key}"] = value
    return out


def arch_module(name):
    return importlib.import_module(VARIANTS[name].arch.partition(":")[0])


@pytest.fixture(scope="module")
def loads():
    """timm, torchvision and TOPIQ's Swin backbones random-init; each arch module's ``load_pretrained_network``
    records what it is asked to load (the module's list, cleared by the test) instead of fetching and unpickling it."""
    pytest.importorskip("facexlib")  # pyiqa's TOPIQ module imports it
    import torchvision

    asked: list[str] = []
    create = timm.create_model
    topiq = importlib.import_module("pyiqa.archs.topiq_arch")
    swin = topiq.create_swin
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(timm, "create_model", lambda *a, **k: create(*a, **{**k, "pretrained": False}))
        mp.setattr(topiq, "create_swin", lambda *a, **k: swin(*a, **{**k, "pretrained": False}))
        for name in ("resnet18", "resnet34", "resnet50"):
            builder = getattr(torchvision.models, name)
            mp.setattr(torchvision.models, name, lambda *a, _b=builder, **k: _b(*a, **{**k, "weights": None}))
        for mod in ARCH_MODULES:
            module = importlib.import_module(f"pyiqa.archs.{mod}")
            mp.setattr(module, "load_pretrained_network", lambda net, path, *a, **k: asked.append(path))
        yield asked


@pytest.fixture(scope="module")
def saved(loads, tmp_path_factory):
    """``saved(base)``: the path of ``base``'s random-init pyiqa network state (perturbed so the heads spread),
    built and written once per module."""
    files: dict[str, str] = {}

    def get(base):
        if base not in files:
            torch.manual_seed(0)
            size = SIZES.get(base.split("-")[0], {}) | HEADS.get(base, {})
            off = NO_WEIGHTS.get(base, {"pretrained": False})
            net = pyiqa.create_metric(base, device="cpu", **off, **size).net
            with torch.no_grad():
                for p in net.parameters():
                    p.add_(torch.randn_like(p) * 0.01)
            path = tmp_path_factory.mktemp("iqa") / f"{base}.safetensors"
            save_file({k: v.clone() for k, v in net.state_dict().items()}, str(path))  # URanker shares tensors
            files[base] = str(path)
        return files[base]

    return get


@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_matches_pyiqa(name, loads, saved):
    base, arch, sizes = ROWS[name]
    arch = {**SIZES.get(base.split("-")[0], {}), **arch}
    path = saved(base)
    loads.clear()
    ref = pyiqa.create_metric(name, device="cpu", **arch)  # pretrained as pyiqa's DEFAULT_CONFIGS ask
    assert loads == [arch_module(name).default_model_urls[VARIANTS[name].checkpoint]]  # the row's checkpoint
    ref.net.load_state_dict(load_file(path), strict=True)
    reward = load_reward({"name": "image_quality", "model_path": path, "kwargs": {"metric": name, "arch": arch}})
    assert settings(reward.net) == settings(ref.net)
    if not sizes:
        return
    images = [torch.rand(3, h, w, generator=torch.Generator().manual_seed(i)) for i, (h, w) in enumerate(sizes)]
    ours = np.asarray(reward(image=images).rewards, dtype=np.float64)
    want = np.array([float(ref(img[None])) for img in images])  # pyiqa's own forward, one image at a time
    np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-6)
    assert np.all(np.abs(want) > 1e-4)  # not a dead head (MANIQA's and CFANet's end in a ReLU / sigmoid)
    if len(want) > 1:
        assert np.ptp(want) > 0  # the images are told apart
