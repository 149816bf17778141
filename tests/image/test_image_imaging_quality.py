"""imaging_quality / video_imaging_quality against pyiqa's own MUSIQ and VBench's imaging-quality pipeline.

The model is a tiny random build of pyiqa's own architecture (``pyiqa.archs.musiq_arch.MUSIQ``,
``pretrained=False``), saved as a state dict and loaded through ``model_path``. The references are
pyiqa's ``create_metric("musiq-spaq", pretrained_model_path=...)`` and VBench's ``technical_quality``
(``vbench/imaging_quality.py``), re-computed here from its source: ``load_video`` gives float32 0-255
(T, C, H, W); ``transform(images, mode)`` resizes to ``(int(s * h), int(s * w))`` with
``transforms.Resize(..., antialias=False)`` when the longer (or shorter) side exceeds 512, then / 255;
each frame alone through ``MUSIQ(pretrained_model_path=...)`` with ``training = False``; mean per
video; the mean over videos / 100.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from PIL import Image

from rewardzoo import load_reward
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.errors import ConfigError
from rewardzoo.shared.video import sample_indices
from rewardzoo.spec.sample import Sample

pyiqa = pytest.importorskip("pyiqa")
from pyiqa.archs.musiq_arch import MUSIQ

ARCH = {"hidden_size": 32, "mlp_dim": 64, "num_heads": 2, "num_layers": 2}


def tiny_musiq(seed: int, num_class: int = 1) -> MUSIQ:
    torch.manual_seed(seed)
    net = MUSIQ(pretrained=False, num_class=num_class, **ARCH)
    head = net.head if num_class == 1 else net.head[0]
    with torch.no_grad():  # a MOS-like head, so scores spread like real ones (tens, varying with the image)
        head.weight.normal_(0.0, 5.0)
        head.bias.fill_(50.0)
    return net.eval()


@pytest.fixture(scope="module")
def musiq_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("musiq") / "musiq_tiny.pth"
    torch.save(tiny_musiq(0).state_dict(), path)
    return str(path)


@pytest.fixture(scope="module")
def pyiqa_metric(musiq_path):
    """pyiqa's own metric object with the same weights (its loader, its eval mode, its forward)."""
    return pyiqa.create_metric("musiq-spaq", device="cpu", pretrained_model_path=musiq_path, **ARCH)


@pytest.fixture(scope="module")
def vbench_model(musiq_path):
    model = MUSIQ(pretrained_model_path=musiq_path, **ARCH)  # VBench: MUSIQ(pretrained_model_path=model_path)
    model.training = False
    return model


def vbench_transform(images: torch.Tensor, mode: str = "longer") -> torch.Tensor:
    """vbench/imaging_quality.py ``transform``, step by step, on float 0-255 (T, C, H, W)."""
    _, _, h, w = images.size()
    if mode.startswith("shorter") and min(h, w) > 512:
        scale = 512.0 / min(h, w)
        images = T.Resize(size=(int(scale * h), int(scale * w)), antialias=False)(images)
        if mode == "shorter_centercrop":
            images = T.CenterCrop(512)(images)
    elif mode == "longer" and max(h, w) > 512:
        scale = 512.0 / max(h, w)
        images = T.Resize(size=(int(scale * h), int(scale * w)), antialias=False)(images)
    return images / 255.0


def vbench_video_score(model, frames: np.ndarray, mode: str = "longer") -> float:
    """technical_quality for one video: per-frame MUSIQ, mean; the /100 VBench applies to the mean over videos."""
    images = vbench_transform(torch.Tensor(frames.astype(np.uint8)).permute(0, 3, 1, 2), mode)
    with torch.no_grad():
        acc = sum(float(model(images[i].unsqueeze(0))) for i in range(len(images)))
    return acc / len(images) / 100.0


def rgb(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3)).repeat(8, 0).repeat(8, 1)[:h, :w]
    return np.clip(base + rng.integers(-30, 31, (h, w, 3)), 0, 255).astype(np.uint8)


SIZES = [(80, 120), (600, 260), (530, 700), (80, 120)]  # small, portrait and landscape above 512, a repeat size


