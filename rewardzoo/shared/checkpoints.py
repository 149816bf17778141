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
from dataclasses import dataclass, replace
from pathlib import Path
from stat import S_ISREG

from ..errors import InputError

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
HEADERS, FILE_SIZE, PICKLE_TABLE = "safetensors headers", "file size", "torch.save tensor table"
#: Bounds of the safetensors headers and shard indexes read (real ones: a few hundred kB at most).
MAX_HEADER_BYTES = 4 << 20
MAX_INDEX_BYTES = 8 << 20
MAX_DIMS = 64


@dataclass(frozen=True)
class Remote:
    """Where a part's file comes from when it is not on this machine (``rewardzoo fetch``, and the loader's check
    that a missing file can be fetched at all): a hub repository ``repo`` and the names tried in it, the first the
    repository holds wins (``files``; empty: the repository's model files, as a snapshot); ``newest``: instead, the
    file of the repository matching this regular expression whose number (its one group) is the highest (a release's
    latest ``checkpoint-<step>/model.pth``); ``configs_only``: only the repository's configuration and tokenizer
    files (a base model read for its config and tokenizer, not its weights); or a ``url`` that torch's hub cache
    keeps as ``target``."""

    repo: str | None = None
    files: tuple[str, ...] = ()
    url: str | None = None
    target: str | None = None
    newest: str | None = None
    configs_only: bool = False

    def describe(self) -> str:
        """What is fetched, in words: ``'repo': file or file``, its newest ``pattern``, its config files, a URL."""
        if self.url is not None:
            return f"{self.url} (into {self.target})"
        if self.files:
            return f"'{self.repo}': {' or '.join(self.files)}"
        if self.newest is not None:
            return f"'{self.repo}': the highest-numbered file matching {self.newest}"
        return f"'{self.repo}': its {'configuration and tokenizer' if self.configs_only else 'model'} files"


@dataclass(frozen=True)
class Checkpoint:
    """The weight files one ``model_path`` resolves to (``files``), or why none were found (``missing``); ``dtype``:
    the dtype these weights are held at when it is not the entry's (a head that always runs in float32).
    ``include`` / ``exclude``: key prefixes of the tensors this part counts (all when ``include`` is empty) and
    leaves out (what the reward drops, e.g. ``lm_head.``); ``merged``: fragments of the names of tensors folded into
    others at load and not kept (a LoRA's ``.lora_A.`` / ``.lora_B.`` merged into its base weights). Read from
    safetensors headers, and from a ``torch.save`` file's tensor table (:mod:`.pickle_table`) when the part names
    tensors; a pickled file that cannot be read so is counted by its size (then a part with ``include`` counts
    nothing: the file is counted by the part without it). ``remote``: where the file comes from when it is fetched
    (None: a local file or a package's)."""

    source: str
    files: tuple[Path, ...] = ()
    missing: str | None = None
    dtype: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    remote: Remote | None = None
    merged: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckpointBytes:
    """A checkpoint's tensor bytes at a dtype; ``method``: :data:`HEADERS` (exact), :data:`PICKLE_TABLE` (exact: a
    pickled file's tensor table) or :data:`FILE_SIZE` (the files' sizes at their stored precision, pickle framing
    included), or several joined by `` + ``; ``tensors``: how many tensors (exact methods only)."""

    total: int
    method: str
    tensors: int | None = None


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number a safetensors header holds")


_ENTRY_KEYS = frozenset(("dtype", "shape", "data_offsets"))


class _HeaderObjects:
    """``object_pairs_hook`` of a safetensors header: each object is a tensor entry, string metadata or the table
    (of objects); anything else, or a second empty object, stops the parse there (a header of many tiny objects
    would cost ~20x its bytes in Python objects)."""

    def __init__(self) -> None:
        self.empty = 0

    def __call__(self, pairs: list[tuple[str, object]]) -> dict[str, object]:
        if not pairs:
            self.empty += 1
            if self.empty > 1:
                raise ValueError("empty objects where tensors are described")
        elif not (
            {k for k, _ in pairs} == _ENTRY_KEYS
            or all(isinstance(v, str) for _, v in pairs)
            or all(isinstance(v, dict) for _, v in pairs)
        ):
            raise ValueError("an object that is neither a tensor entry, metadata nor the tensor table")
        return dict(pairs)


