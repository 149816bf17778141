"""Reference rewards: the reference packages' own code, run in their own environments, beside rewardzoo's.

:data:`REFERENCES` says, for each reward whose authors publish a package, which package it is, whether it runs
in an environment of its own (the requirements rewardzoo builds it from, and the wrapper class that calls the
package's API there), or why not. An entry ``{reward_model: image_reward, reference: true}`` is scored by the
wrapper in that environment (:func:`reference_entry`), and ``rewardzoo compare-reference NAME --input FILE``
scores the same samples both ways (:mod:`rewardzoo.jobs.compare_reference`).

The wrappers (one module per reference: :mod:`.image_reward`, :mod:`.hpsv2`) import their package when they
are built, so only the child environment needs it. A reward family layer: it may import the contract, the
shared helpers and the errors; this package module itself imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...errors import ConfigError, did_you_mean


@dataclass(frozen=True)
class Reference:
    """A reward's reference package: ``requirements`` of its environment (the parent's torch shared:
    ``system_site_packages``) and the ``wrapper`` (``module:Class``) calling its API there; a reference that
    does not run has no wrapper, and ``why`` says what clashes."""

    package: str
    why: str
    wrapper: str | None = None
    requirements: tuple[str, ...] = ()

    @property
    def runs(self) -> bool:
        return self.wrapper is not None

    def environment(self) -> dict[str, Any]:
        """The ``environment:`` of a config entry scored by this reference."""
        return {"requirements": list(self.requirements), "system_site_packages": True}


_HERE = "rewardzoo.rewards.references"

IMAGE_REWARD = Reference(
    "image-reward 1.5", wrapper=f"{_HERE}.image_reward:ReferenceImageReward",
    requirements=("transformers>=4.48,<4.50", "timm==0.6.13", "image-reward==1.5", "clip-anytorch", "fairscale"),
    why="pins timm==0.6.13 (rewardzoo's other rewards use timm 1.x); its BLIP code (med.py) imports helpers "
        "from transformers.modeling_utils that 4.56 dropped and 5 removed, while its ReFL imports diffusers, "
        "which needs transformers 4.48+ (4.48-4.49 is the range the tests build); `import ImageReward` "
        "imports OpenAI's `clip` (not on PyPI under that name: clip-anytorch provides it)")
HPSV2 = Reference(
    "hpsv2 1.2.0", wrapper=f"{_HERE}.hpsv2:ReferenceHPSv2", requirements=("hpsv2==1.2.0",),
    why="pins pytest==7.2.0 and protobuf<4 as run-time requirements and vendors its own copy of open_clip")
HPSV3 = Reference(
    "hpsv3 1.0.0",
    why="pins transformers==4.45.2 and pulls deepspeed, trl, peft and qwen-vl-utils, and installs top-level "
        "`evaluate` / `generate` packages that shadow others; its loader builds Qwen2-VL-7B by name (no tiny "
        "model to test a wrapper on), so no wrapper yet")
VBENCH = Reference(
    "vbench 0.1.5",
    why="pins transformers==4.33.2 (no wheel of its tokenizers for Python 3.11 builds without Rust), numpy<2 and "
        "timm<=1.0.12, needs decord and detectron2, and its dimensions download their own weights by name")
T2V_METRICS = Reference(
    "t2v-metrics 3.0",
    why="pins torch==2.5.1, numpy==1.26.4, transformers==4.49.0, Pillow==10.0.0 and apex==0.9.10dev (not on "
        "PyPI): does not resolve")
GENEVAL = Reference(
    "geneval (mmdet 2.x)",
    why="not a PyPI package; its detector needs mmcv-full 1.x / mmdet 2.x, which have no wheels for this "
        "torch and build only against torch<2")
PYIQA = Reference(
    "pyiqa 0.1.16",
    why="requires transformers>=5 (no clash there) but pulls bitsandbytes, tensorboard, facexlib, openai-clip "
        "and opencv-python-headless (a second cv2); its metrics download weights by name, so no wrapper yet")

#: Reward name -> its reference package (resolution checked with ``pip install --dry-run``, the two that run by
#: building their environments in the tests; see the README's "Reference rewards").
REFERENCES: dict[str, Reference] = {
    "image_reward": IMAGE_REWARD, "hpsv2": HPSV2, "hpsv3": HPSV3, "geneval": GENEVAL,
    "vqascore": T2V_METRICS, "video_vqascore": T2V_METRICS, "imaging_quality": PYIQA,
    **{name: VBENCH for name in ("video_subject_consistency", "video_background_consistency", "video_dynamic_degree",
                                 "video_temporal_flickering", "video_aesthetic", "video_imaging_quality")},
}


def reference_of(name: str, *, entry: str | None = None) -> Reference:
    """The reference of reward ``name``; ConfigError (naming the entry) when it has none or it does not run."""
    ref = REFERENCES.get(name)
    if ref is None:
        runnable = sorted(n for n, r in REFERENCES.items() if r.runs)
        raise ConfigError(f"reward '{name}' has no reference package{did_you_mean(name, REFERENCES)}; "
                          f"references that run: {', '.join(runnable)}", entry=entry, field="reference")
    if not ref.runs:
        raise ConfigError(f"the reference of '{name}' ({ref.package}) does not run here: {ref.why}", entry=entry,
                          field="reference")
    return ref


REFERENCE_KEYS = ("reward_model", "environment", "kwargs")


def reference_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A config entry with ``reference:`` as the entry that scores with the reference package.

    ``reference: true``: the reward's known wrapper (its ``reward_model`` becomes :attr:`Reference.wrapper`)
    in the reference's environment unless the entry names one; ``reference: {reward_model, environment,
    kwargs}`` overrides any of them (``environment: null``: in this process); ``reference: false``: the entry
    as it is. ConfigError names the entry and the field ``reference``.
    """
    name = entry.get("name")
    value = entry["reference"]
    out = {k: v for k, v in entry.items() if k != "reference"}
    if value is False:
        return out
    if value is not True and not isinstance(value, Mapping):
        raise ConfigError(f"must be true, false or a mapping with keys {', '.join(REFERENCE_KEYS)}, got {value!r}",
                          entry=name, field="reference")
    given = {} if value is True else dict(value)
    for key in given:
        if key not in REFERENCE_KEYS:
            raise ConfigError(f"unknown key '{key}'{did_you_mean(str(key), REFERENCE_KEYS)}; keys: "
                              f"{', '.join(REFERENCE_KEYS)}", entry=name, field="reference")
    if "reward_model" not in given or "environment" not in given and "environment" not in out:
        ref = reference_of(str(entry.get("reward_model") or name), entry=name)
        given.setdefault("reward_model", ref.wrapper)
        if "environment" not in out:
            given.setdefault("environment", ref.environment())
    out.update(given)
    return out
