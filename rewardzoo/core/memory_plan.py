"""A config's memory plan before loading (``rewardzoo plan``): each model's bytes, where it lives, what fits.

Every entry of ``rewards:`` and ``eval_rewards:`` (and the inner rewards of composites, as the loader builds them)
is resolved as the loader resolves it (registry, device, dtype) and grouped into *models* the way the loader shares
instances (the model identity, :func:`~rewardzoo.core.loader.model_identity`). Per model:

- weights: the tensors of the files its class's :meth:`~rewardzoo.rewards.base.Reward.weight_files` names (by
  default the checkpoint of its ``model_path``, else of its ``default_model``; rewards override it for files shipped
  in a package, library model names and second files beside the model), at its resolved dtype (or a part's own),
  from safetensors headers (exact), from a ``torch.save`` file's tensor table where the part names its tensors
  (exact: :mod:`rewardzoo.shared.pickle_table`), or by file size for other formats (say so); nothing loaded or
  downloaded
  (:mod:`rewardzoo.shared.checkpoints`); unknown, saying why, when a file is not on this machine. What is counted
  is what a checkpoint stores: parameters and persistent buffers. Buffers a module recomputes at construction
  (non-persistent: attention masks, position ids) are not in a checkpoint and not counted. A card with
  ``model_free: true``: no weights, and ``offload`` on it does nothing;
- activations: the card's ``activation_per_sample``, else the figure measured at real size for the same model
  (:mod:`rewardzoo.catalog.measured`, from ``scripts/scale_check.py``), or a ``--probe`` measurement, times the
  entry's batch size;
- offload: as the loader combines it (``none`` if any entry sharing the model says so, else ``cpu``, else ``drop``).

A model whose weights alone are larger than this machine's memory (:func:`host_memory`) is a problem of the plan
(``rewardzoo plan`` exits 1 naming it) whatever the budgets: refused before anything is loaded.

Per device: *resident* (weights that stay between reward phases: ``offload: none``), *asleep* (host memory the
sleeping ``offload: cpu`` models take; ``drop`` takes none), *peak* during a reward phase (every model of the device
awake, plus the largest activation of its synchronous entries and the activations of its async ones). Figures with
an unknown part are lower bounds and say so. ``device: auto`` entries are placed by
:func:`~rewardzoo.core.placement.place` over the budgets (``--devices``) or this machine's free CUDA memory; the
processor places its ``auto`` entries the same way before loading (:func:`place_auto_entries`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..catalog.measured import activation_for
from ..errors import ConfigError, RegistryError
from ..registry import find, lookup
from ..shared.checkpoints import (
    FILE_SIZE,
    HEADERS,
    PICKLE_TABLE,
    Checkpoint,
    checkpoint_bytes,
    format_size,
    resolve_checkpoint,
)
from ..spec.config import DecodeSpec, RewardConfig, RewardSpec
from .loader import auto_key, dtype_for, model_identity, registry_errors, requested_device
from .placement import cuda_free_memory, place
from .resolve import parse_spec

if TYPE_CHECKING:
    from .loader import RewardLoader

NO_WEIGHTS = "no weights"


@dataclass
class PlannedModel:
    """One model of the plan: the entries sharing it, where it goes, its bytes (None: unknown) and how they were
    found (``how``), its activation bytes per sample (``activation``; ``activation_source``: card, probe or
    unknown) and the largest batch of its entries."""

    entries: list[str]
    reward_model: str
    target: str
    source: str | None
    requested: str
    dtype: str
    offload: str
    weights: int | None
    how: str
    files: list[str] = field(default_factory=list)
    activation: int | None = None
    activation_source: str = "unknown"
    batch_size: int = 1
    async_reward: bool = False
    device: str = ""
    notes: list[str] = field(default_factory=list)
    key: Hashable = None
    specs: list[RewardSpec] = field(default_factory=list)

    @property
    def model_free(self) -> bool:
        return self.how == NO_WEIGHTS

    @property
    def batch_activation(self) -> int | None:
        if self.model_free:
            return 0
        return None if self.activation is None else self.activation * self.batch_size

    def as_dict(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "reward_model": self.reward_model,
            "model_path": self.source,
            "device": self.device,
            "dtype": self.dtype,
            "offload": self.offload,
            "weights_bytes": self.weights,
            "weights_from": self.how,
            "files": self.files,
            "activation_per_sample_bytes": self.activation,
            "activation_from": self.activation_source,
            "batch_size": self.batch_size,
            "notes": self.notes,
        }


@dataclass
class DevicePlan:
    """One device's figures (bytes); ``exact``: False when a weight or activation of one of its models is unknown
    (the figures are then lower bounds); ``budget``: from ``--devices`` (None: not given)."""

    device: str
    models: list[PlannedModel]
    budget: int | None = None

    def _sum(self, models: Iterable[PlannedModel]) -> int:
        return sum(m.weights or 0 for m in models)

    @property
    def resident(self) -> int:
        return self._sum(m for m in self.models if m.offload == "none")

    @property
    def asleep(self) -> int:
        """Host memory of this device's sleeping models (``offload: cpu``; ``drop`` frees them)."""
        return self._sum(m for m in self.models if m.offload == "cpu")

    @property
    def peak(self) -> int:
        acts = [m.batch_activation or 0 for m in self.models]
        sync = [a for a, m in zip(acts, self.models) if not m.async_reward]
        return (
            self._sum(self.models) + max(sync, default=0) + sum(a for a, m in zip(acts, self.models) if m.async_reward)
        )

    @property
    def exact(self) -> bool:
        return all(m.weights is not None and m.batch_activation is not None for m in self.models)

    @property
    def fits(self) -> bool | None:
        return None if self.budget is None else self.peak <= self.budget

    def as_dict(self) -> dict[str, Any]:
        return {
            "budget_bytes": self.budget,
            "resident_bytes": self.resident,
            "asleep_host_bytes": self.asleep,
            "peak_bytes": self.peak,
            "lower_bound": not self.exact,
            "fits": self.fits,
            "entries": [name for m in self.models for name in m.entries],
        }


