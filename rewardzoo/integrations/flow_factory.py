"""Flow-Factory reward models backed by rewardzoo rewards: :class:`RewardZooPointwise`, :class:`RewardZooGroupwise`.

Flow-Factory resolves a ``reward_model:`` that is not in its registry as a Python path ``pkg.mod.Class``
and builds ``Class(config=RewardArguments, accelerator=Accelerator)``; these two classes are built that
way. ``rewardzoo:`` names the reward (a rewardzoo registry name or a Python path). Every other key
Flow-Factory does not know (its ``extra_kwargs``) is one of the reward's options, except ``model_path``,
``limits`` and ``offload`` (the rewardzoo entry fields: with ``offload: cpu|drop`` the weights leave the device
after each call Flow-Factory makes, see docs/residency.md); options named like a Flow-Factory field (``name``,
``batch_size``, ...) go in a ``kwargs:`` mapping instead::

    rewards:
      - name: jpeg
        reward_model: rewardzoo.integrations.flow_factory.RewardZooPointwise
        rewardzoo: jpeg_incompressibility
        quality: 95                 # the reward's options (or kwargs: {quality: 95})
        batch_size: 16
        device: cpu
        dtype: float32
      - name: jpeg_rank
        reward_model: rewardzoo.integrations.flow_factory.RewardZooGroupwise
        rewardzoo: group_rank
        base: jpeg_incompressibility
        device: cpu

Latents: an entry's ``decode: {vae: ..., ...}`` (rewardzoo's decode stage, :mod:`rewardzoo.core.decode`) decodes
the ``latent`` a Flow-Factory sample carries in its ``extra_kwargs`` (``T2ISample.from_dict({..., "latent": z})``)
for a pixel reward, once per batch for all the entries (Flow-Factory calls them one by one; a latent tensor seen
before, unchanged, keeps its pixels); a latent reward reads the latent itself.

A rewardzoo reward class named in ``reward_model:`` itself (``rewardzoo.rewards.image.jpeg.JpegCompressibility``)
is refused with a :class:`~rewardzoo.errors.ConfigError` that shows the adapter entry to write instead
(:func:`bare_reward_refusal`, which :mod:`rewardzoo.integrations` registers for Flow-Factory's construction call).

Flow-Factory's ``device`` and ``dtype`` (torch objects) become the spec's device string and dtype name;
its default ``cuda`` means this rank's device (``accelerator.device``), or the CPU for a reward whose
model card says it runs on the CPU only. ``batch_size`` is the spec's. ``weight``, ``async_reward`` and
``num_workers`` stay with Flow-Factory, which weighs, batches and threads the calls.

A call goes through a one-spec :class:`~rewardzoo.core.processor.RewardProcessor`, so media are converted, inputs
checked and scores validated as everywhere in rewardzoo, and errors are rewardzoo's. Media arrive as
Flow-Factory's tensors (``use_tensor_inputs = True``), converted once, by rewardzoo, to what the reward
declares. Scores return as ``RewardModelOutput.rewards`` (float32) with the reward's extras (e.g. ``jpeg_kb``)
in ``extra_info`` (for direct calls: Flow-Factory's own processor keeps only the rewards). All adapters of a
process share one :class:`~rewardzoo.core.loader.RewardLoader`, so each model is built once (a ``group_rank``
over ``pickscore`` and a ``pickscore`` entry share PickScore).

A :class:`~rewardzoo.monitor.RewardMonitor` is fed from what Flow-Factory's ``RewardProcessor.compute_rewards``
(or ``RewardBuffer.finalize``) returns: ``monitor_step(monitor, rewards, samples, step, weights=...)`` turns
the ``{name: tensor}`` of a step and its samples (grouped by Flow-Factory's ``unique_id``) into one
RewardResult and returns the monitor's metrics, for ``trainer.log_data(metrics, step=...)``.

Importing this module imports Flow-Factory; ``import rewardzoo`` does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from flow_factory.rewards import BaseRewardModel, GroupwiseRewardModel, PointwiseRewardModel, RewardModelOutput

from ..core.engine import RewardResult
from ..core.loader import RewardLoader
from ..core.processor import RewardProcessor
from ..core.resolve import parse_spec
from ..errors import ConfigError, InputError, RegistryError
from ..registry import lookup, resolve
from ..rewards.base import Reward, is_text_extra
from ..rewards.info import KINDS, PER_INSTANCE
from ..spec.config import RewardSpec
from ..spec.sample import Sample, samples_of

if TYPE_CHECKING:
    from accelerate import Accelerator
    from flow_factory.hparams import RewardArguments

__all__ = ["RewardZooGroupwise", "RewardZooPointwise", "monitor_step"]

#: Sample fields Flow-Factory passes to a reward call (``audio`` brings ``audio_sample_rate``; ``latent``: a sample's
#: ``extra_kwargs["latent"]``, which a model adapter stores for latent rewards and the entry's ``decode:`` stage).
FF_FIELDS = ("prompt", "image", "video", "audio", "condition_images", "condition_videos", "latent")
#: Extra keys of a Flow-Factory entry that are not options of the reward.
OWN_KEYS = ("rewardzoo", "model_path", "limits", "kwargs", "offload", "decode")
_NESTED = ("condition_images", "condition_videos")

_LOADER = RewardLoader()


def bare_reward_refusal(cls: type, kwargs: Mapping[str, Any]) -> ConfigError | None:
    """The error for Flow-Factory's own construction of a rewardzoo reward class (``Class(config=RewardArguments,
    accelerator=...)``, its dotted-path fallback for a ``reward_model:`` naming the class itself): the adapter
    entry to write. None for another call with those keywords (a reward whose options have these names).
    Registered in :mod:`rewardzoo.integrations` (:mod:`rewardzoo.shared.foreign`)."""
    config = kwargs.get("config")
    if not (isinstance(cls, type) and issubclass(cls, Reward) and hasattr(config, "extra_kwargs")):
        return None
    kind = getattr(cls, "kind", "")
    either = "  # RewardZooGroupwise when it is built groupwise" if kind == PER_INSTANCE else ""
    adapter = f"{__name__}.RewardZoo" + ("Groupwise" if kind == "groupwise" else "Pointwise")
    name = getattr(config, "name", None)
    return ConfigError(
        f"{cls.__qualname__} is a rewardzoo reward, which Flow-Factory builds through rewardzoo's adapter, not "
        f"directly; write the entry as\n  - name: {name or 'NAME'}\n"
        f"    reward_model: {adapter}{either}\n    rewardzoo: {cls.__module__}:{cls.__qualname__}\n"
        "keeping its other keys (the reward's options, batch_size, device, dtype); `rewardzoo:` also takes the "
        "reward's registry name (`rewardzoo list` shows them)",
        entry=name,
        field="reward_model",
    )


def _target(config: RewardArguments, kind: str) -> str:
    """The reward the entry names under ``rewardzoo:``, checked to be a rewardzoo reward of ``kind``."""
    target = config.extra_kwargs.get("rewardzoo")
    if not isinstance(target, str) or not target.strip():
        raise ConfigError(
            "name the rewardzoo reward with `rewardzoo: NAME` (a registry name or a Python path)",
            entry=config.name,
            field="rewardzoo",
        )
    try:
        cls = resolve(target)
    except RegistryError as exc:
        raise exc.in_entry(config.name, "rewardzoo") from exc.__cause__
    if not (isinstance(cls, type) and issubclass(cls, Reward)):
        raise ConfigError(
            f"'{target}' resolves to {cls!r}, which is not a rewardzoo reward", entry=config.name, field="rewardzoo"
        )
    if cls.kind in KINDS:  # a per-instance kind is checked once the reward is built
        _check_kind(config, target, cls.kind, kind)
    return target


def _check_kind(config: RewardArguments, target: str, found: str, wanted: str) -> None:
    if found != wanted:
        other = "RewardZooGroupwise" if found == "groupwise" else "RewardZooPointwise"
        raise ConfigError(
            f"'{target}' is a {found} reward; use reward_model: rewardzoo.integrations.flow_factory.{other}",
            entry=config.name,
            field="rewardzoo",
        )


def _device(config: RewardArguments, ff_device: Any, target: str) -> str:
    """Flow-Factory's device as a rewardzoo device string."""
    if config.device == torch.device("cuda"):  # FF's default: this rank's device, which a CPU-only reward lacks
        found = lookup(target)
        if found is not None and found.devices is not None and "cuda" not in found.devices:
            return "cpu"
    return str(ff_device)


