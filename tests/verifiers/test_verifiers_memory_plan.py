"""The memory plan of rewards whose ONNX weights ship in a wheel: the plan's bytes are the sizes of the files whose
ONNX Runtime sessions the loaded reward keeps alive.

Independently of the plan, every ``onnxruntime.InferenceSession`` created while the reward is built is recorded with
the file it opens; after the build, the sessions still alive (RapidOCR's own det/rec sessions are replaced by the
reward's, its angle classifier's is freed) name the files that take memory.
"""

from __future__ import annotations

import gc
import os
import weakref

import pytest

ort = pytest.importorskip("onnxruntime")

from rewardzoo import load_reward
from rewardzoo.core.memory_plan import plan_config
from rewardzoo.core.resolve import load_config


def _live_session_files(monkeypatch, entry: dict) -> tuple[object, set[str]]:
    opened: list[tuple[weakref.ref, str]] = []
    original = ort.InferenceSession.__init__

    def record(self, path_or_bytes, *args, **kwargs):
        opened.append((weakref.ref(self), os.path.realpath(os.fspath(path_or_bytes))))
        original(self, path_or_bytes, *args, **kwargs)

    monkeypatch.setattr(ort.InferenceSession, "__init__", record)
    reward = load_reward(entry)
    gc.collect()
    return reward, {path for ref, path in opened if ref() is not None}


@pytest.mark.parametrize(
    "name, package",
    [("ocr", "rapidocr_onnxruntime"), ("video_ocr", "rapidocr_onnxruntime"), ("nsfw_safety", "nudenet")],
)
def test_the_plan_counts_the_packaged_onnx_files_the_sessions_load(monkeypatch, name, package):
    pytest.importorskip(package)
    entry = {"name": name, "device": "cpu"}
    (model,) = plan_config(load_config({"rewards": [entry]})).models
    reward, live = _live_session_files(monkeypatch, entry)
    assert live and all(f"{os.sep}{package}{os.sep}" in path for path in live)
    assert {os.path.realpath(f) for f in model.files} == live
    assert model.weights == sum(os.path.getsize(path) for path in live)
    assert model.how.startswith("file size")
    del reward


def test_a_model_path_directory_and_what_is_missing(tmp_path):
    pytest.importorskip("rapidocr_onnxruntime")
    (tmp_path / "det.onnx").write_bytes(b"d" * 100)
    (tmp_path / "rec.onnx").write_bytes(b"r" * 23)
    entry = {"name": "ocr", "model_path": str(tmp_path), "device": "cpu"}
    (model,) = plan_config(load_config({"rewards": [entry]})).models
    assert model.weights == 123
    (tmp_path / "rec.onnx").unlink()
    (model,) = plan_config(load_config({"rewards": [entry]})).models
    assert model.weights is None and "rec.onnx" in model.how
    endpoint = {"name": "ocr", "kwargs": {"engine": "vlm", "backend": "openai"}}
    (model,) = plan_config(load_config({"rewards": [endpoint]})).models
    assert model.weights == 0  # an endpoint loads nothing here