@dataclass
class MemoryPlan:
    """A config's plan: its models, its devices, and what does not fit (``problems``: one line each, naming the
    entry and the device)."""

    models: list[PlannedModel]
    devices: dict[str, DevicePlan]
    problems: list[str]

    @property
    def fits(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "models": [m.as_dict() for m in self.models],
            "devices": {name: d.as_dict() for name, d in self.devices.items()},
            "fits": self.fits,
            "problems": self.problems,
        }


def plan_config(
    config: RewardConfig,
    budgets: Mapping[str, int] | None = None,
    activations: Mapping[str, int] | None = None,
) -> MemoryPlan:
    """The plan of ``config`` (train and eval entries). ``budgets``: bytes per device (``--devices``): ``auto``
    entries go to its CUDA devices (else its first device) and every device with models must be listed;
    without it, ``auto`` uses this machine's free CUDA memory (else the CPU). ``activations``: measured bytes per
    sample by entry name (``--probe``), over the cards' figures."""
    free = dict(budgets) if budgets else cuda_free_memory()
    targets = {d: b for d, b in free.items() if d.startswith("cuda")} or dict(list(free.items())[:1]) or {"cpu": 0}
    models = collect(list(config.rewards) + list(config.eval_rewards), next(iter(targets)).split(":")[0])
    for model in models:
        measured = next((activations[n] for n in model.entries if activations and n in activations), None)
        if measured is not None:
            model.activation, model.activation_source = measured, "probe"
    models = _placed(models, targets)
    if config.decode is not None:
        models.append(decode_model(config.decode, next(iter(targets))))
    devices: dict[str, DevicePlan] = {}
    for model in models:
        devices.setdefault(model.device, DevicePlan(model.device, [])).models.append(model)
    problems = too_large(models)
    for name, dev in devices.items():
        if budgets is None:
            continue
        if name not in budgets:
            if name != "cpu":
                problems.append(f"entry '{dev.models[0].entries[0]}' is on {name}, which --devices does not list")
            continue
        dev.budget = budgets[name]
        if dev.peak > dev.budget:
            worst = max(dev.models, key=lambda m: (m.weights or 0) + (m.batch_activation or 0))
            problems.append(
                f"entry '{worst.entries[0]}' does not fit on {name}: the phase peak there is {format_size(dev.peak)}"
                f" over its budget of {format_size(dev.budget)} (entries on {name}: "
                + ", ".join(f"{n} {format_size(m.weights)}" for m in dev.models for n in m.entries)
                + ")"
            )
    return MemoryPlan(models, devices, problems)


def host_memory() -> int | None:
    """This machine's memory in bytes (the physical memory, or the cgroup's limit when lower); None if unknown."""
    import os

    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return total


def too_large(models: Sequence[PlannedModel]) -> list[str]:
    """One problem per model whose weights alone exceed this machine's memory: every loader builds or reads the
    weights in host memory (also for a CUDA device), so loading it would end in an out-of-memory kill."""
    memory = host_memory()
    if memory is None:
        return []
    return [
        f"entry '{m.entries[0]}': its weights ({format_size(m.weights)} at {m.dtype}, {m.how}) are larger than this "
        f"machine's memory ({format_size(memory)}); loading them would run it out of memory. Refused before loading"
        for m in models
        if m.weights is not None and m.weights > memory
    ]