def _spec(config: RewardArguments, target: str, device: str) -> RewardSpec:
    """The rewardzoo spec of a Flow-Factory entry: its extra keys are the reward's options."""
    extras = dict(config.extra_kwargs)
    nested = extras.get("kwargs") or {}
    if not isinstance(nested, Mapping):
        raise ConfigError("must be a mapping of the reward's options", entry=config.name, field="kwargs")
    options = {k: v for k, v in extras.items() if k not in OWN_KEYS}
    twice = sorted(set(options) & set(nested))
    if twice:
        raise ConfigError(
            f"option(s) {twice} given both as keys of the entry and in 'kwargs'", entry=config.name, field="kwargs"
        )
    return parse_spec(
        {
            "name": config.name,
            "reward_model": target,
            "model_path": extras.get("model_path"),
            "dtype": str(config.dtype).removeprefix("torch."),
            "device": device,
            "batch_size": config.batch_size,
            "kwargs": {**options, **nested},
            "limits": extras.get("limits"),
            "offload": extras.get("offload", "none"),
        },
        f"Flow-Factory reward '{config.name}'",
    )


def _required_fields(reward: Reward, name: str, groupwise: bool) -> tuple[str, ...]:
    """The Flow-Factory sample fields a call needs; refuses fields Flow-Factory samples do not have."""
    declared = [f for f in reward.inputs.fields if not (groupwise and f == "group_id")]
    missing = [f for f in declared if f not in FF_FIELDS]
    if missing:
        raise ConfigError(
            f"'{reward.name}' needs {missing}, which Flow-Factory samples do not carry "
            f"(they have {', '.join(FF_FIELDS)})",
            entry=name,
            field="rewardzoo",
        )
    # FF's cross-rank gather rebuilds samples from these fields only and regroups them by a hash of the
    # prompt: without it every gathered sample would fall into one group.
    fields = (["prompt"] if groupwise else []) + declared + (["audio_sample_rate"] if "audio" in declared else [])
    return tuple(dict.fromkeys(fields))