def _read_regular(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (a FIFO or device would block or never end)."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read {what} '{path}': {exc.strerror or exc}") from None
    if not S_ISREG(stat.st_mode):
        raise InputError(f"{what} '{path}' is not a regular file")
    if stat.st_size > limit:
        raise InputError(f"{what} '{path}' is {stat.st_size} bytes, more than the {limit} read")
    with open(path, "rb") as f:
        return f.read(limit)


def safetensors_header(path: str | os.PathLike[str]) -> dict[str, dict]:
    """The tensor table of a safetensors file (``name -> {dtype, shape, data_offsets}``), read without the data and
    checked in linear time: a header of at most :data:`MAX_HEADER_BYTES`, known dtypes,
    at most :data:`MAX_DIMS` integer dimensions per tensor, offsets inside the file that match each tensor's size.
    :class:`~rewardzoo.errors.InputError` (a ValueError) for anything else, naming the file."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read '{path}': {exc.strerror or exc}") from None
    if not S_ISREG(stat.st_mode):
        raise InputError(f"'{path}' is not a regular file")
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise InputError(f"'{path}' is too short to be a safetensors file")
        (length,) = struct.unpack("<Q", head)
        if length > min(MAX_HEADER_BYTES, stat.st_size - 8):
            raise InputError(
                f"'{path}' is not a safetensors file this reads (header length {length}; the file has "
                f"{stat.st_size} bytes, a header at most {MAX_HEADER_BYTES})"
            )
        raw = f.read(length)
    try:
        table = json.loads(raw, parse_constant=_refuse_constant, object_pairs_hook=_HeaderObjects())
    except (UnicodeDecodeError, ValueError) as exc:  # ValueError: JSON, a 5000-digit number, Infinity
        raise InputError(f"'{path}' has no readable safetensors header: {str(exc)[:200]}") from None
    except RecursionError:
        raise InputError(f"'{path}' has a safetensors header nested too deeply") from None
    if not isinstance(table, dict):
        raise InputError(f"'{path}' has no safetensors tensor table")
    data = stat.st_size - 8 - length
    tensors = {k: v for k, v in table.items() if k != "__metadata__"}
    for name, entry in tensors.items():
        _check_entry(path, name, entry, data)
    return tensors


def _check_entry(path: str | os.PathLike[str], name: str, entry: object, data: int) -> None:
    where = f"'{path}': tensor '{name[:100]}'"
    if not isinstance(entry, dict) or entry.get("dtype") not in _ST_DTYPES:
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        raise InputError(f"{where} has an unknown dtype {str(dtype)[:40]!r} or no entry")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(_size(d) for d in shape):
        raise InputError(f"{where} has an unreadable shape (at most {MAX_DIMS} whole, non-negative dimensions)")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_size(o) for o in offsets):
        raise InputError(f"{where} has unreadable data offsets")
    count = 1
    for dim in shape:  # at most MAX_DIMS factors, each below 2^63
        count *= dim
    begin, end = offsets
    if not begin <= end <= data or end - begin != count * _ST_DTYPES[entry["dtype"]][0]:
        raise InputError(
            f"{where}: its offsets [{begin}, {end}] do not hold its {count} elements inside the file's {data} data bytes"
        )


def _size(value: object) -> bool:
    return type(value) is int and 0 <= value < 2**63


def safetensors_bytes(
    path: str | os.PathLike[str],
    dtype: str | None,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    merged: tuple[str, ...] = (),
) -> tuple[int, int]:
    """(bytes, tensor count) of one safetensors file with its floating tensors at ``dtype`` (None: as stored); only
    the tensors whose names start with a prefix of ``include`` (any, when empty), with none of ``exclude`` and
    containing none of ``merged``."""
    total = 0
    table = {
        name: entry
        for name, entry in safetensors_header(path).items()
        if (not include or name.startswith(include))
        and not name.startswith(exclude)
        and not any(m in name for m in merged)
    }
    for entry in table.values():
        size, floating = _ST_DTYPES[entry["dtype"]]
        count = (entry["data_offsets"][1] - entry["data_offsets"][0]) // size
        total += count * (DTYPE_BYTES[dtype] if floating and dtype is not None else size)
    return total, len(table)


def checkpoint_bytes(
    files: tuple[Path, ...],
    dtype: str | None,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    merged: tuple[str, ...] = (),
) -> CheckpointBytes:
    """The tensor bytes of ``files`` at ``dtype``: exact from safetensors headers, and from a ``torch.save`` file's
    tensor table where the part names its tensors (``include`` / ``exclude`` / ``merged``, as :class:`Checkpoint`
    says); other files by their sizes."""
    from .pickle_table import pickled_table, table_bytes

    total, tensors, methods = 0, 0, []
    for path in files:
        table = pickled_table(path) if path.suffix in _PICKLED and (include or exclude or merged) else None
        if path.suffix == ".safetensors":
            size, count = safetensors_bytes(path, dtype, include, exclude, merged)
            method = HEADERS
        elif table is not None:
            size, count = table_bytes(table, dtype, include, exclude, merged)
            method = PICKLE_TABLE
        else:
            size, count, method = (0 if include else path.stat().st_size), 0, FILE_SIZE
        total, tensors = total + size, tensors + count
        methods.append(method)
    exact = FILE_SIZE not in methods
    return CheckpointBytes(total, " + ".join(dict.fromkeys(methods)) or HEADERS, tensors if exact else None)


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
        remote = Remote(url=text, target=str(target))
        if target.is_file():
            return Checkpoint(text, (target,), remote=remote)
        return Checkpoint(
            text, missing=f"not in the local cache ({target} does not exist: not downloaded yet)", remote=remote
        )
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
                    raw = _read_regular(index, "shard index", MAX_INDEX_BYTES)
                    weight_map = json.loads(raw, parse_constant=_refuse_constant)["weight_map"]
                    shards.update(dict.fromkeys(str(v) for v in weight_map.values()))
                except (InputError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
                    return Checkpoint(text, missing=f"unreadable shard index {index}: {str(exc)[:200]}")
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
    remote = Remote(repo, (filename,) if filename else ())
    try:
        from huggingface_hub import snapshot_download, try_to_load_from_cache
    except ImportError:
        return Checkpoint(
            text, missing="a hub id, and huggingface_hub is not installed to find its local cache", remote=remote
        )
    if filename:
        found = try_to_load_from_cache(repo, filename)
        if isinstance(found, str):
            return Checkpoint(text, (Path(found),), remote=remote)
        return Checkpoint(
            text, missing=f"'{filename}' of '{repo}' is not in the local Hugging Face cache", remote=remote
        )
    try:
        folder = snapshot_download(repo, local_files_only=True)
    except Exception:  # LocalEntryNotFoundError and friends: not cached (nothing is downloaded)
        return Checkpoint(text, missing=f"'{repo}' is not in the local Hugging Face cache", remote=remote)
    return replace(_directory(text, Path(folder)), remote=remote)


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
        remote = Remote(repo, tuple(names))
        for candidate in names:
            found = try_to_load_from_cache(repo, candidate)
            if isinstance(found, str):
                return Checkpoint(source, (Path(found),), remote=remote)
        return Checkpoint(source, missing=f"{source} ('{repo}') is not in the local Hugging Face cache", remote=remote)
    if url:
        from urllib.parse import urlparse

        target = Path("~/.cache/clip").expanduser() / os.path.basename(urlparse(url).path)
        remote = Remote(url=url, target=str(target))
        if target.is_file():
            return Checkpoint(source, (target,), remote=remote)
        return Checkpoint(
            source, missing=f"{source} is not in the local cache ({target} does not exist)", remote=remote
        )
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