@pytest.mark.parametrize("mode", ["longer", "shorter", "shorter_centercrop", None])
def test_image_scores_match_pyiqa_metric_per_sample(musiq_path, pyiqa_metric, mode):
    arrays = [rgb(h, w, seed=i) for i, (h, w) in enumerate(SIZES)]
    reward = load_reward({"name": "imaging_quality", "model_path": musiq_path, "device": "cpu"}, resize=mode, arch=ARCH)
    got = np.asarray(reward(image=[torch.from_numpy(a).permute(2, 0, 1).float() / 255 for a in arrays]).rewards)
    expected = []
    for a in arrays:
        x = vbench_transform(torch.Tensor(a).permute(2, 0, 1)[None], mode or "None")
        with torch.no_grad():
            expected.append(float(pyiqa_metric(x)) / 100.0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert np.ptp(expected) > 1e-3  # the images are told apart


def test_processor_path_from_pil_equals_pyiqa(musiq_path, pyiqa_metric):
    arrays = [rgb(300, 640, seed=9), rgb(64, 64, seed=10)]
    proc = RewardProcessor(
        [{"name": "imaging_quality", "model_path": musiq_path, "device": "cpu", "kwargs": {"arch": ARCH}}]
    )
    got = proc([Sample(image=Image.fromarray(a)) for a in arrays]).rewards["imaging_quality"]
    expected = []
    for a in arrays:
        with torch.no_grad():
            expected.append(float(pyiqa_metric(vbench_transform(torch.Tensor(a).permute(2, 0, 1)[None]))) / 100)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_antialiased_resize_would_differ(musiq_path, pyiqa_metric):
    """The no-antialias resize is a real difference on a frame above 512 (so the test above can fail)."""
    a = torch.Tensor(rgb(600, 800, seed=4)).permute(2, 0, 1)[None]
    reward = load_reward({"name": "imaging_quality", "model_path": musiq_path, "device": "cpu"}, arch=ARCH)
    got = float(reward(image=[a[0] / 255]).rewards[0])
    smooth = T.Resize(size=(384, 512), antialias=True)(a) / 255
    with torch.no_grad():
        assert abs(float(pyiqa_metric(smooth)) / 100 - got) > 1e-4


@pytest.mark.parametrize("t", [1, 3])
def test_video_preset_matches_vbench(musiq_path, vbench_model, t):
    frames = np.stack([rgb(540, 600, seed=20 + k) for k in range(t)])  # above 512: the resize acts
    reward = load_reward(
        {"name": "video_imaging_quality", "model_path": musiq_path, "device": "cpu"},
        preset="vbench",
        arch=ARCH,
        frame_batch_size=2,
    )
    got = reward(video=[torch.from_numpy(frames).permute(0, 3, 1, 2).float() / 255]).rewards[0]
    assert got == pytest.approx(vbench_video_score(vbench_model, frames), rel=1e-5)


def test_video_default_samples_frames_and_averages(musiq_path, vbench_model):
    videos = [np.stack([rgb(64, 96, seed=40 + k) for k in range(11)]), np.stack([rgb(48, 48, seed=60)])]
    proc = RewardProcessor(
        [
            {
                "name": "video_imaging_quality",
                "model_path": musiq_path,
                "device": "cpu",
                "kwargs": {"arch": ARCH, "num_frames": 4},
            }
        ]
    )
    got = proc([Sample(video=torch.from_numpy(v).permute(0, 3, 1, 2)) for v in videos]).rewards
    expected = [vbench_video_score(vbench_model, v[sample_indices(len(v), 4)]) for v in videos]
    np.testing.assert_allclose(got["video_imaging_quality"], expected, rtol=1e-5)
    with pytest.raises(ConfigError, match="num_frames"):
        load_reward(
            {"name": "video_imaging_quality", "model_path": musiq_path, "device": "cpu"},
            preset="vbench",
            num_frames=4,
            arch=ARCH,
        )


def test_pyiqa_names_resolve_to_pyiqa_published_files(monkeypatch):
    from pyiqa.archs.musiq_arch import default_model_urls

    import rewardzoo.rewards.image.imaging_quality as iq

    asked = []
    monkeypatch.setattr(iq, "resolve_weights_file", lambda name: asked.append(name) or name)
    for name, key in [(None, "spaq"), ("musiq-spaq", "spaq"), ("musiq", "koniq10k"), ("musiq-paq2piq", "paq2piq")]:
        iq.checkpoint_file(name)
        assert asked[-1] == default_model_urls[key]
    assert "musiq_spaq_ckpt-358bb6af.pth" in default_model_urls["spaq"]  # the file VBench downloads
    with pytest.raises(ConfigError, match="musiq-ava"):
        iq.checkpoint_file("musiq-ava")


def test_bad_weights_and_options_are_config_errors(musiq_path, tmp_path):
    base = {"name": "imaging_quality", "device": "cpu"}
    ava = tmp_path / "ava.pth"
    torch.save(tiny_musiq(1, num_class=10).state_dict(), ava)
    with pytest.raises(ConfigError, match="10-class head"):
        load_reward({**base, "model_path": str(ava)}, arch=ARCH)
    with pytest.raises(ConfigError, match="does not fit MUSIQ"):
        load_reward({**base, "model_path": musiq_path})  # pyiqa's default dims, tiny weights
    with pytest.raises(ConfigError, match="resize"):
        load_reward({**base, "model_path": musiq_path}, arch=ARCH, resize="bicubic")
    with pytest.raises(ConfigError, match="arch"):
        load_reward({**base, "model_path": musiq_path}, arch={**ARCH, "pretrained": True})
    other = tmp_path / "other.pth"
    torch.save({"layers.0.weight": torch.zeros(2, 2)}, other)
    with pytest.raises(ConfigError, match="not a MUSIQ checkpoint"):
        load_reward({**base, "model_path": str(other)}, arch=ARCH)
    pickled = tmp_path / "pickled.pth"
    torch.save({"net": torch.nn.Linear(2, 2)}, pickled)
    with pytest.raises(ConfigError, match="refusing to unpickle"):
        load_reward({**base, "model_path": str(pickled)}, arch=ARCH)


@pytest.mark.parametrize(
    "blocked, hint", [("pyiqa.archs.musiq_arch", "pip install pyiqa"), ("cv2", "pip install opencv-python-headless")]
)
def test_missing_pyiqa_or_cv2_is_a_missing_extra_error(monkeypatch, musiq_path, blocked, hint):
    import sys

    from rewardzoo.errors import MissingExtraError

    for name in [m for m in sys.modules if m == "pyiqa" or m.startswith("pyiqa.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, blocked, None)  # import of it raises ImportError(name=blocked)
    with pytest.raises(MissingExtraError, match=hint):
        load_reward({"name": "imaging_quality", "model_path": musiq_path, "device": "cpu"}, arch=ARCH)
