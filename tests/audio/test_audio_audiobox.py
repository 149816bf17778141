"""audiobox_aesthetics on a tiny checkpoint with the published key names, against the package's AesPredictor."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

aes = pytest.importorskip("audiobox_aesthetics.model.aes")

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.audio.audiobox import AXES, AudioboxAesthetics
from rewardzoo.testing import tiny_audiobox_checkpoint, tiny_audiobox_wavlm_config

from .signals import noise, speech_like

RATE = 16000


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setattr(aes, "DEFAULT_AUDIO_CFG", tiny_audiobox_wavlm_config())
    root = tmp_path_factory.mktemp("aes")
    paths = {
        "hub": tiny_audiobox_checkpoint(root / "hub"),
        "pth": tiny_audiobox_checkpoint(root / "m.pth", layout="pth"),
    }
    yield paths
    mp.undo()


def _clips():
    return [
        speech_like(RATE, 3.0, seed=1).astype(np.float32),
        noise(RATE, 12.5, amp=0.2, seed=2).astype(np.float32),
        speech_like(22050, 21.0, seed=3).astype(np.float32),
    ]


def test_published_layout_keys(tiny):
    from safetensors.torch import load_file

    keys = set(load_file(str(tiny["hub"] / "model.safetensors")))
    assert {f"proj_layer.{a}.0.weight" for a in AXES} <= keys and {f"layer_weights.{a}" for a in AXES} <= keys
    assert any(k.startswith("wavlm_model.encoder.layers.") for k in keys)


def test_matches_the_packages_predictor(tiny):
    from audiobox_aesthetics.infer import AesPredictor

    clips = _clips()
    rates = [RATE, RATE, 22050]
    ref = AesPredictor(checkpoint_pth=str(tiny["pth"]), precision="32", batch_size=1)
    ref.device = torch.device("cpu")
    ref.model.to("cpu")
    want = ref.forward([{"path": torch.from_numpy(c)[None], "sample_rate": r} for c, r in zip(clips, rates)])
    for layout in ("hub", "pth"):
        for axis in ("PQ", "CE"):
            reward = AudioboxAesthetics(model_path=str(tiny[layout]), axis=axis, max_batch_windows=2)
            out = reward(audio=clips, audio_sample_rate=rates)
            assert set(out.extras) == set(AXES)
            for i, row in enumerate(want):
                for a in AXES:
                    assert out.extras[a][i] == pytest.approx(row[a], abs=1e-4)
                assert out.rewards[i] == pytest.approx(row[axis], abs=1e-4)


def test_bad_input(tiny):
    reward = AudioboxAesthetics(model_path=str(tiny["hub"]))
    ok = speech_like(RATE, 1.0).astype(np.float32)
    nan = ok.copy()
    nan[2] = np.inf
    for clips, rates in (([ok, ok[:800]], [RATE] * 2), ([ok, nan], [RATE] * 2), ([ok, ok], [RATE, 0])):
        with pytest.raises(InputError) as exc:
            reward(audio=clips, audio_sample_rate=rates)
        assert (exc.value.field, exc.value.sample) == ("audio", 1)
    with pytest.raises(ConfigError):
        AudioboxAesthetics(model_path=str(tiny["hub"]), axis="XX")


class _NotATensor:  # a class a pickle-requiring checkpoint names (what a crafted file would run code through)
    def __init__(self, value):
        self.value = value


def test_a_checkpoint_that_needs_unpickling_is_refused_with_how_to_convert_it(tiny, tmp_path):
    ckpt = torch.load(str(tiny["pth"]), weights_only=True)  # the plain training checkpoint loads safely
    assert set(ckpt) == {"state_dict", "model_cfg", "target_transform"}
    ckpt["model_cfg"] = {**ckpt["model_cfg"], "extra": _NotATensor(1)}
    crafted = tmp_path / "crafted.pth"
    torch.save(ckpt, crafted)
    with pytest.raises(pickle.UnpicklingError):  # the file does need more than weights_only allows
        torch.load(str(crafted), weights_only=True)
    with pytest.raises(ConfigError) as exc:
        AudioboxAesthetics(model_path=str(crafted))
    message = str(exc.value)
    assert exc.value.field == "model_path" and "refusing to unpickle" in message and str(crafted) in message
    assert "save_pretrained" in message and "_NotATensor" in message
