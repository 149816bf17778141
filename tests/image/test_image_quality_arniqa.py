"""image_quality's ARNIQA rows against pyiqa's own ARNIQA on the same random-init files.

The files are made as ARNIQA's authors made theirs: a scikit-learn ``Ridge`` fitted on random ``2 x 2048`` features,
wrapped by sk2torch and saved with ``torch.jit.script(...).save``; a random-init ResNet-50 encoder saved as a state
dict under ``model.`` (with a projector entry pyiqa drops). The reference is ``pyiqa.create_metric(name)`` with its
downloads pointed at those files, so its regressor runs through ``torch.jit.load`` (here, in the test, only).
"""

from __future__ import annotations

import importlib
import io
import os
import pickle
import shutil
import zipfile
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
import torch

from rewardzoo import load_reward
from rewardzoo.errors import ConfigError
from rewardzoo.rewards.image.image_quality import VARIANTS

pyiqa = pytest.importorskip("pyiqa")
import torchvision

arniqa_arch = importlib.import_module("pyiqa.archs.arniqa_arch")


def save_regressor(path: Path, dataset: str) -> None:
    """sk2torch's wrapper of a Ridge fitted on random features with scores in the dataset's MOS range, scripted and
    saved exactly as ARNIQA's published regressors."""
    sk2torch = pytest.importorskip("sk2torch")
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(0)
    lo, hi = arniqa_arch.DATASET_INFO[dataset]["mos_range"]
    features = np.abs(rng.normal(size=(64, 2, 2048)))  # like ARNIQA's: two L2-normalised non-negative halves
    features = (features / np.linalg.norm(features, axis=-1, keepdims=True)).reshape(64, 4096)
    ridge = Ridge(alpha=1e-3).fit(features, rng.uniform(lo, hi, size=64))
    torch.jit.script(sk2torch.wrap(ridge).float()).save(str(path))


def save_encoder(path: Path) -> None:
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(*list(torchvision.models.resnet50(weights=None).children())[:-1])
    state = {f"model.{k}": v for k, v in encoder.state_dict().items()}
    state["projector.0.weight"] = torch.randn(8, 2048)  # SimCLR's head in ARNIQA.pth: pyiqa keeps model.* only
    torch.save(state, str(path))


def pyiqa_arniqa(name, encoder, regressor, monkeypatch):
    """pyiqa's own metric, its two downloads answered with the local files."""
    dataset = pyiqa.default_model_configs.DEFAULT_CONFIGS[name]["metric_opts"]["regressor_dataset"]

    def state_from_url(url, **_):
        assert url == arniqa_arch.default_model_urls["ARNIQA"]
        return torch.load(str(encoder), weights_only=True)

    def file_from_url(url, **_):
        assert url == arniqa_arch.default_model_urls[dataset]
        return str(regressor)

    resnet50 = torchvision.models.resnet50
    with monkeypatch.context() as patch:
        patch.setattr(torchvision.models, "resnet50", lambda *a, **k: resnet50(weights=None))
        patch.setattr(torch.hub, "load_state_dict_from_url", state_from_url)
        patch.setattr(arniqa_arch, "load_file_from_url", file_from_url)
        return pyiqa.create_metric(name, device="cpu")


@pytest.mark.parametrize("name", ["arniqa", "arniqa-live"])
def test_matches_pyiqa(name, tmp_path, monkeypatch):
    """arniqa: koniq (higher is better, MOS 1-100), its files found where pyiqa's defaults are cached;
    arniqa-live: lower is better (scores inverted), the files passed by model_path / kwargs.regressor_path."""
    dataset = pyiqa.default_model_configs.DEFAULT_CONFIGS[name]["metric_opts"]["regressor_dataset"]
    encoder, regressor = tmp_path / "ARNIQA.pth", tmp_path / f"regressor_{dataset}.pth"
    save_encoder(encoder)
    save_regressor(regressor, dataset)
    ref = pyiqa_arniqa(name, encoder, regressor, monkeypatch)
    if name == "arniqa":  # the defaults: pyiqa's URLs, resolved in torch's hub cache (nothing downloaded)
        monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
        cache = tmp_path / "torch" / "hub" / "checkpoints"
        cache.mkdir(parents=True)
        for key, src in (("ARNIQA", encoder), (dataset, regressor)):
            shutil.copy(src, cache / os.path.basename(urlparse(arniqa_arch.default_model_urls[key]).path))
        entry = {"name": "image_quality", "kwargs": {"metric": name}}
    else:
        entry = {"name": "image_quality", "model_path": str(encoder)}
        entry["kwargs"] = {"metric": name, "regressor_path": str(regressor)}
    reward = load_reward(entry)
    images = [torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    images.append(torch.rand(3, 72, 64, generator=torch.Generator().manual_seed(9)))
    ours = np.asarray(reward(image=images).rewards, dtype=np.float64)
    want = np.array([float(ref(img[None])) for img in images])  # pyiqa's forward, one image at a time
    np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-6)
    assert np.ptp(want) > 1e-3  # the images are told apart


