"""The loader's check, before it builds a reward, that the reward's weights are here or can be fetched now.

The files an entry loads are what ``rewardzoo plan`` reads (:meth:`~rewardzoo.rewards.base.Reward.weight_files`).
When one that comes from the hub (or a URL) is not on this machine, the hub is asked once
(:func:`~rewardzoo.shared.hub.unreachable`: no request with ``HF_HUB_OFFLINE=1``, else one without retries); when
it cannot be reached the entry fails at once with one :class:`~rewardzoo.errors.MissingWeightsError` naming the
entry, the repository, the files and what to do (``rewardzoo fetch``, or ``model_path:`` to a local copy), instead
of the library's retries and its error. When the hub answers, the library downloads as before.

With a lock file (``REWARDZOO_LOCK``, written by ``rewardzoo fetch``), every hub file an entry loads must be the
one locked (same repository, file and SHA-256; :func:`check_locked`), so a run loads exactly the fetched weights.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import MissingWeightsError
from ..shared.checkpoints import Checkpoint
from ..shared.hub import unreachable
from ..spec.config import RewardSpec

#: The environment variable naming a lock file every run must load its hub weights from.
LOCK_ENV = "REWARDZOO_LOCK"


def check_weights(spec: RewardSpec, cls: Any, kwargs: Mapping[str, Any]) -> MissingWeightsError | None:
    """Raise :class:`MissingWeightsError` when (with ``REWARDZOO_LOCK``) a file ``spec``'s reward loads differs
    from the lock; return one (for the caller to raise once the reward's options are checked) when a hub file is
    absent and cannot be fetched now; None otherwise (a reward whose files the plan cannot name is left to its
    library)."""
    try:
        parts = list(cls.weight_files(spec.model_path, kwargs))
    except Exception:  # the reward's own construction reports a bad option or path
        return None
    lock = os.environ.get(LOCK_ENV)
    if lock:
        check_locked(spec, parts, lock)
    missing = [p for p in parts if p.missing and p.remote is not None]
    if not missing:
        return None
    remote = missing[0].remote
    assert remote is not None
    if remote.url is not None:
        reason = unreachable(url=remote.url)
    else:
        reason = unreachable(remote.repo, remote.files[0] if remote.files else None)
    return None if reason is None else missing_error(spec, missing, reason)


def missing_error(spec: RewardSpec, missing: Sequence[Checkpoint], reason: str) -> MissingWeightsError:
    """The one error for ``spec``'s ``missing`` parts when the hub cannot be reached (``reason``)."""
    where = []
    for part in missing:
        remote = part.remote
        assert remote is not None
        where.append(remote.describe())
    first = missing[0].remote
    assert first is not None
    repository = first.url or first.repo
    files = tuple(f for part in missing for f in (part.remote.files if part.remote else ()))
    message = (
        f"the weights of '{spec.reward_model}' are not on this machine and cannot be fetched now ({reason}): "
        f"missing {'; '.join(where)}, looked for in the Hugging Face cache {_hub_cache()}. "
        f"Fetch them where the hub can be reached: `rewardzoo fetch CONFIG` (this config, or "
        f"`rewardzoo fetch {spec.reward_model}`), into a cache folder this machine reads (HF_HOME / HF_HUB_CACHE); "
        "or set model_path: to a local folder holding them (see the 'Weights, caching and offline use' page)"
    )
    return MissingWeightsError(message, entry=spec.name, repository=repository, files=files)


def check_locked(spec: RewardSpec, parts: Sequence[Checkpoint], lock_path: str) -> None:
    """Every hub-cache or URL file of ``parts`` is in the lock file at ``lock_path`` with the bytes this machine
    would load (their SHA-256, computed once per file and process); else :class:`MissingWeightsError` naming the
    file and the lock. A file of the Hugging Face cache is known by its path (``models--ORG--NAME/snapshots/COMMIT/
    FILE``), also when ``model_path`` was set to a snapshot folder."""
    from ..shared.lockfile import read_lock

    lock = read_lock(lock_path)
    for part in parts:
        remote = part.remote
        if part.missing:
            if remote is not None:
                where = remote.url or remote.repo
                raise MissingWeightsError(
                    f"{part.missing}; the lock file {lock_path} ({LOCK_ENV}) asks for it: fetch it "
                    "(`rewardzoo fetch CONFIG --locked`)",
                    entry=spec.name,
                    repository=where,
                    files=tuple(f.file for f in lock.files_of(where or "")),
                )
            continue
        for path in part.files:
            found = hub_cache_file(path)
            if found is None and remote is not None and remote.url is not None:
                found = (remote.url, os.path.basename(os.fspath(path)))
            if found is None:
                continue  # a local file or a package's: not fetched, not locked
            repository, name = found
            entry = next((f for f in lock.files_of(repository) if f.file == name), None)
            if entry is None:
                raise MissingWeightsError(
                    f"'{name}' of '{repository}' ({path}) is not in the lock file {lock_path} ({LOCK_ENV}); run "
                    "`rewardzoo fetch` for this config again, or unset the variable",
                    entry=spec.name,
                    repository=repository,
                    files=(name,),
                )
            digest = _sha256(os.fspath(path))
            if digest != entry.sha256:
                raise MissingWeightsError(
                    f"'{name}' of '{repository}' ({path}) has SHA-256 {digest}, the lock file {lock_path} says "
                    f"{entry.sha256} (revision {entry.revision}): fetch the locked weights "
                    "(`rewardzoo fetch CONFIG --locked`)",
                    entry=spec.name,
                    repository=repository,
                    files=(name,),
                )


_HUB_FILE = re.compile(r"(?:^|/)models--(?P<repo>[^/]+)/snapshots/[0-9a-f]{40}/(?P<file>.+)$")
_DIGESTS: dict[tuple[str, int, int], str] = {}


def hub_cache_file(path: Any) -> tuple[str, str] | None:
    """(repository, file) of a path inside a Hugging Face cache snapshot, else None."""
    found = _HUB_FILE.search(os.fspath(path).replace(os.sep, "/"))
    if found is None:
        return None
    return found.group("repo").replace("--", "/"), found.group("file")


def _sha256(path: str) -> str:
    from ..shared.lockfile import sha256_file

    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = sha256_file(path)
    return _DIGESTS[key]


def with_revision(spec: RewardSpec, cls: Any) -> RewardSpec:
    """``spec`` loading the hub revision it pins (``revision:``; else, with ``REWARDZOO_LOCK``, the lock's commit of
    its repository): ``model_path`` set to that revision's snapshot folder in the Hugging Face cache (nothing is
    downloaded). Unchanged for an entry whose weights are not a hub repository (a local path, a library's name).
    :class:`MissingWeightsError` when the pinned revision is not in the cache."""
    lock_path = os.environ.get(LOCK_ENV)
    if spec.revision is None and not lock_path:
        return spec
    source = spec.model_path or getattr(cls, "default_model", None) or getattr(cls, "default_repo", None)
    if not isinstance(source, str) or not _hub_id(source):
        return spec
    revision = spec.revision
    if revision is None and lock_path:
        from ..shared.lockfile import read_lock

        revision = read_lock(lock_path).revision_of(source)
    if revision is None:
        return spec
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(source, revision=revision, local_files_only=True)
    except Exception:
        raise MissingWeightsError(
            f"revision {revision} of '{source}' is not in the Hugging Face cache {_hub_cache()}: fetch it with "
            f"`rewardzoo fetch CONFIG` (it fetches the revision an entry pins), or set model_path: to a local copy",
            entry=spec.name,
            repository=source,
        ) from None
    return replace(spec, model_path=str(folder))


def _hub_id(text: str) -> bool:
    return text.count("/") == 1 and not text.startswith((".", "/", "~")) and not os.path.exists(text)


def _hub_cache() -> str:
    try:
        from huggingface_hub import constants

        return str(constants.HF_HUB_CACHE)
    except ImportError:
        return "(huggingface_hub is not installed)"


def pinned(spec: RewardSpec, label: Any = None) -> RewardSpec:
    """:func:`with_revision` of ``spec`` when it pins a revision or ``REWARDZOO_LOCK`` is set (else ``spec``, with no
    registry look-up); a reward name the registry does not know is left for the loader to report."""
    if spec.revision is None and not os.environ.get(LOCK_ENV):
        return spec
    from ..registry import find

    try:
        cls = find(spec.reward_model).load_class()
    except Exception:
        return spec
    return with_revision(spec, cls)
