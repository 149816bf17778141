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

Everything is bounded before it is allocated, so a small hostile file cannot exhaust memory: the records read
(declared uncompressed sizes, against ``max_bytes``), the bytes the tensors materialise (a stride-0 view counts
its full size), the code text, the nesting of the unpickled tree, and every value quoted in an error message.
"""

from __future__ import annotations

import io
import os
import pickle
import reprlib
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

#: Defaults of :func:`read_torchscript`'s bounds: uncompressed bytes read from the archive (and, apart, bytes its
#: tensors materialise), the pickled tree, code text, nesting of the unpickled tree, dimensions of one tensor.
MAX_ARCHIVE_BYTES = 16 << 20
MAX_PICKLE_BYTES = 1 << 20  # the module tree only (tensors are records of their own); objects cost ~70x its bytes
MAX_CODE_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_DIMS = 16

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 2, 40, 40
_SHORT.maxtuple = _SHORT.maxlist = _SHORT.maxdict = _SHORT.maxset = 5

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


def short(value: Any) -> str:
    """A repr of ``value`` cut to a few elements per level and a few dozen characters (hostile values are huge)."""
    return _SHORT.repr(value)


class _Budget:
    """Bytes left to allocate for one kind of content; :meth:`take` refuses past the bound, before allocating."""

    def __init__(self, limit: int, what: str) -> None:
        self.left, self.limit, self.what = limit, limit, what

    def take(self, n: int, item: str) -> None:
        if n > self.left:
            raise pickle.UnpicklingError(
                f"{item} needs {n} bytes, past the reader's bound of {self.limit} bytes of {self.what}"
            )
        self.left -= n


class _Restricted(pickle.Unpickler):
    """Resolves only the globals listed in :func:`find_class`; storages come from the archive's records."""

    def __init__(self, data: bytes, archive: zipfile.ZipFile, root: str, records: _Budget, tensors: _Budget) -> None:
        super().__init__(io.BytesIO(data))
        self.archive, self.root = archive, root
        self.records, self.tensors = records, tensors
        self.classes: list[str] = []
        self._types: dict[str, type[ScriptObject]] = {}
        self._storages: dict[str, Any] = {}

    def find_class(self, module: str, name: str) -> Any:
        if module == "__torch__" or module.startswith("__torch__."):
            qualified = f"{module}.{name}"
            if qualified not in self._types:
                self._types[qualified] = type(name, (ScriptObject,), {"qualified_name": qualified})
                self.classes.append(qualified)
            return self._types[qualified]
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return self._rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        raise pickle.UnpicklingError(
            f"refusing the global '{module[:80]}.{name[:80]}' (not a tensor, storage or TorchScript class)"
        )

    def persistent_load(self, pid: Any) -> Any:
        import torch

        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"an unknown persistent record {short(pid)}")
        _, kind, key, _location, numel = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str) or not isinstance(numel, int):
            raise pickle.UnpicklingError(f"an unreadable storage record {short(pid)}")
        if key in self._storages:  # one storage, shared by several tensors, is read once
            return self._storages[key]
        try:
            raw = _read(self.archive, f"{self.root}data/{key}", self.records)
        except KeyError:
            raise pickle.UnpicklingError(f"the storage record 'data/{short(key)}' is missing") from None
        dtype = getattr(torch, kind.dtype)
        width = torch.empty((), dtype=dtype).element_size()
        if numel < 0 or len(raw) < numel * width:
            raise pickle.UnpicklingError(
                f"the storage 'data/{short(key)}' holds {len(raw)} bytes, not {short(numel)} x {width}"
            )
        storage = torch.frombuffer(bytearray(raw), dtype=dtype, count=numel) if numel else torch.empty(0, dtype=dtype)
        self._storages[key] = storage
        return storage

    def _rebuild_tensor(self, storage: Any, offset: Any, size: Any, stride: Any, *_: Any) -> Any:
        import torch

        if not isinstance(storage, torch.Tensor):
            raise pickle.UnpicklingError("a tensor whose storage is not a stored record")
        if not (isinstance(size, tuple | list) and isinstance(stride, tuple | list)) or len(size) > MAX_DIMS:
            raise pickle.UnpicklingError(
                f"a tensor with an unreadable layout (size {short(size)}, stride {short(stride)})"
            )
        shape, strides = tuple(size), tuple(stride)
        if not all(type(n) is int and n >= 0 for n in (offset, *shape, *strides)) or len(shape) != len(strides):
            raise pickle.UnpicklingError(
                f"a tensor with an unreadable layout (size {short(size)}, stride {short(stride)})"
            )
        numel = 1
        for n in shape:
            numel *= n
        # the copy below materialises every element: a stride-0 view of one value costs its full size
        self.tensors.take(numel * storage.element_size(), f"a tensor of size {short(shape)}")
        try:  # as_strided checks the layout against the storage's length
            return torch.as_strided(storage, shape, strides, offset).clone()
        except RuntimeError as exc:
            raise pickle.UnpicklingError(f"a tensor outside its storage: {short(str(exc))}") from None