def _rewrite(src: Path, dst: Path, edit) -> None:
    """A copy of the archive ``src`` with each member's bytes passed through ``edit(name, data)``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, edit(info.filename, zin.read(info.filename)))


def _load(tmp_path, regressor: Path):
    encoder = tmp_path / "enc.pth"
    if not encoder.exists():
        save_encoder(encoder)
    entry = {"name": "image_quality", "model_path": str(encoder)}
    return load_reward({**entry, "kwargs": {"metric": "arniqa", "regressor_path": str(regressor)}})


def test_other_torchscript_files_are_refused(tmp_path):
    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weights = torch.nn.Parameter(torch.ones(1, 4096))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * self.weights).sum(1)

    other = tmp_path / "other.pth"
    torch.jit.script(Scaled()).save(str(other))
    with pytest.raises(ConfigError, match="not sk2torch's __torch__.sk2torch.linear_model") as info:
        _load(tmp_path, other)
    assert info.value.field == "kwargs.regressor_path"

    good = tmp_path / "good.pth"
    save_regressor(good, "koniq10k")
    subtracted = tmp_path / "subtracted.pth"  # sk2torch's class name, other math in its code
    _rewrite(good, subtracted, lambda n, b: b.replace(b"torch.add(_0, biases)", b"torch.sub(_0, biases)"))
    with pytest.raises(ConfigError, match="methods differ from sk2torch's"):
        _load(tmp_path, subtracted)


def _plain(tmp_path: Path) -> Path:
    path = tmp_path / "plain.bin"
    path.write_bytes(b"not a zip")
    return path


class _Payload:
    """Pickles as a call of ``os.mkdir(target)``: what a malicious ``__reduce__`` would run on load."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (self.target,))


def _malicious_archive(path: Path, target: Path, nested: bool) -> None:
    payload = pickle.dumps(_Payload(str(target)), protocol=2)
    if nested:  # inside sk2torch's module state: {'weights': <payload>}
        body = payload[2:-1]  # no PROTO, no STOP
        head = b"\x80\x02c__torch__.sk2torch.linear_model\nTorchLinearRegression\n)\x81}X\x07\x00\x00\x00weights"
        payload = head + body + b"sb."
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("reg/data.pkl", payload)
        z.writestr("reg/code/__torch__/sk2torch/linear_model.py", "class TorchLinearRegression(Module):\n  pass\n")
        z.writestr("reg/version", "3\n")


@pytest.mark.parametrize("nested", [False, True])
def test_a_pickled_payload_is_never_run(tmp_path, nested):
    target = tmp_path / "ran"
    archive = tmp_path / "evil.pth"
    _malicious_archive(archive, target, nested)
    with pytest.raises(ConfigError, match=r"refusing the global '(posix|os|nt)\.mkdir'"):
        _load(tmp_path, archive)
    assert not target.exists()
    # the control: the same bytes through an unpickler that resolves globals as pickle does (TorchScript classes
    # stubbed) do run the payload
    data = zipfile.ZipFile(archive).read("reg/data.pkl")
    _Permissive(io.BytesIO(data)).load()
    assert target.is_dir()


class _Permissive(pickle.Unpickler):
    def find_class(self, module, name):
        if module.startswith("__torch__"):
            return type(name, (), {})
        return super().find_class(module, name)


def test_table_and_config_errors(tmp_path):
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    published = {n for n, c in DEFAULT_CONFIGS.items() if c["metric_opts"]["type"] == "ARNIQA"}
    assert published == {n for n, row in VARIANTS.items() if row.regressor}
    for name in published:
        assert DEFAULT_CONFIGS[name]["metric_opts"]["regressor_dataset"] in arniqa_arch.default_model_urls
    with pytest.raises(ConfigError, match="did you mean 'arniqa-kadid'"):
        load_reward({"name": "image_quality", "kwargs": {"metric": "arniqa-kadd"}})
    with pytest.raises(ConfigError, match="no regressor dataset 'konik' \\(did you mean 'koniq'") as info:
        load_reward({"name": "image_quality", "kwargs": {"metric": "arniqa", "arch": {"regressor_dataset": "konik"}}})
    assert info.value.field == "kwargs.arch"
    with pytest.raises(ConfigError, match="regressor_path is ARNIQA's option") as info:
        load_reward({"name": "image_quality", "kwargs": {"metric": "dbcnn", "regressor_path": "r.pth"}})
    assert info.value.field == "kwargs.regressor_path"
    with pytest.raises(ConfigError, match="not a zip file"):
        _load(tmp_path, _plain(tmp_path))
