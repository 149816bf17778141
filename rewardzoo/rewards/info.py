"""A reward's record: what its model card states (kept free of heavy imports: the registry lists it)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

#: The media a reward scores (a card's ``modality``); ``any`` for rewards of every medium (a composite over a
#: base reward, a served one). Whether a reward scores samples alone or in groups is its ``kind``, not this.
MODALITIES = ("image", "video", "audio", "text", "any")
#: What an instance is: scores each sample alone, or needs whole groups (``rewardzoo.rewards.base``).
KINDS = ("pointwise", "groupwise")
#: The kind a class (and its card) declares when each instance is one of :data:`KINDS` by what it is built on
#: (``remote``: the rewards it is served); the instance decides it in ``__init__`` (``Reward.decide_kind``).
PER_INSTANCE = "per-instance"


@dataclass(frozen=True)
class RewardInfo:
    """One reward's record. ``download``: its weights are not shipped with a package and must be
    fetched (from a hub or a local path). ``devices``: the kinds of device it can use (``cpu``, ``cuda``,
    ``mps``; None: any torch device). ``default_dtype``: the dtype ``dtype: auto`` (the config default)
    picks per device kind, the reference's precision there (``{"cuda": "bfloat16"}``; kinds not listed
    run float32); ``default_dtype_when``: ``{option: {value: such a mapping}}``, what an entry selecting that value
    runs in instead (a family whose variants come from different references); ``dtype_source``: where the reference sets that precision (repo@commit file lines: what it
    does; every shipped card that loads weights states it). ``differentiable``: it has a differentiable path (``score_pixels``,
    used by :func:`rewardzoo.differentiable`). ``add_ons``: modules it needs beside its extra, installed with
    ``pip install --no-deps`` as its card says (their own requirements clash with the extra's). ``card``: the model card file (None for rewards without one);
    ``source``: ``"rewardzoo"``, ``"plugin <distribution>"``, ``"user"`` or ``"python path"``.

    Facts the config lint reads (:mod:`rewardzoo.cli.lint`; None: the card does not say): ``typical_range``, where
    most scores of real outputs fall at the card's default settings (its card says where the figures come
    from); ``prompt_conditioned``, the score depends on the sample's prompt (or on what the prompt asks for, in
    its metadata); ``near_constant_in_group``, samples generated for one prompt almost always get the same
    score, so a group-relative wrapper over it turns noise into advantages; ``prefers_still_video``, a still
    video scores at least as well as a moving one (VBench's temporal-quality dimensions); ``prompt_blind_when``,
    ``{option: [values]}``: settings under which the reward compares two streams the policy generates (audio and
    video) and never reads the prompt, so training on it can collapse both together.

    Facts the memory plan reads (:mod:`rewardzoo.core.memory_plan`): ``model_free``, the reward loads no weights
    (0 bytes; ``offload`` does nothing); ``activation_per_sample``, bytes of device memory one sample adds during a
    call beyond the weights, at the card's defaults (None: unknown)."""

    name: str
    implementation: str
    summary: str
    modality: str
    kind: str
    extra: str | None
    higher_is_better: bool
    score_range: tuple[float, float]
    download: bool
    devices: tuple[str, ...] | None = None
    license: str | None = None
    reference: Mapping[str, Any] | None = None
    card: Path | None = None
    source: str = "rewardzoo"
    differentiable: bool = False
    default_dtype: Mapping[str, str] | None = None
    default_dtype_when: Mapping[str, Mapping[Any, Mapping[str, str]]] | None = None
    dtype_source: str | None = None
    add_ons: tuple[str, ...] = ()
    typical_range: tuple[float, float] | None = None
    prompt_conditioned: bool | None = None
    near_constant_in_group: bool = False
    prefers_still_video: bool = False
    prompt_blind_when: Mapping[str, tuple[Any, ...]] | None = None
    model_free: bool = False
    activation_per_sample: int | None = None

    def dtype_on(self, device: str, options: Mapping[str, Any] | None = None) -> str:
        """The dtype ``dtype: auto`` means on ``device`` (a resolved device string such as ``cuda:0``) for an entry
        with ``options`` (its kwargs): a ``default_dtype_when`` row its options select, else ``default_dtype``."""
        table = self.default_dtype or {}
        for option, per_value in (self.default_dtype_when or {}).items():
            chosen = (options or {}).get(option)
            if isinstance(chosen, str | int | float | bool) and chosen in per_value:
                table = per_value[chosen]
                break
        return table.get(device.split(":")[0], "float32")

    @classmethod
    def of_class(cls, reward_cls: type, name: str | None = None, *, source: str = "python path") -> RewardInfo:
        """The record of a class that has no model card: its optional ``higher_is_better``,
        ``score_range`` and ``modality`` attributes, else the defaults (higher is better, any score)."""
        return cls(
            name=(name or reward_cls.__name__).lower(),
            implementation=f"{reward_cls.__module__}:{reward_cls.__qualname__}",
            summary=((reward_cls.__doc__ or "").strip().splitlines() or [""])[0],
            modality=getattr(reward_cls, "modality", "any"),
            kind=getattr(reward_cls, "kind", "") or "pointwise",
            extra=None,
            higher_is_better=bool(getattr(reward_cls, "higher_is_better", True)),
            score_range=cast(
                "tuple[float, float]",
                tuple(float(b) for b in getattr(reward_cls, "score_range", (-math.inf, math.inf))),
            ),
            download=False,
            source=source,
        )

    #: Facts an instance may learn at construction and carry over its card's (:meth:`refined`).
    INSTANCE_FACTS = ("kind", "modality", "higher_is_better", "score_range", "summary")

    def refined(self, facts: Mapping[str, Any]) -> RewardInfo:
        """This record with facts one instance learned when it was built (a ``remote`` reward's kind,
        direction and score range come from the server it calls); the card stays the record of the reward
        itself. Only :data:`INSTANCE_FACTS` may change; ValueError for anything else or a bad value."""
        unknown = sorted(set(facts) - set(self.INSTANCE_FACTS))
        if unknown:
            raise ValueError(
                f"an instance cannot change {unknown} of its record; it may refine {', '.join(self.INSTANCE_FACTS)}"
            )
        facts = dict(facts)
        if "score_range" in facts:
            lo, hi = (float(b) for b in facts["score_range"])
            if not lo < hi:
                raise ValueError(f"score_range must have low < high, got {facts['score_range']!r}")
            facts["score_range"] = (lo, hi)
        if "kind" in facts and facts["kind"] not in KINDS:
            raise ValueError(f"kind must be pointwise or groupwise, got {facts['kind']!r}")
        if "higher_is_better" in facts and not isinstance(facts["higher_is_better"], bool):
            raise ValueError(f"higher_is_better must be a bool, got {facts['higher_is_better']!r}")
        return replace(self, **facts)
