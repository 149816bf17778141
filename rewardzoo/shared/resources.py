"""What a loaded reward holds: its torch modules, its ONNX sessions and the files their weights were read from.

A reward declares each model it keeps when it builds it (``self.model = self.hold(model)``, :meth:`Reward.hold
<rewardzoo.rewards.base.Reward.hold>`), wherever it keeps it (an attribute, a helper object three levels down, a
third-party engine). The record is what the core reads about a loaded reward's weights: residency (``offload:``
sleep and wake, :mod:`rewardzoo.core.residency`), the frozen differentiable path and the scale harness; nothing
walks a reward's attributes to find them.

:meth:`Resources.hold` takes

- a ``torch.nn.Module`` (its submodules, parameters and buffers with it);
- an ONNX session that can be released and recreated from its file (``release()``, ``restore()``, ``released``,
  ``path``: :class:`~rewardzoo.rewards.models.onnx.ReleasableSession`);
- an inner reward, or a helper object that keeps a record of its own in a ``resources`` attribute (a CLIP
  backbone, a VLM backbone): its record is part of this one, read through at every use, so what it holds later
  is held too;

and ``files``: where the weights of what it holds were read from (checkpoint files, folders, hub ids in the local
cache). A wake from ``offload: drop`` reads the weights back from those files, bound to the exact bits; a tensor
found in none of them is kept in a process-private file instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

__all__ = ["Resources"]

T = TypeVar("T")


class Resources:
    """The record of what one reward (or helper object) holds; see the module docstring."""

    __slots__ = ("_files", "_modules", "_parts", "_sessions")

    def __init__(self) -> None:
        self._modules: dict[int, Any] = {}
        self._sessions: dict[int, Any] = {}
        self._files: dict[str, None] = {}
        self._parts: list[Resources] = []

    def hold(self, obj: T, *, files: Iterable[str | os.PathLike[str] | None] | str | os.PathLike[str] = ()) -> T:
        """Declare ``obj`` held (see the module docstring), its weights read from ``files``; returns ``obj``.
        TypeError for anything else (a model that is not a torch module or ONNX session is held by the helper
        object that keeps it declaring it in a record of its own)."""
        if _is_module(obj):
            self._modules.setdefault(id(obj), obj)
            files = [*_as_list(files), *_transformers_source(obj)]
        elif _is_session(obj):
            self._sessions.setdefault(id(obj), obj)
            files = [*_as_list(files), obj.path]  # type: ignore[attr-defined]
        elif (part := _record_of(obj)) is not None:
            if part is not self and all(p is not part for p in self._parts):
                self._parts.append(part)
        else:
            raise TypeError(
                f"cannot hold a {type(obj).__module__}.{type(obj).__qualname__}: a reward holds torch modules, ONNX "
                "sessions, inner rewards and helper objects with a `resources` record (rewardzoo.shared.resources)"
            )
        self.add_files(files)
        return obj

    def add_files(self, files: Iterable[str | os.PathLike[str] | None] | str | os.PathLike[str]) -> None:
        """Add where weights held here were read from (None and empty entries are skipped)."""
        for path in _as_list(files):
            if path:
                self._files.setdefault(os.fspath(path), None)

    def modules(self) -> list[Any]:
        """The torch modules held here and in the records that are part of this one, each once."""
        return list({id(m): m for record in self._tree() for m in record._modules.values()}.values())

    def sessions(self) -> list[Any]:
        """The ONNX sessions held here and in the records that are part of this one, each once."""
        return list({id(s): s for record in self._tree() for s in record._sessions.values()}.values())

    def files(self) -> list[str]:
        """Where the held weights were read from (this record's files, then its parts')."""
        return list(dict.fromkeys(path for record in self._tree() for path in record._files))

    def __bool__(self) -> bool:
        return bool(self.modules() or self.sessions())

    def _tree(self) -> list[Resources]:
        """This record and its parts, each once (a part may be shared: two rewards over one backbone)."""
        out: dict[int, Resources] = {}
        todo = [self]
        while todo:
            record = todo.pop()
            if id(record) not in out:
                out[id(record)] = record
                todo.extend(reversed(record._parts))
        return list(out.values())

    def __repr__(self) -> str:
        return f"Resources({len(self.modules())} modules, {len(self.sessions())} sessions, files={self.files()})"


def _record_of(obj: Any) -> Resources | None:
    """``obj`` itself when it is a record; else the record an inner reward or helper object keeps as ``resources``."""
    if isinstance(obj, Resources):
        return obj
    record = getattr(obj, "resources", None)
    return record if isinstance(record, Resources) else None


def _is_module(obj: Any) -> bool:
    torch = sys.modules.get("torch")  # a module exists only once torch is imported
    return torch is not None and isinstance(obj, torch.nn.Module)


def _is_session(obj: Any) -> bool:
    """A releasable session, by its class (an attribute read on the object would recreate a released session)."""
    kind = type(obj)
    return all(callable(getattr(kind, name, None)) for name in ("release", "restore")) and hasattr(kind, "released")


def _transformers_source(module: Any) -> list[str]:
    """Where a transformers model says it was loaded from (``name_or_path``); nothing for other modules."""
    config = getattr(module, "config", None)
    return [p for p in (getattr(config, "_name_or_path", None),) if isinstance(p, str) and p]


def _as_list(files: Any) -> list[Any]:
    if files is None:
        return []
    if isinstance(files, (str, os.PathLike)):
        return [files]
    return list(files)
