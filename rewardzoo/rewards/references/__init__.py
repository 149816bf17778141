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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
    "image-reward 1.5",
    wrapper=f"{_HERE}.image_reward:ReferenceImageReward",
    requirements=("transformers>=4.48,<4.50", "timm==0.6.13", "image-reward==1.5", "clip-anytorch", "fairscale"),
    why="pins timm==0.6.13 (rewardzoo's other rewards use timm 1.x); its BLIP code (med.py) imports helpers "
    "from transformers.modeling_utils that 4.56 dropped and 5 removed, while its ReFL imports diffusers, "
    "which needs transformers 4.48+ (4.48-4.49 is the range the tests build); `import ImageReward` "
    "imports OpenAI's `clip` (not on PyPI under that name: clip-anytorch provides it)",
)
HPSV2 = Reference(
    "hpsv2 1.2.0",
    wrapper=f"{_HERE}.hpsv2:ReferenceHPSv2",
    requirements=("hpsv2==1.2.0",),
    why="pins pytest==7.2.0 and protobuf<4 as run-time requirements and vendors its own copy of open_clip",
)
HPSV3 = Reference(
    "hpsv3 1.0.0",
    why="resolves only with transformers==4.45.2 (with deepspeed 0.19, trl 0.12, peft 0.21 and qwen-vl-utils, "
    "pip install --dry-run), and installs top-level `evaluate` / `generate` packages that shadow others; no "
    "wrapper yet: its inferencer builds the Qwen2-VL-7B its YAML config names and downloads MizzenAI/HPSv3, "
    "so a tiny test model needs a config of its own",
)
VBENCH = Reference(
    "vbench 0.1.5",
    why="resolves alone with transformers==4.33.2, numpy 1.26, timm 1.0.12, pyiqa 0.1.10 and decord (pip install "
    "--dry-run), all older than rewardzoo's; no wrapper yet: its VBench.evaluate scores folders of videos per "
    "dimension with weights it downloads by name",
)
T2V_METRICS = Reference(
    "t2v-metrics 3.0",
    why="does not resolve: it pins apex==0.9.10dev (PyPI holds only an unrelated apex 0.9.8dev), besides "
    "torch==2.5.1, numpy==1.26.4, transformers==4.49.0 and Pillow==10.0.0",
)
GENEVAL = Reference(
    "geneval (mmdet 2.x)",
    why="geneval is not on PyPI, and the mmcv-full 1.x its mmdet 2.x detector needs is only an sdist there, whose "
    "setup.py does not even prepare its metadata with a current setuptools (it imports pkg_resources)",
)
PYIQA = Reference(
    "pyiqa 0.1.16",
    why="resolves beside transformers 5 (no version clash: imaging_quality already runs pyiqa's own MUSIQ "
    "architecture in process, installed --no-deps), but as a dependency it pulls bitsandbytes, tensorboard, "
    "facexlib, openai-clip, opencv-python and opencv-python-headless (two cv2) and pytest, ruff and "
    "pre-commit; no wrapper yet",
)

#: Reward name -> its reference package (resolution checked with ``pip install --dry-run --ignore-installed`` on
#: Python 3.11; the two that run by building their environments in the tests; see docs/guides/references.md, "Reference
#: rewards").
REFERENCES: dict[str, Reference] = {
    "image_reward": IMAGE_REWARD,
    "hpsv2": HPSV2,
    "hpsv3": HPSV3,
    "geneval": GENEVAL,
    "vqascore": T2V_METRICS,
    "video_vqascore": T2V_METRICS,
    "imaging_quality": PYIQA,
    **{
        name: VBENCH
        for name in (
            "video_subject_consistency",
            "video_background_consistency",
            "video_dynamic_degree",
            "video_temporal_flickering",
            "video_aesthetic",
            "video_imaging_quality",
        )
    },
}


def reference_of(name: str, *, entry: str | None = None) -> Reference:
    """The reference of reward ``name``; ConfigError (naming the entry) when it has none or no wrapper."""
    ref = REFERENCES.get(name)
    if ref is None:
        runnable = sorted(n for n, r in REFERENCES.items() if r.runs)
        raise ConfigError(
            f"reward '{name}' has no reference package{did_you_mean(name, REFERENCES)}; "
            f"references that run: {', '.join(runnable)}",
            entry=entry,
            field="reference",
        )
    if not ref.runs:
        raise ConfigError(
            f"the reference of '{name}' ({ref.package}) has no wrapper here: {ref.why}", entry=entry, field="reference"
        )
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
        raise ConfigError(
            f"must be true, false or a mapping with keys {', '.join(REFERENCE_KEYS)}, got {value!r}",
            entry=name,
            field="reference",
        )
    given = {} if value is True else dict(value)
    for key in given:
        if key not in REFERENCE_KEYS:
            raise ConfigError(
                f"unknown key '{key}'{did_you_mean(str(key), REFERENCE_KEYS)}; keys: {', '.join(REFERENCE_KEYS)}",
                entry=name,
                field="reference",
            )
    if "reward_model" not in given or ("environment" not in given and "environment" not in out):
        ref = reference_of(str(entry.get("reward_model") or name), entry=name)
        given.setdefault("reward_model", ref.wrapper)
        if "environment" not in out:
            given.setdefault("environment", ref.environment())
    out.update(given)
    return out
