"""The memory plan of audio rewards whose weights ship in a wheel (speechmos's DNSMOS ONNX files, silero-vad's
TorchScript model): the plan's bytes are the sizes of the files the reward actually opens, recorded independently
(every ``onnxruntime.InferenceSession`` and ``torch.jit.load`` during the build, with its file)."""

from __future__ import annotations

import gc
import os
import weakref

import pytest
import torch

from rewardzoo import load_reward
from rewardzoo.core.memory_plan import plan_config
from rewardzoo.core.resolve import load_config


def _plan(entry: dict):
    (model,) = plan_config(load_config({"rewards": [entry]})).models
    return model


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "dnsmos", "device": "cpu"},
        {"name": "dnsmos", "device": "cpu", "kwargs": {"personalized": True}},
    ],
    ids=["dnsmos", "personalized"],
)
def test_dnsmos_plan_counts_the_onnx_files_its_sessions_load(monkeypatch, entry):
    pytest.importorskip("speechmos")
    ort = pytest.importorskip("onnxruntime")
    opened: list[tuple[weakref.ref, str]] = []
    original = ort.InferenceSession.__init__

    def record(self, path_or_bytes, *args, **kwargs):
        opened.append((weakref.ref(self), os.path.realpath(os.fspath(path_or_bytes))))
        original(self, path_or_bytes, *args, **kwargs)

    monkeypatch.setattr(ort.InferenceSession, "__init__", record)
    model = _plan(entry)
    reward = load_reward(entry)
    gc.collect()
    live = {path for ref, path in opened if ref() is not None}
    assert len(live) == 2 and any("pdnsmos_models" in p for p in live) == reward.personalized
    assert {os.path.realpath(f) for f in model.files} == live
    assert model.weights == sum(os.path.getsize(p) for p in live)


@pytest.mark.parametrize("name", ["speech_presence", "silence_ratio"])
def test_silero_plan_counts_the_model_file_it_loads(monkeypatch, name):
    pytest.importorskip("silero_vad")
    loaded: list[str] = []
    original = torch.jit.load

    def record(f, *args, **kwargs):
        loaded.append(os.path.realpath(os.fspath(f)))
        return original(f, *args, **kwargs)

    monkeypatch.setattr(torch.jit, "load", record)
    entry = {"name": name, "device": "cpu"}
    model = _plan(entry)
    load_reward(entry)
    assert len(loaded) == 1
    assert [os.path.realpath(f) for f in model.files] == loaded
    assert model.weights == os.path.getsize(loaded[0])
