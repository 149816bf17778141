"""The restricted TorchScript reader (ARNIQA's regressors) under hostile archives: each small file that used to
exhaust memory or escape as a traceback is refused with a ValueError, in a child process whose peak memory rise
is measured (VmHWM), and a genuine archive still reads exactly."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import torch

from rewardzoo.shared.torchscript import ScriptObject, read_torchscript

CODE = "reg/code/__torch__/m.py"


def _archive(path: Path, pkl: bytes, records: dict[str, bytes] | None = None, code: str = "class M(Module):\n") -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("reg/data.pkl", pkl)
        z.writestr(CODE, code)
        z.writestr("reg/version", "3\n")
        for name, data in (records or {}).items():
            z.writestr(f"reg/data/{name}", data)
    return path


class _Marker:
    pass


class _Tensor:
    """Pickles as ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)``, as torch.jit.save does."""

    def __init__(self, size: tuple, stride: tuple) -> None:
        self.size, self.stride = size, stride

    def __reduce__(self):
        from collections import OrderedDict

        return (torch._utils._rebuild_tensor_v2, (_MARK, 0, self.size, self.stride, False, OrderedDict()))


_MARK = _Marker()


def _pickle(obj, pid) -> bytes:
    import io

    class P(pickle.Pickler):
        def persistent_id(self, o):
            return pid if o is _MARK else None

    buf = io.BytesIO()
    P(buf, protocol=2).dump(obj)
    return buf.getvalue()


def _peak(path: Path) -> dict:
    """Read ``path`` in a child process: the error (or None) and the rise of its peak RSS over the read, in MB."""
    code = textwrap.dedent(
        f"""
        import json, torch
        from rewardzoo.shared.torchscript import read_torchscript
        def kb(key):
            return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key))
        open("/proc/self/clear_refs", "w").write("5")
        before = kb("VmHWM:")
        try:
            read_torchscript({str(path)!r})
            error = None
        except ValueError as exc:
            error = str(exc)
        print(json.dumps({{"error": error, "peak_mb": (kb("VmHWM:") - before) / 1024}}))
        """
    )
    # from the archive's folder: `python -c` puts its working folder first on the path (the checkout, in the suite)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=path.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _refused(path: Path, match: str) -> None:
    got = _peak(path)
    assert got["error"] is not None and match in got["error"], got
    assert len(got["error"]) < 600
    assert got["peak_mb"] < 100, got


def test_a_genuine_archive_reads_exactly(tmp_path):
    class Lin(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 4096))
            self.b = torch.nn.Parameter(torch.randn(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.w.T + self.b

    module = Lin()
    path = tmp_path / "lin.pt"
    torch.jit.script(module).save(str(path))
    root = read_torchscript(path).root
    assert isinstance(root, ScriptObject)
    assert torch.equal(root.attributes["w"], module.w.detach())
    assert torch.equal(root.attributes["b"], module.b.detach())


def test_a_stride0_view_counts_its_full_size(tmp_path):
    # 4 bytes stored, a 20000 x 20000 view of them: 1.6 GB once copied
    pkl = _pickle({"w": _Tensor((20000, 20000), (0, 0))}, ("storage", torch.FloatStorage, "0", "cpu", 1))
    _refused(_archive(tmp_path / "s0.pt", pkl, {"0": b"\0" * 4}), "a tensor of size (20000, 20000)")


def test_many_views_of_one_storage_count_together(tmp_path):
    pid = ("storage", torch.FloatStorage, "0", "cpu", 1 << 20)  # 4 MiB stored once, cloned 40 times: 160 MiB
    pkl = _pickle([_Tensor((1 << 20,), (1,)) for _ in range(40)], pid)
    _refused(_archive(tmp_path / "views.pt", pkl, {"0": b"\0" * (4 << 20)}), "bytes of tensor data")


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path):
    path = _archive(
        tmp_path / "bomb.pt", _pickle({"w": _Tensor((1,), (1,))}, ("storage", torch.FloatStorage, "0", "cpu", 1))
    )
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as z, z.open("reg/data/0", "w") as fh:
        for _ in range(256):  # 256 MiB of zeros, about 256 KB compressed
            fh.write(bytes(1 << 20))
    assert path.stat().st_size < 2 << 20
    _refused(path, "past the reader's bound")


def test_a_code_bomb_is_refused(tmp_path):
    path = _archive(tmp_path / "code.pt", _pickle({}, None))
    with (
        zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as z,
        z.open("reg/code/__torch__/x.py", "w") as fh,
    ):
        for _ in range(64):  # 64 MiB of nested parentheses
            fh.write(b"(" * (1 << 20))
    _refused(path, "bytes of code text")


def test_an_error_never_quotes_a_huge_value(tmp_path):
    dag: list = [0]
    for _ in range(60):  # a 60-level DAG: 2^60 elements in its full repr, ~1 KB pickled
        dag = [dag, dag]
    pkl = _pickle({"w": _Tensor((1,), (1,))}, ("storage", "not a storage type", "0", dag, 1))
    assert len(pkl) < 4096
    _refused(_archive(tmp_path / "repr.pt", pkl), "an unreadable storage record")


def test_deep_nesting_is_a_value_error(tmp_path):
    depth = 200_000
    pkl = b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."  # lists nested 200,000 deep
    _refused(_archive(tmp_path / "deep.pt", pkl), "nested deeper than")


def test_a_large_pickled_tree_is_refused(tmp_path):
    pkl = b"\x80\x02]" + b"}a" * (1 << 20) + b"."  # a list of 1M empty dicts: 2 MiB pickled, ~100 MB unpickled
    _refused(_archive(tmp_path / "tree.pt", pkl), "pickled module tree")


@pytest.mark.parametrize("size", [(-1,), (2.0,), tuple([1] * 100)])
def test_an_unreadable_layout_is_refused(tmp_path, size):
    pkl = _pickle({"w": _Tensor(size, (1,) * len(size))}, ("storage", torch.FloatStorage, "0", "cpu", 1))
    with pytest.raises(ValueError, match="unreadable layout"):
        read_torchscript(_archive(tmp_path / "layout.pt", pkl, {"0": b"\0" * 4}))
