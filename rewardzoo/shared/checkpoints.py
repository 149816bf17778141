"""Checkpoint sizes without loading: the files a ``model_path`` names, and their tensor bytes at a dtype.

safetensors files are read by their header alone (8 bytes little-endian length, then a JSON table of every
tensor's dtype, shape and offsets), shards through their ``*.safetensors.index.json``; the bytes at a target dtype
convert floating-point tensors only, as ``torch.nn.Module.to(dtype)`` does. Other formats (pickled ``.bin`` /
``.pt`` / ``.pth`` / ``.ckpt``, ``.onnx``) are counted by file size at their stored precision, and say so. Nothing
is downloaded: a hub id is looked up in the local Hugging Face cache only. Files shipped inside an installed
package are found through its import spec, without importing it (:func:`package_file`); an open_clip pretrained tag
through open_clip's own table and cache locations (:func:`open_clip_pretrained`). Memory sizes are parsed and printed
here too (``80GiB``, ``512 MB``).
"""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

#: bytes per element of each safetensors dtype, and whether ``Module.to(dtype)`` converts it.
_ST_DTYPES: dict[str, tuple[int, bool]] = {
    "F64": (8, True),
    "F32": (4, True),
    "F16": (2, True),
    "BF16": (2, True),
    "F8_E4M3": (1, True),
    "F8_E5M2": (1, True),
    "I64": (8, False),
    "I32": (4, False),
    "I16": (2, False),
    "I8": (1, False),
    "U64": (8, False),
    "U32": (4, False),
    "U16": (2, False),
    "U8": (1, False),
    "BOOL": (1, False),
}
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
_PICKLED = (".bin", ".pt", ".pth", ".ckpt")
_WEIGHT_SUFFIXES = (".safetensors", *_PICKLED, ".onnx")
#: How the bytes of a checkpoint were found.
HEADERS, FILE_SIZE = "safetensors headers", "file size"
_MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True)
class Checkpoint:
    """The weight files one ``model_path`` resolves to (``files``), or why none were found (``missing``); ``dtype``:
    the dtype these weights are held at when it is not the entry's (a head that always runs in float32).
    ``include`` / ``exclude``: key prefixes of the tensors this part counts (all when ``include`` is empty) and
    leaves out (what the reward drops, e.g. ``lm_head.``); safetensors only (by file size, a part with ``include``
    counts nothing: the file is counted by the part without it)."""

    source: str
    files: tuple[Path, ...] = ()
    missing: str | None = None
    dtype: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckpointBytes:
    """A checkpoint's tensor bytes at a dtype; ``method``: :data:`HEADERS` (exact) or :data:`FILE_SIZE` (the files'
    sizes at their stored precision, pickle framing included); ``tensors``: how many tensors (headers only)."""

    total: int
    method: str
    tensors: int | None = None


