"""Import an object named by a Python path (``pkg.mod:obj``, ``pkg.mod.obj``, ``pkg.mod:Outer.inner``), and
the lazy attributes of the light packages (:func:`lazy_getattr`)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
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


def lazy_getattr(package: str, exports: Mapping[str, str], submodules: tuple[str, ...] = ()) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``: ``exports`` maps a public name to the module that
    defines it, ``submodules`` names subpackages reachable as attributes. Each is imported on first access
    and cached on the package, so importing the package itself stays light."""

    def __getattr__(name: str) -> Any:
        if name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        elif name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
        else:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
