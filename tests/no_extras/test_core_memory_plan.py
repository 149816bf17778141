"""The memory plan without torch: checkpoint headers, sizes, budgets, the placement rule, model-free entries.

The safetensors files here are written by hand (8-byte length, JSON header, zero bytes), so the expected byte
counts come from the shapes alone, independently of the header reader.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from rewardzoo.cli import main
from rewardzoo.core.loader import RewardLoader, auto_key
from rewardzoo.core.memory_plan import plan_config
from rewardzoo.core.placement import parse_budgets, place
from rewardzoo.core.resolve import load_config, parse_spec
from rewardzoo.errors import ConfigError
from rewardzoo.shared.checkpoints import (
    FILE_SIZE,
    HEADERS,
    checkpoint_bytes,
    local_file,
    package_file,
    parse_size,
    resolve_checkpoint,
    safetensors_header,
)

_ITEM = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "U8": 1}


def _write_safetensors(path, tensors: dict[str, tuple[str, list[int]]]):
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = _ITEM[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    return path


TENSORS = {"w": ("F32", [3, 4]), "b": ("F16", [5]), "ids": ("I64", [7]), "mask": ("U8", [2, 2])}


@pytest.mark.parametrize(
    "dtype, expected",
    [
        (None, 3 * 4 * 4 + 5 * 2 + 7 * 8 + 4),  # as stored
        ("float32", (12 + 5) * 4 + 7 * 8 + 4),  # floats converted, integers kept (as Module.to(dtype) does)
        ("bfloat16", (12 + 5) * 2 + 7 * 8 + 4),
        ("float64", (12 + 5) * 8 + 7 * 8 + 4),
    ],
)
def test_safetensors_bytes_at_a_dtype(tmp_path, dtype, expected):
    path = _write_safetensors(tmp_path / "model.safetensors", TENSORS)
    assert set(safetensors_header(path)) == set(TENSORS)  # metadata left out
    found = checkpoint_bytes((path,), dtype)
    assert (found.total, found.method, found.tensors) == (expected, HEADERS, 4)


def test_a_sharded_directory_is_read_through_its_index(tmp_path):
    _write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {"a": ("F32", [10])})
    _write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"b": ("F32", [6]), "c": ("F16", [4])})
    _write_safetensors(tmp_path / "stray.safetensors", {"x": ("F32", [1000])})  # not in the index: not loaded
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "pytorch_model.bin").write_bytes(b"x" * 99)  # safetensors win, as in transformers
    found = resolve_checkpoint(str(tmp_path))
    assert [p.name for p in found.files] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert checkpoint_bytes(found.files, "float16").total == (10 + 6 + 4) * 2


def test_other_formats_count_by_file_size_and_missing_paths_say_why(tmp_path):
    (tmp_path / "head.pth").write_bytes(b"y" * 1234)
    found = resolve_checkpoint(str(tmp_path))
    size = checkpoint_bytes(found.files, "float16")
    assert (size.total, size.method) == (1234, FILE_SIZE)
    (tmp_path / "empty").mkdir()
    assert "no weight files" in (resolve_checkpoint(str(tmp_path / "empty")).missing or "")
    assert "cache" in (resolve_checkpoint("nobody/no-such-repo-xyz").missing or "")  # with or without huggingface_hub
    assert resolve_checkpoint("ViT-B-32").missing


@pytest.mark.parametrize(
    "text, expected", [("80GiB", 80 * 2**30), ("1.5 GB", 1_500_000_000), ("512mib", 512 * 2**20), ("1024", 1024)]
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


def test_budgets_parse_and_bad_parts_are_named():
    assert parse_budgets("cuda:0=80GiB, cuda:1=1GB ,cpu=2TiB") == {
        "cuda:0": 80 * 2**30,
        "cuda:1": 10**9,
        "cpu": 2 * 2**40,
    }
    for text, part in [
        ("cuda:0=80GiB,cuda:1", "'cuda:1'"),
        ("cuda:0=80QB", "unknown unit 'QB'"),
        ("gpu0=80GiB", "unknown device 'gpu0'"),
        ("cuda:0=lots", "'lots' is not a memory size"),
        ("cuda:0=1GiB,cuda:0=2GiB", "given twice"),
    ]:
        with pytest.raises(ConfigError, match=part) as info:
            parse_budgets(text)
        assert info.value.field == "--devices"


def test_placement_largest_first_onto_the_most_free_device():
    free = {"cuda:0": 80, "cuda:1": 100}
    # 70 -> cuda:1 (100 free, 30 left); 50 -> cuda:0 (80, 30 left); 20 -> cuda:0 (30 = 30: the first listed)
    assert place({"a": 20, "b": 70, "c": 50}, free) == {"b": "cuda:1", "c": "cuda:0", "a": "cuda:0"}
    assert place({"x": 500}, free) == {"x": "cuda:1"}  # fits nowhere: still placed, the plan says it does not fit
    assert place({}, free) == {}
    with pytest.raises(ValueError):
        place({"a": 1}, {})


def test_model_free_entries_have_no_weights_and_offload_does_nothing():
    config = load_config(
        {
            "rewards": [{"name": "jpeg", "reward_model": "jpeg_compressibility", "offload": "drop"}],
            "eval_rewards": [{"name": "jpeg_eval", "reward_model": "jpeg_compressibility", "offload": "drop"}],
        }
    )
    plan = plan_config(config)
    (model,) = plan.models  # train and eval share one model, as the loader shares them
    assert model.entries == ["jpeg", "jpeg_eval"] and model.weights == 0 and model.how == "no weights"
    assert any("does nothing" in n for n in model.notes)
    assert plan.devices["cpu"].peak == 0 and plan.devices["cpu"].exact and plan.fits


def test_a_non_fitting_budget_exits_non_zero_naming_the_entry_and_the_device(tmp_path, capsys):
    _write_safetensors(tmp_path / "big.safetensors", {"w": ("F32", [1024, 256])})  # 1 MiB in float32
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"rewards:\n  - name: scorer\n    reward_model: clip_score\n    model_path: {tmp_path / 'big.safetensors'}\n"
        "    device: cpu\n"
    )
    assert main(["plan", str(cfg), "--devices", "cpu=2MiB"]) == 0
    assert "1.0 MiB" in capsys.readouterr().out
    assert main(["plan", str(cfg), "--devices", "cpu=1000KiB"]) == 1
    err = capsys.readouterr().err
    assert "entry 'scorer' does not fit on cpu" in err and "1.0 MiB" in err
    assert main(["plan", str(cfg), "--devices", "cpu=1ZB"]) == 2
    assert "unknown unit 'ZB'" in capsys.readouterr().err


def test_json_output_shape(tmp_path, capsys):
    _write_safetensors(tmp_path / "w.safetensors", {"w": ("F32", [10])})
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"rewards:\n  - name: a\n    reward_model: clip_score\n    model_path: {tmp_path / 'w.safetensors'}\n"
        "    device: cpu\n    offload: cpu\n  - name: j\n    reward_model: jpeg_compressibility\n"
    )
    assert main(["plan", str(cfg), "--json", "--devices", "cpu=1GiB"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"models", "devices", "fits", "problems"} and out["fits"] is True and out["problems"] == []
    a = next(m for m in out["models"] if m["entries"] == ["a"])
    assert set(a) == {
        "entries",
        "reward_model",
        "model_path",
        "device",
        "dtype",
        "offload",
        "weights_bytes",
        "weights_from",
        "files",
        "activation_per_sample_bytes",
        "activation_from",
        "batch_size",
        "notes",
    }
    assert (a["weights_bytes"], a["weights_from"], a["dtype"], a["offload"]) == (40, HEADERS, "float32", "cpu")
    assert out["devices"]["cpu"] == {
        "budget_bytes": 2**30,
        "resident_bytes": 0,  # the only weights sleep in host memory between phases
        "asleep_host_bytes": 40,
        "peak_bytes": 40,
        "lower_bound": True,  # clip_score's activation is unknown
        "fits": True,
        "entries": ["a", "j"],
    }


def test_the_loader_puts_an_auto_entry_where_the_placement_says():
    spec = parse_spec({"name": "p", "reward_model": "tests.no_extras.rewards:PromptLength"})
    loader = RewardLoader()
    loader.placement[auto_key(spec)] = "cuda:7"  # where the plan put it: the loader resolves that device
    with pytest.raises(ConfigError, match="cuda:7") as info:
        loader.load(spec)
    assert info.value.entry == "p" and info.value.field == "device"
    assert RewardLoader().load(spec).device == "cpu"  # without a placement: auto as before


def test_package_files_and_files_in_a_model_directory(tmp_path):
    import importlib.util

    found = package_file("pytest", "__init__.py")
    assert found.files == (Path(importlib.util.find_spec("pytest").origin),) and found.missing is None
    assert "no nope.onnx" in (package_file("pytest", "nope.onnx").missing or "")
    assert "'no_such_pkg_xyz' is not installed" in (package_file("no_such_pkg_xyz", "m.onnx").missing or "")
    (tmp_path / "det.onnx").write_bytes(b"x" * 7)
    assert local_file(tmp_path / "det.onnx").files == (tmp_path / "det.onnx",)
    assert "does not exist" in (local_file(tmp_path / "rec.onnx").missing or "")


def _write_header_only(path, tensors: dict[str, tuple[str, list[int]]]):
    """A safetensors header declaring ``tensors`` with none of their data: a checkpoint's size, nothing big on disk."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = _ITEM[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    return path


