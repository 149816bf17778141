"""A ``torch.save`` file's tensor table read without loading it (shared/pickle_table), as `rewardzoo plan` counts a
pickled part that names its tensors: against the tensors torch itself loads; anything else in the file, the legacy
format or a payload gives no table (the plan then counts the file's size) and runs nothing."""

from __future__ import annotations

import argparse
import os
import pickle
import zipfile
from pathlib import Path

import torch

from rewardzoo.shared.checkpoints import FILE_SIZE, PICKLE_TABLE, checkpoint_bytes
from rewardzoo.shared.pickle_table import pickled_table, table_bytes


def _state() -> dict[str, torch.Tensor]:
    emb = torch.randn(11, 6, dtype=torch.bfloat16)
    return {
        "embed.weight": emb,
        "lm_head.weight": emb,  # tied: one storage saved under two names
        "layer.q.base_layer.weight": torch.randn(6, 6),
        "layer.q.lora_A.default.weight": torch.randn(2, 6),
        "layer.q.lora_B.default.weight": torch.randn(6, 2),
        "layer.ids": torch.arange(5),  # int64: not converted to the dtype
        "rm_head.weight": torch.randn(3, 6, dtype=torch.float16)[1:],  # a view: 2 of the storage's 3 rows
    }


def test_the_table_is_what_torch_loads(tmp_path):
    path = tmp_path / "model.pth"
    torch.save({"state_dict": _state(), "step": 7}, path)
    loaded = torch.load(path, weights_only=True)["state_dict"]
    table = pickled_table(path)
    assert table is not None and set(table) == set(loaded)
    for name, t in loaded.items():
        assert (table[name].dtype, table[name].numel) == (str(t.dtype).removeprefix("torch."), t.numel())
    stored = {id(t): t for t in loaded.values()}.values()  # the tied pair once
    assert table_bytes(table, None) == (sum(t.numel() * t.element_size() for t in stored), 6)
    as_float32 = sum(t.numel() * (8 if t.dtype == torch.int64 else 4) for t in stored)
    assert table_bytes(table, "float32") == (as_float32, 6)
    kept, n = table_bytes(table, None, exclude=("lm_head.", "rm_head."), merged=(".lora_A.", ".lora_B."))
    assert (kept, n) == (11 * 6 * 2 + 36 * 4 + 5 * 8, 3)
    assert checkpoint_bytes((path,), None, include=("rm_head.",)).total == 2 * 6 * 2
    assert checkpoint_bytes((path,), None, include=("rm_head.",)).method == PICKLE_TABLE


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch PAYLOAD_RAN",))


def test_other_objects_the_legacy_format_and_payloads_give_no_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with_namespace = tmp_path / "trainer.pt"
    torch.save({"state_dict": _state(), "args": argparse.Namespace(lr=0.1)}, with_namespace)
    legacy = tmp_path / "legacy.pt"
    torch.save(_state(), legacy, _use_new_zipfile_serialization=False)
    crafted = tmp_path / "crafted.pth"
    with zipfile.ZipFile(crafted, "w") as archive:
        archive.writestr("crafted/data.pkl", pickle.dumps({"w": _Payload()}))
    for path in (with_namespace, legacy, crafted, Path(tmp_path / "missing.pt")):
        assert pickled_table(path) is None
    assert not (tmp_path / "PAYLOAD_RAN").exists()
    size = checkpoint_bytes((with_namespace,), "float32", exclude=("lm_head.",))
    assert (size.total, size.method) == (with_namespace.stat().st_size, FILE_SIZE)
    (tmp_path / "text.pt").write_text("not a zip")
    assert pickled_table(tmp_path / "text.pt") is None
