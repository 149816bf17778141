"""Import an object named by a Python path: ``pkg.mod:obj`` (or ``pkg.mod.obj``, ``pkg.mod:Outer.inner``)."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import RegistryError


def split_path(path: str) -> tuple[str, str]:
    """``(module, attribute path)`` of ``pkg.mod:obj`` or ``pkg.mod.obj``."""
    if ":" in path:
        module, _, attr = path.partition(":")
    else:
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise RegistryError(f"'{path}' is not a Python path 'pkg.mod:obj'")
    return module, attr


def import_path(path: str) -> Any:
    """The object at ``path``; RegistryError naming what is missing (the ImportError is the cause)."""
    module_name, attr = split_path(path)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise RegistryError(f"cannot import module '{module_name}' ({exc})") from exc
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise RegistryError(f"module '{module_name}' has no attribute '{attr}'")
    return obj
