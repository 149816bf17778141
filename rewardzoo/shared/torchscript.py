"""A TorchScript archive's tensors and code text, read without running anything from it.

A TorchScript file (``torch.jit.save``) is a zip: ``<root>/data.pkl`` (the module tree, pickled), ``<root>/data/<key>``
(the raw bytes of each tensor storage), ``<root>/code/**.py`` (the TorchScript source of its classes) and small
records (``version``, ``byteorder``, ``constants.pkl``). ``torch.jit.load`` compiles and runs that code, and
``torch.load(weights_only=True)`` refuses the format, so :func:`read_torchscript` reads it here instead:

- ``data.pkl`` goes through a restricted unpickler that resolves only torch's tensor rebuild
  (``torch._utils._rebuild_tensor_v2``, done here with ``torch.as_strided`` on the storage), torch's typed storage
  classes (as dtypes) and ``collections.OrderedDict``; every ``__torch__.*`` class becomes an inert
  :class:`ScriptObject` holding its attributes. Any other global is refused before it is looked up, so nothing
  the file names is imported or called (a ``__reduce__`` payload included).
- the code files are returned as text, never compiled; a caller that wants to trust an archive's math checks that
  text (or its syntax tree, :func:`ast.parse` builds one without running it) against the code it expects.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

_STORAGE_DTYPES = {
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
}


class ScriptObject:
    """An inert stand-in for one TorchScript class instance: its qualified name (``__torch__.pkg.Class``) and the
    attributes its pickled state set (tensors, numbers, strings, containers, other :class:`ScriptObject`)."""

    qualified_name = ""
    attributes: dict[str, Any]

    def __new__(cls, *args: Any) -> ScriptObject:
        if args:
            raise pickle.UnpicklingError(f"{cls.qualified_name}: built with arguments {args!r:.80}")
        self = super().__new__(cls)
        self.attributes = {}
        return self

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, dict):
            raise pickle.UnpicklingError(f"{self.qualified_name}: a state that is not a dict ({type(state).__name__})")
        self.attributes = dict(state)


@dataclass(frozen=True)
class _StorageType:
    dtype: str


@dataclass
class TorchScriptArchive:
    """What :func:`read_torchscript` found: the root object, the code files' text by path (relative to the archive's
    ``code/`` folder, ``.debug_pkl`` records left out), and the ``__torch__`` classes the pickle named."""

    root: Any
    code: dict[str, str]
    classes: list[str] = field(default_factory=list)


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_: Any) -> Any:
    import torch

    if not isinstance(storage, torch.Tensor):
        raise pickle.UnpicklingError("a tensor whose storage is not a stored record")
    shape, strides = tuple(size), tuple(stride)
    if not all(isinstance(n, int) and n >= 0 for n in (offset, *shape, *strides)) or len(shape) != len(strides):
        raise pickle.UnpicklingError(f"a tensor with an unreadable layout (size {size!r}, stride {stride!r})")
    try:  # as_strided checks the layout against the storage's length
        return torch.as_strided(storage, shape, strides, offset).clone()
    except RuntimeError as exc:
        raise pickle.UnpicklingError(f"a tensor outside its storage: {exc}") from None


class _Restricted(pickle.Unpickler):
    """Resolves only the globals listed in :func:`find_class`; storages come from the archive's records."""

    def __init__(self, data: bytes, archive: zipfile.ZipFile, root: str) -> None:
        super().__init__(io.BytesIO(data))
        self.archive, self.root = archive, root
        self.classes: list[str] = []
        self._types: dict[str, type[ScriptObject]] = {}

    def find_class(self, module: str, name: str) -> Any:
        if module == "__torch__" or module.startswith("__torch__."):
            qualified = f"{module}.{name}"
            if qualified not in self._types:
                self._types[qualified] = type(name, (ScriptObject,), {"qualified_name": qualified})
                self.classes.append(qualified)
            return self._types[qualified]
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        raise pickle.UnpicklingError(
            f"refusing the global '{module}.{name}' (not a tensor, storage or TorchScript class)"
        )

    def persistent_load(self, pid: Any) -> Any:
        import torch

        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"an unknown persistent record {pid!r:.80}")
        _, kind, key, _location, numel = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str) or not isinstance(numel, int):
            raise pickle.UnpicklingError(f"an unreadable storage record {pid!r:.80}")
        try:
            raw = self.archive.read(f"{self.root}data/{key}")
        except KeyError:
            raise pickle.UnpicklingError(f"the storage record 'data/{key}' is missing") from None
        dtype = getattr(torch, kind.dtype)
        width = torch.empty((), dtype=dtype).element_size()
        if numel < 0 or len(raw) < numel * width:
            raise pickle.UnpicklingError(f"the storage 'data/{key}' holds {len(raw)} bytes, not {numel} x {width}")
        if numel == 0:
            return torch.empty(0, dtype=dtype)
        return torch.frombuffer(bytearray(raw[: numel * width]), dtype=dtype)


def read_torchscript(path: str | os.PathLike[str]) -> TorchScriptArchive:
    """The tensors (inside inert :class:`ScriptObject` trees) and code text of the TorchScript file ``path``.

    ValueError when the file is not a TorchScript archive, is big-endian, or its pickle needs anything but
    tensors, storages, ordered dicts and TorchScript classes (the message names the refused global).
    """
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ValueError(f"'{path}' is not a TorchScript archive (not a zip file: {exc})") from None
    with archive:
        names = archive.namelist()
        pickles = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise ValueError(f"'{path}' is not a TorchScript archive (no <root>/data.pkl)")
        root = pickles[0][: -len("data.pkl")]
        if not any(n.startswith(f"{root}code/") for n in names):
            raise ValueError(f"'{path}' holds no TorchScript code: a torch.save file, not a TorchScript archive")
        order = archive.read(f"{root}byteorder").decode().strip() if f"{root}byteorder" in names else "little"
        if order != "little":
            raise ValueError(f"'{path}' was saved {order}-endian; only little-endian archives are read")
        unpickler = _Restricted(archive.read(pickles[0]), archive, root)
        try:
            obj = unpickler.load()
        except (pickle.UnpicklingError, TypeError, ValueError, EOFError, AttributeError) as exc:
            raise ValueError(f"'{path}': {exc}") from None
        code = {
            n[len(f"{root}code/") :]: archive.read(n).decode("utf-8", errors="replace")
            for n in names
            if n.startswith(f"{root}code/") and not n.endswith((".debug_pkl", "/"))
        }
    return TorchScriptArchive(obj, code, unpickler.classes)