def _placed(models: list[PlannedModel], free: Mapping[str, int]) -> list[PlannedModel]:
    """Fixed models on their devices, ``auto`` ones placed over what is left; models that the placement makes
    identical to another (an ``auto`` entry and an explicit one on the same device) merged, as the loader shares
    them."""
    left = dict(free)
    for model in models:
        if model.requested != "auto":
            model.device = _concrete(model.requested)
            if model.device in left:
                left[model.device] -= (model.weights or 0) + (model.batch_activation or 0)
    auto = [m for m in models if m.requested == "auto"]
    if auto:
        sizes = {i: (m.weights or 0) + (m.batch_activation or 0) for i, m in enumerate(auto)}
        for i, device in place(sizes, left).items():
            auto[i].device = device
    merged: dict[Hashable, PlannedModel] = {}
    for model in models:
        key = model_identity(model.target, model.specs[0], model.dtype, model.device)
        if key in merged:
            _join(merged[key], model)
        else:
            merged[key] = model
    return list(merged.values())


def decode_model(decode: DecodeSpec, auto_device: str) -> PlannedModel:
    """The ``decode:`` stage's VAE as a model of the plan (entry ``decode``): its safetensors at the dtype it runs
    in (``auto``: bfloat16 on CUDA, float32 on the CPU), resident (a decode stage does not sleep), on its device
    (``auto``: the first device planned); activations unknown (a VAE's grow with the latents' size)."""
    device = auto_device if decode.device == "auto" else _concrete(decode.device)
    dtype = decode.dtype if decode.dtype != "auto" else "bfloat16" if device.startswith("cuda") else "float32"
    weights, how, files = _weights([resolve_checkpoint(decode.vae)], dtype)
    return PlannedModel(
        entries=["decode"],
        reward_model="decode (VAE)",
        target="rewardzoo.core.decode:LatentDecoder",
        source=decode.vae,
        requested=decode.device,
        dtype=dtype,
        offload="none",
        weights=weights,
        how=how,
        files=files,
        batch_size=decode.batch_size,
        device=device,
        notes=["decodes the latents of each batch once, for the pixel rewards"],
    )


def _concrete(device: str) -> str:
    return "cuda:0" if device == "cuda" else device


def collect(specs: Sequence[RewardSpec], auto_kind: str = "cpu") -> list[PlannedModel]:
    """The models of ``specs`` and their inner rewards, grouped as the loader shares them (before placement:
    ``auto`` entries share by :func:`~rewardzoo.core.loader.auto_key`); ``auto_kind``: the kind of device ``auto``
    entries will get (their ``dtype: auto`` depends on it)."""
    out: dict[Hashable, PlannedModel] = {}
    todo = list(specs)
    while todo:
        spec = todo.pop(0)
        model, inner = _model(spec, auto_kind)
        todo.extend(inner)
        if model.key in out:
            _join(out[model.key], model)
        else:
            out[model.key] = model
    return list(out.values())


def _join(into: PlannedModel, other: PlannedModel) -> None:
    into.entries += [n for n in other.entries if n not in into.entries]
    into.specs += other.specs
    modes = {s.offload for s in into.specs}
    into.offload = "none" if "none" in modes else "cpu" if "cpu" in modes else "drop"
    into.batch_size = max(into.batch_size, other.batch_size)
    into.async_reward = into.async_reward or other.async_reward