def _read(archive: zipfile.ZipFile, name: str, budget: _Budget) -> bytes:
    """The bytes of one record, its declared uncompressed size taken from ``budget`` before it is read (zipfile
    reads no more than that size, and checks it and the CRC at the end)."""
    info = archive.getinfo(name)
    budget.take(info.file_size, f"the record '{short(name)}'")
    with archive.open(info) as fh:
        return fh.read(info.file_size)


def _check_depth(root: Any, limit: int) -> None:
    """Refuse a tree nested deeper than ``limit`` (walked without recursion: callers walk it recursively)."""
    stack = [(root, 0)]
    seen: set[int] = set()
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            raise pickle.UnpicklingError(f"objects nested deeper than {limit} levels")
        if isinstance(value, ScriptObject):
            value = value.attributes
        if id(value) in seen or not isinstance(value, dict | list | tuple | set | frozenset):
            continue
        seen.add(id(value))
        children = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
        stack += [(child, depth + 1) for child in children]


def read_torchscript(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = MAX_ARCHIVE_BYTES,
    max_code_bytes: int = MAX_CODE_BYTES,
    max_depth: int = MAX_DEPTH,
) -> TorchScriptArchive:
    """The tensors (inside inert :class:`ScriptObject` trees) and code text of the TorchScript file ``path``.

    ValueError when the file is not a TorchScript archive, is big-endian, its pickle needs anything but
    tensors, storages, ordered dicts and TorchScript classes (the message names the refused global), or it passes
    a bound: ``max_bytes`` of records read and, separately, of tensor data materialised; :data:`MAX_PICKLE_BYTES`
    of pickled tree; ``max_code_bytes`` of code text; ``max_depth`` levels of nesting.
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
        records = _Budget(max_bytes, "records read")
        code_budget = _Budget(max_code_bytes, "code text")
        try:
            order = "little"
            if f"{root}byteorder" in names:
                order = _read(archive, f"{root}byteorder", records).decode(errors="replace").strip()
            if order != "little":
                raise pickle.UnpicklingError(f"saved {short(order)}-endian; only little-endian archives are read")
            tree = _read(archive, pickles[0], _Budget(min(max_bytes, MAX_PICKLE_BYTES), "pickled module tree"))
            unpickler = _Restricted(tree, archive, root, records, _Budget(max_bytes, "tensor data"))
            obj = unpickler.load()
            _check_depth(obj, max_depth)
            code = {
                n[len(f"{root}code/") :]: _read(archive, n, code_budget).decode("utf-8", errors="replace")
                for n in names
                if n.startswith(f"{root}code/") and not n.endswith((".debug_pkl", "/"))
            }
        except (pickle.UnpicklingError, TypeError, ValueError, EOFError, AttributeError, KeyError, IndexError) as exc:
            raise ValueError(f"'{path}': {short(str(exc)) if len(str(exc)) > 400 else exc}") from None
        except (RecursionError, MemoryError) as exc:
            raise ValueError(f"'{path}': its pickle is too deeply nested or too large ({type(exc).__name__})") from None
        except (zipfile.BadZipFile, OSError) as exc:
            raise ValueError(f"'{path}' is not a readable TorchScript archive ({short(str(exc))})") from None
    return TorchScriptArchive(obj, code, unpickler.classes)