def _unbatched(image: Any) -> Any:
    # FF stores condition images given as PIL of different sizes as (1, C, H, W) tensors
    return image[0] if isinstance(image, torch.Tensor) and image.ndim == 4 and image.shape[0] == 1 else image


def _rows(name: str, values: Any) -> list:
    """One entry per sample from a Flow-Factory list or stacked tensor; condition media as lists."""
    if isinstance(values, (str, bytes, Mapping)):
        raise InputError("expected a list with one value per sample", field=name)
    rows = list(values.unbind(0)) if isinstance(values, torch.Tensor) else list(values)
    if name in _NESTED:
        rows = [list(r.unbind(0)) if isinstance(r, torch.Tensor) else list(r) for r in rows]
    if name == "condition_images":
        rows = [[_unbatched(image) for image in row] for row in rows]
    return rows


def _samples(fields: Mapping[str, Any], *, groupwise: bool = False) -> list[Sample]:
    """rewardzoo samples from Flow-Factory's keyword lists (None values are absent fields).

    Groupwise samples get the prompt as ``group_id`` (0 without prompts): Flow-Factory passes one group per
    call, and samples of one group share their prompt.
    """
    columns = {k: _rows(k, v) for k, v in fields.items() if v is not None}
    lengths = {k: len(v) for k, v in columns.items()}
    if not columns:
        raise InputError(f"no sample fields were passed (Flow-Factory passes {', '.join(FF_FIELDS)})")
    if len(set(lengths.values())) != 1:
        raise InputError(f"expected lists of one value per sample, got lengths {lengths}")
    rows = [{k: v[i] for k, v in columns.items()} for i in range(next(iter(lengths.values())))]
    if groupwise:
        for row in rows:
            row["group_id"] = row.get("prompt", 0)
    return samples_of(rows)


def _output(result: RewardResult, name: str) -> RewardModelOutput:
    extras = {k: (list(v) if is_text_extra(v) else torch.from_numpy(v)) for k, v in result.extras.get(name, {}).items()}
    return RewardModelOutput(rewards=torch.from_numpy(result.rewards[name]), extra_info=extras)