def _model(spec: RewardSpec, auto_kind: str) -> tuple[PlannedModel, list[RewardSpec]]:
    with registry_errors((spec.name, "reward_model")):
        found = find(spec.reward_model)
    card = found.card
    requested = requested_device(spec, card)
    dtype = dtype_for(spec, auto_kind if requested == "auto" else _concrete(requested), card)
    notes: list[str] = []
    cls: Any = None
    try:
        cls = found.load_class()
    except RegistryError as exc:  # a missing extra: the plan still reads the files, not the class's defaults
        notes.append(f"class not importable here ({exc}); inner rewards and its default model_path are not planned")
    inner: list[RewardSpec] = []
    kwargs: dict[str, Any] = dict(spec.kwargs)
    if cls is not None:
        try:
            kwargs, entries = cls.inner_rewards(
                kwargs, model_path=spec.model_path, device=spec.device, dtype=spec.dtype
            )
        except ConfigError as exc:
            raise exc if exc.entry is not None else ConfigError(exc.message, entry=spec.name, field=exc.field) from exc
        inner = [
            parse_spec({"name": f"{spec.name}.{param}", "offload": spec.offload, **entry}, f"{spec.name}: {param}")
            for param, entry in entries.items()
        ]
    source = spec.model_path
    if source is None and cls is not None:
        default = getattr(cls, "default_model", None) or getattr(cls, "default_repo", None)
        source = default if isinstance(default, str) else None
    files: list[str] = []
    weights: int | None
    if card is not None and card.model_free:
        weights, how = 0, NO_WEIGHTS
        if spec.offload != "none":
            notes.append(f"offload: {spec.offload} does nothing (no weights)")
        dtype = "-"
    else:
        if cls is not None:
            try:
                parts = list(cls.weight_files(spec.model_path, kwargs))
            except ConfigError as exc:
                raise (
                    exc if exc.entry is not None else ConfigError(exc.message, entry=spec.name, field=exc.field)
                ) from exc
        elif source is not None:
            parts = [resolve_checkpoint(source)]
        else:
            parts = [Checkpoint("", missing="no model_path, and no default known to the plan")]
        weights, how, files = _weights(parts, dtype)
    if spec.environment is not None:
        notes.append("loaded in its environment's worker process")
    activation, activation_source = None, "unknown"
    if card is not None and card.activation_per_sample is not None:
        activation, activation_source = card.activation_per_sample, "card"
    elif card is not None and not card.model_free:
        found_figure = activation_for(card.name, spec.kwargs, dtype, requested, weights, source)
        if found_figure is not None:
            activation, activation_source = found_figure
    model = PlannedModel(
        entries=[spec.name],
        reward_model=spec.reward_model,
        target=found.target,
        source=source,
        requested=requested,
        dtype=dtype,
        offload=spec.offload,
        weights=weights,
        how=how,
        files=files,
        activation=activation,
        activation_source=activation_source,
        batch_size=spec.batch_size,
        async_reward=spec.async_reward,
        notes=notes,
        specs=[spec],
    )
    model.key = auto_key(spec) if requested == "auto" else model_identity(found.target, spec, dtype, requested)
    return model, inner


_METHODS = (HEADERS, PICKLE_TABLE, FILE_SIZE)  # the order ``how`` names them in


def _weights(parts: Sequence[Checkpoint], dtype: str) -> tuple[int | None, str, list[str]]:
    """(bytes or None, how they were found, the files) of a reward's weight files (:meth:`Reward.weight_files`):
    unknown, saying why, when a part is not on this machine."""
    files = [str(f) for part in parts for f in part.files]
    missing = [part.missing for part in parts if part.missing]
    if missing:
        return None, "unknown: " + "; ".join(missing), files
    if not parts:
        return 0, "no weight files in this configuration", files
    weighed = [part for part in parts if part.files] or list(parts)  # a config-only part (fetch's) weighs nothing
    sizes = [
        checkpoint_bytes(part.files, part.dtype or dtype, part.include, part.exclude, part.merged) for part in weighed
    ]
    methods = {m for size in sizes for m in size.method.split(" + ")}
    how = " + ".join(f"{m} (stored precision)" if m == FILE_SIZE else m for m in _METHODS if m in methods)
    fixed = sorted({part.dtype for part in parts if part.dtype and part.dtype != dtype})
    if fixed:
        how += f"; a part held at {', '.join(fixed)}"
    return sum(size.total for size in sizes), how, files


def place_auto_entries(loader: RewardLoader, specs: Sequence[RewardSpec]) -> None:
    """Place the ``device: auto`` entries of ``specs`` (and their inner rewards) over this machine's CUDA devices
    by the plan (free memory now, so models loaded before count), into ``loader.placement``; a no-op unless an
    entry says ``auto`` and the machine has several CUDA devices. Entries placed before keep their device."""
    if not any(s.device == "auto" and s.environment is None and _may_use_cuda(s) for s in specs):
        return  # spares CPU-only rewards the torch import
    free = cuda_free_memory()
    if len(free) < 2:
        return
    planned = collect([s for s in specs if s.environment is None], "cuda")
    auto = [m for m in planned if m.requested == "auto" and m.key not in loader.placement]
    sizes = {i: (m.weights or 0) + (m.batch_activation or 0) for i, m in enumerate(auto)}
    for i, device in place(sizes, free).items():
        loader.placement[auto[i].key] = device


def _may_use_cuda(spec: RewardSpec) -> bool:
    card = lookup(spec.reward_model)
    return card is None or card.devices is None or "cuda" in card.devices