def safetensors_header(path: str | os.PathLike[str]) -> dict[str, dict]:
    """The tensor table of a safetensors file (``name -> {dtype, shape, data_offsets}``), read without the data;
    ValueError for a file that is not safetensors."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"'{path}' is too short to be a safetensors file")
        (length,) = struct.unpack("<Q", head)
        if length > _MAX_HEADER:
            raise ValueError(f"'{path}' is not a safetensors file (header length {length})")
        try:
            table = json.loads(f.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"'{path}' has no readable safetensors header: {exc}") from None
    if not isinstance(table, dict):
        raise ValueError(f"'{path}' has no safetensors tensor table")
    return {k: v for k, v in table.items() if k != "__metadata__"}


def safetensors_bytes(
    path: str | os.PathLike[str], dtype: str | None, include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()
) -> tuple[int, int]:
    """(bytes, tensor count) of one safetensors file with its floating tensors at ``dtype`` (None: as stored); only
    the tensors whose names start with a prefix of ``include`` (any, when empty) and with none of ``exclude``."""
    total = 0
    table = {
        name: entry
        for name, entry in safetensors_header(path).items()
        if (not include or name.startswith(include)) and not name.startswith(exclude)
    }
    for name, entry in table.items():
        try:
            size, floating = _ST_DTYPES[entry["dtype"]]
            count = 1
            for dim in entry["shape"]:
                count *= int(dim)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"'{path}': tensor '{name}' has an unreadable entry ({exc})") from None
        total += count * (DTYPE_BYTES[dtype] if floating and dtype is not None else size)
    return total, len(table)


def checkpoint_bytes(
    files: tuple[Path, ...], dtype: str | None, include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()
) -> CheckpointBytes:
    """The tensor bytes of ``files`` at ``dtype``: exact from headers when every file is safetensors, else the files'
    sizes (safetensors ones still by header); ``include`` / ``exclude`` as :class:`Checkpoint` says."""
    total, tensors, exact = 0, 0, True
    for path in files:
        if path.suffix == ".safetensors":
            size, count = safetensors_bytes(path, dtype, include, exclude)
            total, tensors = total + size, tensors + count
        else:
            total, exact = total + (0 if include else path.stat().st_size), False
    return CheckpointBytes(total, HEADERS if exact else FILE_SIZE, tensors if exact else None)


def resolve_checkpoint(model_path: str) -> Checkpoint:
    """The weight files ``model_path`` names, found locally: a file; a directory's weights (a safetensors index's
    shards, else its safetensors files, else a pickled index's shards, else its ``.bin`` / ``.pt`` / ``.pth`` /
    ``.ckpt`` / ``.onnx`` files); a URL's file in torch's hub cache; a hub id (``org/repo`` or
    ``org/repo/file``) in the local Hugging Face cache. ``missing`` says why nothing was found."""
    text = os.fspath(model_path)
    path = Path(text).expanduser()
    if path.is_file():
        return Checkpoint(text, (path,))
    if path.is_dir():
        return _directory(text, path)
    if text.startswith(("http://", "https://")):
        from urllib.parse import unquote, urlparse

        home = os.environ.get("TORCH_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "torch"
        )
        target = Path(home) / "hub" / "checkpoints" / unquote(Path(urlparse(text).path).name)
        if target.is_file():
            return Checkpoint(text, (target,))
        return Checkpoint(text, missing=f"not in the local cache ({target} does not exist: not downloaded yet)")
    parts = text.strip("/").split("/")
    if len(parts) >= 2 and not text.startswith((".", "/", "~")):
        return _hub_cache(text, "/".join(parts[:2]), "/".join(parts[2:]))
    return Checkpoint(text, missing="neither a local file or directory nor a hub id (a library's model name?)")


def _directory(text: str, path: Path) -> Checkpoint:
    for index_suffix in (".safetensors.index.json", ".bin.index.json"):
        indexes = sorted(path.glob(f"*{index_suffix}"))
        if indexes:
            shards: dict[str, None] = {}
            for index in indexes:
                try:
                    weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    return Checkpoint(text, missing=f"unreadable shard index {index}: {exc}")
                shards.update(dict.fromkeys(weight_map.values()))
            files = tuple(path / name for name in shards)
            absent = [str(f) for f in files if not f.is_file()]
            if absent:
                return Checkpoint(text, missing=f"shards missing: {', '.join(absent)}")
            return Checkpoint(text, files)
    found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
    safetensors = tuple(p for p in found if p.suffix == ".safetensors")
    if safetensors:  # a directory with both formats is loaded from its safetensors (transformers, open_clip)
        return Checkpoint(text, safetensors)
    if found:
        return Checkpoint(text, tuple(found))
    return Checkpoint(text, missing=f"no weight files ({', '.join(_WEIGHT_SUFFIXES)}) in the directory")


def _hub_cache(text: str, repo: str, filename: str) -> Checkpoint:
    try:
        from huggingface_hub import snapshot_download, try_to_load_from_cache
    except ImportError:
        return Checkpoint(text, missing="a hub id, and huggingface_hub is not installed to find its local cache")
    if filename:
        found = try_to_load_from_cache(repo, filename)
        if isinstance(found, str):
            return Checkpoint(text, (Path(found),))
        return Checkpoint(text, missing=f"'{filename}' of '{repo}' is not in the local Hugging Face cache")
    try:
        folder = snapshot_download(repo, local_files_only=True)
    except Exception:  # LocalEntryNotFoundError and friends: not cached (nothing is downloaded)
        return Checkpoint(text, missing=f"'{repo}' is not in the local Hugging Face cache")
    return _directory(text, Path(folder))


def local_file(path: str | os.PathLike[str]) -> Checkpoint:
    """A weight file expected at ``path`` (inside a ``model_path`` directory), or that it does not exist."""
    found = Path(path).expanduser()
    if found.is_file():
        return Checkpoint(os.fspath(path), (found,))
    return Checkpoint(os.fspath(path), missing=f"'{path}' does not exist")


def package_file(package: str, *parts: str) -> Checkpoint:
    """The file ``parts`` under the folder of the installed top-level ``package`` (its import spec: the package is
    not imported), or why there is none."""
    import importlib.util

    source = f"{package}/{'/'.join(parts)}"
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return Checkpoint(source, missing=f"the package '{package}' is not installed")
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.is_file():
        return Checkpoint(source, missing=f"the installed '{package}' has no {'/'.join(parts)}")
    return Checkpoint(source, (path,))


_OPEN_CLIP_BIN, _OPEN_CLIP_SAFE = "open_clip_pytorch_model.bin", "open_clip_model.safetensors"


def open_clip_pretrained(arch: str, tag: str) -> Checkpoint:
    """The local file ``open_clip.create_model(arch, pretrained=tag)`` would load: ``tag`` itself when it is a file;
    else the tag's entry in open_clip's table, looked up where open_clip downloads it (the Hugging Face cache, a
    safetensors file first as open_clip prefers it; else its URL's file in ``~/.cache/clip``). Imports open_clip
    (its table), so for rewards that load open_clip anyway."""
    if Path(tag).expanduser().is_file():
        return Checkpoint(tag, (Path(tag).expanduser(),))
    import open_clip

    source = f"open_clip {arch} pretrained '{tag}'"
    cfg = open_clip.get_pretrained_cfg(arch, tag)
    if not cfg:
        return Checkpoint(source, missing=f"open_clip has no pretrained tag '{tag}' for '{arch}'")
    if "file" in cfg:
        return resolve_checkpoint(cfg["file"])
    hub, url = cfg.get("hf_hub", ""), cfg.get("url", "")
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        hub = ""  # open_clip then downloads the URL
    if hub:
        repo, name = os.path.split(hub)
        if not name or name == _OPEN_CLIP_BIN:
            names = [_OPEN_CLIP_SAFE, _OPEN_CLIP_BIN]
        elif name.endswith((".bin", ".pth")):
            names = [name[:-4] + ".safetensors", name]
        else:
            names = [name]
        for candidate in names:
            found = try_to_load_from_cache(repo, candidate)
            if isinstance(found, str):
                return Checkpoint(source, (Path(found),))
        return Checkpoint(source, missing=f"{source} ('{repo}') is not in the local Hugging Face cache")
    if url:
        from urllib.parse import urlparse

        target = Path("~/.cache/clip").expanduser() / os.path.basename(urlparse(url).path)
        if target.is_file():
            return Checkpoint(source, (target,))
        return Checkpoint(source, missing=f"{source} is not in the local cache ({target} does not exist)")
    return Checkpoint(source, missing=f"open_clip names no file for {source}")


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int | float) -> int:
    """Bytes of ``80GiB``, ``1.5 GB``, ``512MiB``, ``1024`` (bytes); ValueError naming the text and the units."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"a memory size cannot be negative, got {text!r}")
        return int(text)
    found = _SIZE.match(str(text))
    if not found:
        raise ValueError(f"'{text}' is not a memory size (a number and a unit, e.g. 80GiB)")
    unit = found.group(2).lower()
    if unit not in _UNITS:
        raise ValueError(
            f"unknown unit '{found.group(2)}' in '{text}'; use B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, "
            "GiB, TiB (powers of 1024)"
        )
    return int(float(found.group(1)) * _UNITS[unit])


def format_size(n: int | None) -> str:
    """``1.5 GiB``-style text for a byte count (``-`` for None)."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