class _RewardZooModel(BaseRewardModel):
    """What both adapters share: a one-spec rewardzoo processor behind Flow-Factory's reward model API."""

    kind: ClassVar[str]
    use_tensor_inputs: ClassVar[bool] = True

    def __init__(self, config: RewardArguments, accelerator: Accelerator | None) -> None:
        super().__init__(config, accelerator)  # FF's base: config, accelerator, device, dtype, model
        target = _target(config, self.kind)
        spec = _spec(config, target, _device(config, self.device, target))
        try:
            self.processor = RewardProcessor([spec], _LOADER, decode=config.extra_kwargs.get("decode"))
        except ConfigError as exc:  # the decode stage's (its VAE, its fields): name the entry
            raise exc if exc.entry is not None else ConfigError(exc.message, entry=spec.name, field=exc.field) from exc
        self.spec_name = spec.name
        self.reward: Reward = self.processor.rewards[spec.name]
        if self.reward.kind in KINDS:
            _check_kind(config, target, self.reward.kind, self.kind)
        self.required_fields = _required_fields(self.reward, spec.name, self.kind == "groupwise")
        if self.processor.decoder is not None:  # FF's cross-rank gather carries the latents the stage decodes
            self.required_fields = tuple(dict.fromkeys((*self.required_fields, "latent")))
        self.device: torch.device = torch.device(self.reward.device)  # where FF moves the call's tensors

    def __call__(
        self,
        prompt: Sequence[str] | None = None,
        image: Any = None,
        video: Any = None,
        audio: Any = None,
        audio_sample_rate: Sequence[int] | None = None,
        condition_images: Any = None,
        condition_videos: Any = None,
        latent: Any = None,
    ) -> RewardModelOutput:
        # explicit keywords: FF passes every sample field a `**kwargs` signature would accept (latents too)
        fields = {
            "prompt": prompt,
            "image": image,
            "video": video,
            "audio": audio,
            "audio_sample_rate": audio_sample_rate,
            "condition_images": condition_images,
            "condition_videos": condition_videos,
            "latent": latent,
        }
        samples = _samples(fields, groupwise=self.kind == "groupwise")
        return _output(self.processor(samples), self.spec_name)


class RewardZooPointwise(_RewardZooModel, PointwiseRewardModel):
    """A Flow-Factory pointwise reward model scoring with the pointwise rewardzoo reward named by ``rewardzoo:``.

    ``model(prompt=[...], image=[...])`` -> ``RewardModelOutput(rewards (B,) float32, extra_info={extra: (B,)})``.
    """

    kind: ClassVar[str] = "pointwise"


class RewardZooGroupwise(_RewardZooModel, GroupwiseRewardModel):
    """A Flow-Factory groupwise reward model scoring with the groupwise rewardzoo reward named by ``rewardzoo:``
    (e.g. ``group_rank`` over a base).

    Flow-Factory calls it once per group (the samples of one prompt); a direct call with several prompts
    scores each prompt's samples as one group. ``required_fields`` includes ``prompt`` so Flow-Factory's
    cross-rank gather can regroup the samples.
    """

    kind: ClassVar[str] = "groupwise"


def monitor_step(
    monitor: Any,
    rewards: Mapping[str, Any],
    samples: Sequence[Any],
    step: int,
    *,
    split: str = "train",
    weights: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Feed ``monitor`` one step of Flow-Factory rewards: ``rewards`` maps each reward name to its scores
    (a tensor or sequence aligned with ``samples``, as ``compute_rewards`` returns), ``samples`` are
    Flow-Factory samples (their ``unique_id`` is the group), ``weights`` each reward's weight in the total
    (default 1; Flow-Factory's ``RewardArguments.weight``). Returns the monitor's metrics."""
    import numpy as np

    n = len(samples)
    columns: dict[str, np.ndarray] = {}
    for name, values in rewards.items():
        array = values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values)
        array = np.asarray(array, dtype=np.float64).reshape(-1)
        if array.size != n:
            raise InputError(f"reward '{name}' has {array.size} scores for {n} samples", field=f"rewards.{name}")
        columns[name] = array
    weights = dict(weights or {})
    unknown = sorted(set(weights) - set(columns))
    if unknown:
        raise ConfigError(f"weights name rewards that were not scored: {unknown}", field="weights")
    total = np.zeros(n)
    for name, array in columns.items():
        total += float(weights.get(name, 1.0)) * array
    result = RewardResult(
        rewards={k: v.astype(np.float32) for k, v in columns.items()},
        total=total.astype(np.float32),
        applied=[list(columns)] * n,
        weights={k: np.full(n, weights.get(k, 1.0), np.float32) for k in columns},
        group_ids=[getattr(s, "unique_id", None) for s in samples],
    )
    return monitor.update(result, step, split=split)
