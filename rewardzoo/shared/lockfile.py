"""The lock file ``rewardzoo fetch`` writes: each fetched file's repository, revision, name, size and SHA-256.

JSON, one object::

    {"rewardzoo_lock": 1,
     "files": [{"entries": ["pickscore"], "repository": "yuvalkirstain/PickScore_v1",
                "revision": "<40-hex commit>", "file": "model.safetensors", "size": 3944318408,
                "sha256": "<64 hex>"}, ...]}

``repository`` is a hub repository, or for a file fetched from a URL the URL itself (``revision`` then null). A run
with ``REWARDZOO_LOCK=PATH`` (:mod:`rewardzoo.core.hub_weights`) loads a hub file only when its bytes have the locked
SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import ConfigError

VERSION = 1
_CHUNK = 8 << 20


@dataclass(frozen=True)
class LockedFile:
    """One fetched file (see the module docstring); ``entries``: the config entries that load it."""

    repository: str
    revision: str | None
    file: str
    size: int
    sha256: str
    entries: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        out = asdict(self)
        out["entries"] = list(self.entries)
        return out


@dataclass
class Lock:
    """A lock file's files."""

    files: list[LockedFile] = field(default_factory=list)

    def files_of(self, repository: str) -> list[LockedFile]:
        """The locked files of ``repository`` (a hub id or URL)."""
        return [f for f in self.files if f.repository == repository]

    def revision_of(self, repository: str) -> str | None:
        """The revision ``repository`` is locked at (None: not locked, or a URL)."""
        return next((f.revision for f in self.files_of(repository)), None)


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a file's bytes, read in 8 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def git_blob_sha1(path: str | os.PathLike) -> str:
    """The git blob id of a file (``sha1("blob <size>\\0" + bytes)``): what the hub reports for a file not in LFS."""
    size = os.path.getsize(path)
    h = hashlib.sha1(f"blob {size}\0".encode())
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def write_lock(path: str | os.PathLike, lock: Lock) -> None:
    """Write ``lock`` to ``path`` (files sorted by repository and name)."""
    files = sorted(lock.files, key=lambda f: (f.repository, f.file))
    text = json.dumps({"rewardzoo_lock": VERSION, "files": [f.as_dict() for f in files]}, indent=2)
    Path(path).write_text(text + "\n", encoding="utf-8")


def read_lock(path: str | os.PathLike) -> Lock:
    """The lock at ``path``; :class:`ConfigError` naming the file when it is missing or not a lock file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the lock file '{path}': {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"the lock file '{path}' is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("rewardzoo_lock") != VERSION or not isinstance(data.get("files"), list):
        raise ConfigError(f"'{path}' is not a rewardzoo lock file (version {VERSION})")
    files = []
    for i, item in enumerate(data["files"]):
        try:
            files.append(
                LockedFile(
                    repository=str(item["repository"]),
                    revision=None if item.get("revision") is None else str(item["revision"]),
                    file=str(item["file"]),
                    size=int(item["size"]),
                    sha256=str(item["sha256"]),
                    entries=tuple(str(e) for e in item.get("entries", ())),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"the lock file '{path}': file {i} lacks or mistypes {exc}") from None
    return Lock(files)