def _clip_config(tmp_path, model_path, **extra) -> Path:
    cfg = tmp_path / "c.yaml"
    lines = [f"    {k}: {v}" for k, v in {"model_path": model_path, "device": "cpu", **extra}.items()]
    cfg.write_text("rewards:\n  - name: scorer\n    reward_model: clip_score\n" + "\n".join(lines) + "\n")
    return cfg


def test_plan_refuses_weights_larger_than_the_machine_before_loading(tmp_path, capsys, monkeypatch):
    from rewardzoo.core import memory_plan

    huge = _write_header_only(tmp_path / "huge.safetensors", {"w": ("F32", [2**39])})  # declares 2 TiB
    assert huge.stat().st_size < 200
    assert main(["plan", str(_clip_config(tmp_path, huge))]) == 1  # no --devices: the machine's memory decides
    err = capsys.readouterr().err
    assert "entry 'scorer'" in err and "2.0 TiB" in err and "larger than this machine's memory" in err
    assert "before loading" in err
    monkeypatch.setattr(memory_plan, "host_memory", lambda: 2**42)  # a machine with 4 TiB plans it
    assert main(["plan", str(_clip_config(tmp_path, huge))]) == 0
    capsys.readouterr()
    small = _write_safetensors(tmp_path / "small.safetensors", {"w": ("F32", [1024, 256])})  # 1 MiB
    monkeypatch.setattr(memory_plan, "host_memory", lambda: 2**20 - 1)
    assert main(["plan", str(_clip_config(tmp_path, small))]) == 1
    assert "larger than this machine's memory (1024.0 KiB)" in capsys.readouterr().err.replace("1023.9", "1024.0")
    monkeypatch.setattr(memory_plan, "host_memory", lambda: 2**20)  # exactly fits: planned
    assert main(["plan", str(_clip_config(tmp_path, small))]) == 0


