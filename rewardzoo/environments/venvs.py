"""The interpreter of an ``environment:``: an existing one, checked, or a venv built once and reused.

A built environment lives in ``<cache>/<key>/`` where ``<cache>`` is ``$REWARDZOO_ENVS`` (else
``$XDG_CACHE_HOME/rewardzoo/envs``, else ``~/.cache/rewardzoo/envs``) and ``<key>`` hashes the sorted
requirements, ``system_site_packages``, the Python version and rewardzoo's version (and, with
``system_site_packages``, the parent environment it sees). It is built with ``uv`` when ``uv`` is on the PATH
and the environment does not see the parent's packages, else with the parent's ``pip --python``; the build is
bounded (``$REWARDZOO_ENV_BUILD_TIMEOUT_S``, default 1800 s), serialised by a lock file (ranks starting together
build it once), and marked complete by ``environment.json`` only once everything is installed.

``system_site_packages: true`` makes the *parent's* packages (torch, ...) visible after the child's own: the venv
gets a ``.pth`` naming the parent's site-packages, so what the requirements install shadows the parent's copy
(``transformers<5`` in the child over the parent's 5.x) and pip installs only what is missing. rewardzoo itself
is put on the worker's path when it starts (:mod:`rewardzoo.environments.workers`), so the worker runs the
parent's rewardzoo code; its own light dependencies (numpy, pillow, pyyaml, msgpack) are installed in the venv.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .. import __version__
from ..errors import ConfigError
from ..spec.config import EnvironmentSpec

#: What every worker needs besides its reward's own requirements (rewardzoo's core dependencies and msgpack).
WORKER_REQUIREMENTS = ("numpy>=1.24", "pillow>=9.5", "pyyaml>=6.0", "msgpack>=1.0")
MARKER = "environment.json"
_PARENT_PTH = "_rewardzoo_parent.pth"
TAIL_LINES = 20


def cache_root() -> Path:
    """Where built environments live (see the module docstring)."""
    given = os.environ.get("REWARDZOO_ENVS")
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rewardzoo" / "envs"


def environment_key(env: EnvironmentSpec) -> str:
    """The cache key of a built environment (its folder's name)."""
    facts = {
        "requirements": sorted(env.requirements),
        "system_site_packages": env.system_site_packages,
        "python": ".".join(map(str, sys.version_info[:3])),
        "implementation": sys.implementation.cache_tag,
        "rewardzoo": __version__,
        "parent": sys.prefix if env.system_site_packages else None,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def environment_dir(env: EnvironmentSpec) -> Path:
    return cache_root() / environment_key(env)


def venv_python(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def interpreter(env: EnvironmentSpec, *, build: bool = True, log: Callable[[str], None] | None = None) -> str:
    """The interpreter a worker of ``env`` runs: ``python`` checked (exists, runs, is Python 3), or the built
    venv's (built now when missing and ``build``). ConfigError naming the environment otherwise; a failed build's
    error holds pip's last lines."""
    if env.python is not None:
        return check_interpreter(env.python, env)
    folder = environment_dir(env)
    if (folder / MARKER).is_file() and venv_python(folder).exists():
        return str(venv_python(folder))
    if not build:
        raise ConfigError(f"{env.describe()} is not built yet; run `rewardzoo env build CONFIG`", field="environment")
    with _lock(folder.with_suffix(".lock")):
        if not ((folder / MARKER).is_file() and venv_python(folder).exists()):  # another process may have built it
            _build(env, folder, log or _say)
    return str(venv_python(folder))


def check_interpreter(path: str, env: EnvironmentSpec) -> str:
    """``path`` if it is a Python 3 interpreter that runs; ConfigError naming the environment otherwise."""
    where = Path(path).expanduser()
    if not where.exists():
        raise ConfigError(f"{env.describe()}: the interpreter {path} does not exist", field="environment")
    if where.is_dir() or not os.access(where, os.X_OK):
        raise ConfigError(f"{env.describe()}: {path} is not an executable file", field="environment")
    try:
        done = subprocess.run(
            [str(where), "-c", "import sys; print(sys.version_info[0])"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(
            f"{env.describe()}: {path} is not a Python interpreter ({exc})", field="environment"
        ) from None
    if done.returncode != 0 or done.stdout.strip() != "3":
        raise ConfigError(
            f"{env.describe()}: {path} is not a Python 3 interpreter (it answered "
            f"{(done.stdout + done.stderr).strip()[-300:]!r})",
            field="environment",
        )
    return str(where)


def _say(message: str) -> None:
    print(f"rewardzoo: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no lock (one build at a time is the caller's business there)
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_timeout_s() -> float:
    return float(os.environ.get("REWARDZOO_ENV_BUILD_TIMEOUT_S", "1800"))


def _build(env: EnvironmentSpec, folder: Path, log: Callable[[str], None]) -> None:
    shutil.rmtree(folder, ignore_errors=True)  # a build that stopped half way
    folder.parent.mkdir(parents=True, exist_ok=True)
    uv = shutil.which("uv") if not env.system_site_packages else None
    log(f"building the {env.describe()} in {folder} with {'uv' if uv else 'pip'} (once; later runs reuse it)")
    start = time.monotonic()
    deadline = start + build_timeout_s()
    python = venv_python(folder)
    steps = (
        [
            [uv, "venv", "--python", sys.executable, str(folder)],
            [uv, "pip", "install", "--python", str(python), *env.requirements, *WORKER_REQUIREMENTS],
        ]
        if uv
        else [
            [
                sys.executable,
                "-m",
                "venv",
                "--without-pip",
                *(["--system-site-packages"] if env.system_site_packages else []),
                str(folder),
            ],
            None,  # the parent's packages, before pip looks at what is installed
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(python),
                "install",
                "--no-input",
                "--disable-pip-version-check",
                *env.requirements,
                *WORKER_REQUIREMENTS,
            ],
        ]
    )
    for step in steps:
        if step is None:
            if env.system_site_packages:
                _link_parent(folder)
            continue
        _run(step, env, folder, deadline)
    marker = {
        "key": folder.name,
        "requirements": list(env.requirements),
        "system_site_packages": env.system_site_packages,
        "python": ".".join(map(str, sys.version_info[:3])),
        "rewardzoo": __version__,
        "built_with": "uv" if uv else "pip",
        "parent": sys.prefix,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_s": round(time.monotonic() - start, 1),
    }
    (folder / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    log(f"built the environment in {time.monotonic() - start:.0f} s: {folder}")


def _link_parent(folder: Path) -> None:
    """A .pth naming the parent's site-packages in the venv's own (they come after the venv's packages)."""
    done = subprocess.run(
        [str(venv_python(folder)), "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=True,
    )
    own = Path(done.stdout.strip())
    parents = [p for p in site.getsitepackages() if Path(p).is_dir() and Path(p) != own]
    (own / _PARENT_PTH).write_text("".join(f"{p}\n" for p in parents), encoding="utf-8")


def _run(command: list[str], env: EnvironmentSpec, folder: Path, deadline: float) -> None:
    log_path = folder.parent / f"{folder.name}.log"
    with open(log_path, "ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=max(1.0, deadline - time.monotonic()),
            )
            failed = done.returncode != 0 and f"exit status {done.returncode}"
        except subprocess.TimeoutExpired:
            failed = f"not finished within {build_timeout_s():g} s (REWARDZOO_ENV_BUILD_TIMEOUT_S)"
        except OSError as exc:
            failed = str(exc)
    if failed:
        shutil.rmtree(folder, ignore_errors=True)
        raise ConfigError(
            f"building the {env.describe()} failed ({failed}); the build's last lines "
            f"(all of it in {log_path}):\n{tail(log_path)}",
            field="environment",
        )


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file ('' when it does not exist)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def list_environments() -> list[dict]:
    """The built environments' records (``environment.json`` plus ``path`` and ``size_mb``), newest first."""
    root = cache_root()
    found = []
    for marker in root.glob(f"*/{MARKER}") if root.is_dir() else ():
        try:
            record = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        size = sum(f.stat().st_size for f in marker.parent.rglob("*") if f.is_file() and not f.is_symlink())
        found.append({**record, "path": str(marker.parent), "size_mb": round(size / 2**20, 1)})
    return sorted(found, key=lambda r: r.get("created", ""), reverse=True)


def remove_environment(key: str) -> Path:
    """Delete the built environment ``key`` (its folder name, or a unique prefix); its path. ConfigError when no
    or several environments match."""
    root = cache_root()
    matches = [p for p in root.glob(f"{key}*") if p.is_dir()] if key and root.is_dir() else []
    if len(matches) != 1:
        known = ", ".join(sorted(p.name for p in root.glob("*") if p.is_dir())) if root.is_dir() else ""
        raise ConfigError(
            f"{'no' if not matches else 'more than one'} built environment matches '{key}' in {root}"
            f"{'; built: ' + known if known else ''}"
        )
    with _lock(matches[0].with_suffix(".lock")):
        shutil.rmtree(matches[0])
    for extra in (matches[0].with_suffix(".lock"), matches[0].parent / f"{matches[0].name}.log"):
        extra.unlink(missing_ok=True)
    return matches[0]
