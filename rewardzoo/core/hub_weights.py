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
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import MissingWeightsError
from ..shared.checkpoints import Checkpoint
from ..shared.hub import unreachable
from ..spec.config import RewardSpec

#: The environment variable naming a lock file every run must load its hub weights from.
LOCK_ENV = "REWARDZOO_LOCK"


def check_weights(spec: RewardSpec, cls: Any, kwargs: Mapping[str, Any]) -> None:
    """Raise :class:`MissingWeightsError` when a hub file ``spec``'s reward loads is absent and cannot be fetched
    now, or (with ``REWARDZOO_LOCK``) differs from the lock; nothing otherwise (a reward whose files the plan cannot
    name is left to its library)."""
    try:
        parts = list(cls.weight_files(spec.model_path, kwargs))
    except Exception:  # the reward's own construction reports a bad option or path
        return
    lock = os.environ.get(LOCK_ENV)
    if lock:
        check_locked(spec, parts, lock)
    missing = [p for p in parts if p.missing and p.remote is not None]
    if not missing:
        return
    remote = missing[0].remote
    assert remote is not None
    if remote.url is not None:
        reason = unreachable(url=remote.url)
    else:
        reason = unreachable(remote.repo, remote.files[0] if remote.files else None)
    if reason is None:
        return
    raise missing_error(spec, missing, reason)


def missing_error(spec: RewardSpec, missing: Sequence[Checkpoint], reason: str) -> MissingWeightsError:
    """The one error for ``spec``'s ``missing`` parts when the hub cannot be reached (``reason``)."""
    where = []
    for part in missing:
        remote = part.remote
        assert remote is not None
        if remote.url is not None:
            where.append(f"{remote.url} (into {remote.target})")
        elif remote.files:
            where.append(f"'{remote.repo}': {' or '.join(remote.files)}")
        else:
            where.append(f"'{remote.repo}': its model files")
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
    """Every hub or URL file of ``parts`` is in the lock file at ``lock_path``, and the file this machine would
    load has the locked SHA-256; else :class:`MissingWeightsError` naming the file and the lock."""
    from ..shared.lockfile import read_lock, sha256_file

    lock = read_lock(lock_path)
    for part in parts:
        remote = part.remote
        if remote is None:
            continue
        repository = remote.url or remote.repo or ""
        locked = lock.files_of(repository)
        if not locked:
            raise MissingWeightsError(
                f"'{repository}' is not in the lock file {lock_path} ({LOCK_ENV}); run `rewardzoo fetch` for this "
                "config again, or unset the variable",
                entry=spec.name,
                repository=repository,
            )
        if part.missing:
            raise MissingWeightsError(
                f"{part.missing}; the lock file {lock_path} names it: fetch it (`rewardzoo fetch CONFIG --locked`)",
                entry=spec.name,
                repository=repository,
                files=tuple(f.file for f in locked),
            )
        for path in part.files:
            entry = next((f for f in locked if _same_file(path, f.file, remote.url)), None)
            if entry is None:
                raise MissingWeightsError(
                    f"'{path}' of '{repository}' is not in the lock file {lock_path}",
                    entry=spec.name,
                    repository=repository,
                )
            digest = sha256_file(path)
            if digest != entry.sha256:
                raise MissingWeightsError(
                    f"'{path}' (of '{repository}') has SHA-256 {digest}, the lock file {lock_path} says "
                    f"{entry.sha256} (revision {entry.revision}): fetch the locked weights "
                    "(`rewardzoo fetch CONFIG --locked`)",
                    entry=spec.name,
                    repository=repository,
                    files=(entry.file,),
                )


def _same_file(path: Any, name: str, url: str | None) -> bool:
    text = os.fspath(path)
    if url is not None:
        return os.path.basename(text) == os.path.basename(name)
    return text.replace(os.sep, "/").endswith("/" + name)


def _hub_cache() -> str:
    try:
        from huggingface_hub import constants

        return str(constants.HF_HUB_CACHE)
    except ImportError:
        return "(huggingface_hub is not installed)"
