"""What each optional extra of rewardzoo requires, read from the package's own requirements (stated once, in
``pyproject.toml``), never restated here.

The requirements come from the ``pyproject.toml`` beside the package when it runs from a source checkout (that
file is what this code ships with; the metadata of an installation, an editable one of another checkout or one
made before the file changed, may say otherwise), else from the installed distribution's metadata
(``importlib.metadata.requires``). Nested extras (``rewardzoo[image]``) are expanded. A requirement that holds
only on some platforms (``decord``: x86 only) is not needed for an extra to count as installed.

Imports nothing beyond the standard library (``rewardzoo list`` reads it).
"""

from __future__ import annotations

import re
import sys
from functools import cache
from pathlib import Path

#: Import names of the distributions whose name does not say it (otherwise the name with ``_`` for ``-``).
IMPORT_NAMES = {
    "open-clip-torch": "open_clip",
    "opencv-python-headless": "cv2",
    "pyyaml": "yaml",
    "pillow": "PIL",
    "scikit-learn": "sklearn",
    "scikit-image": "skimage",
    "levenshtein": "Levenshtein",
    "imagebind-unofficial": "imagebind",
    "mkdocs-material": "material",
}

_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
_EXTRA_CLAUSE = re.compile(r"\(?\s*extra\s*==\s*['\"]([^'\"]+)['\"]\s*\)?")


def canonical(name: str) -> str:
    """A distribution or extra name as packaging compares them (``Open_Clip.torch`` -> ``open-clip-torch``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def import_name(distribution: str) -> str:
    """The top-level module a distribution installs (:data:`IMPORT_NAMES`, else its name with ``_``)."""
    name = canonical(distribution)
    return IMPORT_NAMES.get(name, name.replace("-", "_"))


def distribution_of(module: str) -> str:
    """The distribution (canonical name) that installs ``module``, the inverse of :func:`import_name`."""
    top = module.split(".")[0]
    return next((dist for dist, mod in IMPORT_NAMES.items() if mod == top), canonical(top))


def _lines() -> list[tuple[str, str, str | None]]:
    """(requirement, marker without its extra clause, extra or None for the core) for each requirement."""
    if _PYPROJECT.is_file() and sys.version_info >= (3, 11):  # a source checkout (tomllib: Python 3.11+)
        import tomllib

        project = tomllib.loads(_PYPROJECT.read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == "rewardzoo":
            groups = {None: project.get("dependencies", []), **project.get("optional-dependencies", {})}
            return [
                (spec, marker.strip(), extra)
                for extra, specs in groups.items()
                for spec, _, marker in (line.partition(";") for line in specs)
            ]
    from importlib.metadata import PackageNotFoundError, requires

    try:
        found = requires("rewardzoo") or []
    except PackageNotFoundError:
        found = []
    out = []
    for line in found:
        spec, _, marker = line.partition(";")
        extra = _EXTRA_CLAUSE.search(marker)
        rest = re.sub(r"^\s*and\s+|\s+and\s*$", "", _EXTRA_CLAUSE.sub("", marker)).strip()
        out.append((spec, rest, extra.group(1) if extra else None))
    return out


@cache
def _closure() -> dict[str | None, dict[str, bool]]:
    """extra -> {distribution: needed on every platform}, in the order declared, nested extras expanded where
    they are named (None: the core)."""
    items: dict[str | None, list[tuple[str, str, bool]]] = {}  # ("dist" | "extra", name, on every platform)
    for spec, marker, extra in _lines():
        match = re.match(r"\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?", spec)
        if match is None:
            raise ValueError(f"rewardzoo's requirement {spec!r} does not start with a distribution name")
        listed = items.setdefault(canonical(extra) if extra else None, [])
        if canonical(match.group(1)) == "rewardzoo":
            listed += [("extra", canonical(e), True) for e in (match.group(2) or "").split(",") if e.strip()]
        else:
            listed.append(("dist", canonical(match.group(1)), not marker))

    def expand(extra: str | None, seen: frozenset) -> dict[str, bool]:
        out: dict[str, bool] = {}
        for what, name, always in items.get(extra, []):
            found = {name: always} if what == "dist" else {} if name in seen else expand(name, seen | {name})
            for dist, everywhere in found.items():
                out[dist] = out.get(dist, False) or everywhere
        return out

    return {extra: expand(extra, frozenset({extra})) for extra in items}


def requirements() -> dict[str | None, set[str]]:
    """extra -> the distributions (canonical names) it requires, the core's included; None: the core alone."""
    found = _closure()
    core = set(found.get(None, {}))
    return {extra: set(deps) | core for extra, deps in found.items()}


@cache
def extra_modules() -> dict[str, tuple[str, ...]]:
    """extra -> the modules that must import for it to count as installed: its requirements on every platform
    beyond the core, as import names (a reward's own ``add_ons`` are in its card); extras in the order
    pyproject.toml declares."""
    found = _closure()
    core = set(found.get(None, {}))
    return {
        extra: tuple(import_name(d) for d, always in deps.items() if always and d not in core)
        for extra, deps in found.items()
        if extra is not None
    }


__all__ = ["IMPORT_NAMES", "canonical", "distribution_of", "extra_modules", "import_name", "requirements"]
