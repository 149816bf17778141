"""``rewardzoo list``: the rewards, whether their code is installed and whether their weights are on this machine.

*installed*: the reward's extra (and the modules its card adds) can be imported, checked without importing.
*weights*: the files the reward loads with its default configuration are here, found as ``rewardzoo plan`` finds
them (:mod:`rewardzoo.core.memory_plan`: a local path, the Hugging Face cache, open_clip's and torch hub's caches),
without network: ``yes``; ``no`` (a file is missing: ``rewardzoo plan NAME`` names it); ``not needed`` (the card
downloads nothing); ``unknown`` (no default to look for: the reward needs a ``model_path``); ``-`` (the code is
not installed, so its files cannot be named).
"""

from __future__ import annotations

from typing import Any

from ..errors import RewardZooError

YES, NO, NOT_NEEDED, UNKNOWN, NOT_INSTALLED = "yes", "no", "not needed", "unknown", "-"
#: The families (``rewardzoo.rewards.<family>``; ``plugin``: a reward registered from elsewhere).
FAMILIES = ("image", "video", "vlm", "audio", "group", "text", "remote", "plugin")
#: What ``--downloaded`` keeps: everything here runs without a download.
READY = (YES, NOT_NEEDED)


def family(implementation: str) -> str:
    """The family of a reward: the package under ``rewardzoo.rewards`` (``plugin`` for a reward outside it)."""
    parts = implementation.split(":", 1)[0].split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["rewardzoo", "rewards"] else "plugin"


def weights_status(row: dict[str, Any]) -> str:
    """Whether the weights a listing row's reward loads by default are on this machine (module docstring)."""
    if not row["download"]:
        return NOT_NEEDED
    if not row["installed"]:
        return NOT_INSTALLED
    from ..core.memory_plan import collect
    from ..core.resolve import parse_spec

    try:
        models = collect([parse_spec({"name": row["name"]})])
    except (RewardZooError, ImportError, OSError):  # one reward's broken install does not stop the listing
        return UNKNOWN
    if any(m.weights is None and "no default known" in m.how for m in models):
        return UNKNOWN
    return YES if all(m.weights is not None for m in models) else NO


def listing(
    modality: str | None = None,
    kind: str | None = None,
    family_name: str | None = None,
    installed: bool = False,
    downloaded: bool = False,
    weights: bool = True,
) -> list[dict[str, Any]]:
    """The listing rows (:func:`rewardzoo.registry.row` with ``family``, and ``weights`` unless ``weights`` is
    false and ``downloaded`` too: finding the files imports each installed reward's class, seconds in all),
    filtered."""
    from ..registry import list_rewards

    rows = []
    for row in list_rewards(modality):
        row["family"] = family(row["implementation"])
        if (kind and row["kind"] != kind) or (family_name and row["family"] != family_name):
            continue
        if (installed or downloaded) and not row["installed"]:
            continue
        if weights or downloaded:
            row["weights"] = weights_status(row)
        if downloaded and row["weights"] not in READY:
            continue
        rows.append(row)
    return rows