def test_host_memory_is_at_most_the_physical_memory():
    from rewardzoo.core.memory_plan import host_memory

    total = next(int(line.split()[1]) * 1024 for line in open("/proc/meminfo") if line.startswith("MemTotal:"))
    assert 0 < host_memory() <= total


def _record(**over):
    record = {
        "case": "clip_score",
        "reward": "clip_score",
        "matches": {},
        "stands_for": ["org/published-clip"],
        "dtype": "float32",
        "weights_bytes": 400_000,
        "load_peak_bytes": 800_000,
        "date": "2026-12-06",
        "machine": "test",
        "cpu": {"activation_bytes_per_sample": 37_000_000, "cpu_s_per_sample": 1.0, "threads": 2},
        "cuda": {"activation_bytes_per_sample": 21_000_000, "s_per_sample": 0.01, "device": "a GPU"},
    }
    return {**record, **over}


def test_plan_reads_the_activation_measured_at_real_size(tmp_path, monkeypatch):
    from rewardzoo.catalog import measured

    monkeypatch.setattr(measured, "records", lambda: (_record(),))
    same = _write_safetensors(tmp_path / "same.safetensors", {"w": ("F32", [1000, 100])})  # 400000 bytes: that model
    other = _write_safetensors(tmp_path / "other.safetensors", {"w": ("F32", [10, 100])})

    def planned(model_path, budgets=None, **entry):
        spec = {"name": "s", "reward_model": "clip_score", "model_path": str(model_path), "batch_size": 4, **entry}
        plan = plan_config(load_config({"rewards": [spec]}), budgets)
        return plan.models[0], plan

    model, plan = planned(same, device="cpu")
    assert model.activation == 37_000_000 and model.activation_source.startswith("measured (CPU peak RSS")
    assert plan.devices["cpu"].peak == 400_000 + 4 * 37_000_000 and plan.devices["cpu"].exact
    assert "clip_score 2026-12-06" in model.as_dict()["activation_from"]
    model, _ = planned(same, {"cuda:0": 2**30}, device="cuda", dtype="float32")  # on CUDA: the CUDA figure
    assert (model.activation, model.activation_source.split(",")[0]) == (
        21_000_000,
        "measured (CUDA max_memory_allocated",
    )
    # another architecture, or the same one at another dtype: not the measured model
    assert planned(other, device="cpu")[0].activation is None
    assert planned(same, device="cpu", dtype="bfloat16")[0].activation is None
    # weights unknown here (a hub id not downloaded): the published id the build reproduces stands for it
    assert planned("org/published-clip", device="cpu")[0].activation == 37_000_000
    assert planned("org/another-clip", device="cpu")[0].activation is None


def test_a_measured_figure_applies_only_to_the_entries_it_matches(tmp_path, monkeypatch):
    from rewardzoo.catalog import measured

    record = _record(matches={"prefix": ""}, cuda=None)
    record.pop("cuda")
    monkeypatch.setattr(measured, "records", lambda: (record,))
    path = _write_safetensors(tmp_path / "same.safetensors", {"w": ("F32", [1000, 100])})
    entry = {"name": "s", "reward_model": "clip_score", "model_path": str(path), "device": "cpu"}
    plan = plan_config(load_config({"rewards": [{**entry, "kwargs": {"prefix": ""}}]}))
    assert plan.models[0].activation == 37_000_000
    assert plan_config(load_config({"rewards": [entry]})).models[0].activation is None  # prefix not set: unknown
    cuda = {**entry, "device": "cuda", "dtype": "float32", "kwargs": {"prefix": ""}}
    on_cuda = plan_config(load_config({"rewards": [cuda]}), {"cuda:0": 2**30})
    assert on_cuda.models[0].activation == 37_000_000  # no CUDA figure: the CPU one


def test_the_shipped_figures_name_rewards_with_cards_and_apply_to_their_model():
    from rewardzoo.catalog import measured
    from rewardzoo.catalog.registry import lookup

    for record in measured.records():
        assert lookup(record["reward"]) is not None, record["case"]
        for source in record["stands_for"]:
            got = measured.activation_for(record["reward"], record["matches"], record["dtype"], "cpu", None, source)
            assert got is not None and got[0] == record["cpu"]["activation_bytes_per_sample"], record["case"]
