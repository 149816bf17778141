"""``rewardzoo plan CONFIG [--devices cuda:0=80GiB,...] [--json] [--probe]``: a config's memory plan before loading.

The plan itself is :mod:`rewardzoo.core.memory_plan`; this module prints it and runs ``--probe``: each model with
weights is loaded once on its planned device and called on a tiny batch of generated media (the demo's), and its
activation bytes per sample are measured. On CUDA: ``torch.cuda.max_memory_allocated`` over the call minus the
allocation before it. On the CPU there is no allocator statistic: the probe reports the rise of the process's peak
RSS over the call (``VmHWM`` after resetting it through ``/proc/self/clear_refs``), labelled ``probe (cpu rss)``;
it includes allocator caching and is indicative only. Where neither is available the probe says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from ..core.memory_plan import MemoryPlan, PlannedModel, plan_config
from ..core.placement import parse_budgets
from ..core.resolve import resolve_config
from ..shared.checkpoints import format_size
from .tables import format_table

PROBE_SAMPLES = 2


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="YAML config path, a reward name (its card's example config) or a shipped config")
    p.add_argument(
        "--devices",
        help="memory budgets, e.g. cuda:0=80GiB,cuda:1=80GiB (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB); exit 1 "
        "when the config does not fit",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument(
        "--probe",
        action="store_true",
        help="load each model once and measure its activation memory on a tiny batch (loads the weights)",
    )


def cmd_plan(args: argparse.Namespace) -> int:
    config = resolve_config(args.config)
    budgets = parse_budgets(args.devices) if args.devices else None
    plan = plan_config(config, budgets)
    if args.probe:
        measured, notes = probe(plan)
        plan = plan_config(config, budgets, measured)
        for model in plan.models:
            model.notes += [n for name in model.entries for n in notes.get(name, [])]
    print(json.dumps(plan.as_dict(), indent=2) if args.json else render(plan))
    for problem in plan.problems:
        print(f"rewardzoo: does not fit: {problem}", file=sys.stderr)
    return 0 if plan.fits else 1


def render(plan: MemoryPlan) -> str:
    """The plan as two plain-text tables (models, devices) and the models' notes."""
    rows: list[list[object]] = [
        ["entries", "reward", "device", "dtype", "offload", "weights", "from", "activation/sample", "batch"]
    ]
    for m in plan.models:
        act = (
            "-"
            if m.model_free
            else f"{format_size(m.activation)} ({m.activation_source})"
            if m.activation
            else "unknown"
        )
        rows.append(
            [
                ", ".join(m.entries),
                m.reward_model,
                m.device,
                m.dtype,
                m.offload,
                "-" if m.model_free else format_size(m.weights) if m.weights is not None else "unknown",
                m.how,
                act,
                str(m.batch_size),
            ]
        )
    lines = [format_table(rows), ""]
    dev_rows: list[list[object]] = [["device", "budget", "resident", "asleep (host)", "phase peak", "fits"]]
    for name, d in plan.devices.items():
        bound = "" if d.exact else " (at least)"
        fits = "-" if d.fits is None else "yes" if d.fits else "NO"
        dev_rows.append(
            [
                name,
                format_size(d.budget),
                format_size(d.resident),
                format_size(d.asleep),
                format_size(d.peak) + bound,
                fits,
            ]
        )
    lines.append(format_table(dev_rows))
    notes = [f"{', '.join(m.entries)}: {n}" for m in plan.models for n in m.notes]
    if notes:
        lines += ["", "notes:", *(f"  {n}" for n in notes)]
    return "\n".join(lines)


def probe(plan: MemoryPlan) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Activation bytes per sample measured for each model with weights (by entry name), and notes by entry
    name for the models the probe could not measure."""
    measured: dict[str, int] = {}
    notes: dict[str, list[str]] = {}
    for model in plan.models:
        if model.model_free or not model.specs:  # no entry of its own to call (the decode stage's VAE)
            continue
        try:
            value, how = _probe_one(model)
        except Exception as exc:  # a probe is advice: a model that cannot be probed is reported, not fatal
            notes.setdefault(model.entries[0], []).append(f"probe failed: {type(exc).__name__}: {exc}")
            continue
        if value is None:
            notes.setdefault(model.entries[0], []).append(f"probe unavailable: {how}")
            continue
        for name in model.entries:
            measured[name] = value
        notes.setdefault(model.entries[0], []).append(f"activation measured by {how}")
    return measured, notes


def _probe_one(model: PlannedModel) -> tuple[int | None, str]:
    from ..core.processor import RewardProcessor

    samples = _samples_for(model)
    if samples is None:
        return None, f"no generated sample for a {model.reward_model} input"
    spec = replace(model.specs[0], device=model.device, offload="none", async_reward=False)
    with RewardProcessor([spec]) as processor:
        if model.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(model.device)
            torch.cuda.reset_peak_memory_stats(model.device)
            before = torch.cuda.memory_allocated(model.device)
            processor(samples)
            torch.cuda.synchronize(model.device)
            peak = torch.cuda.max_memory_allocated(model.device)
            return max(0, peak - before) // len(samples), "probe (cuda max_memory_allocated)"
        if model.device != "cpu" or not _reset_peak_rss():
            return None, f"no memory statistic for {model.device} here"
        before = _rss("VmRSS")
        processor(samples)
        return max(0, _rss("VmHWM") - before) // len(samples), "probe (cpu rss: peak RSS rise, indicative)"


def _samples_for(model: PlannedModel) -> list[Any] | None:
    from ..jobs.demo import demo_samples
    from ..registry import lookup

    card = lookup(model.reward_model)
    modality = card.modality if card is not None else "any"
    wanted = {"image": "image", "any": "image", "video": "video", "audio": "audio"}.get(modality)
    if wanted is None:
        return None
    found = [s for _, s in demo_samples() if s.dataset == wanted]
    return found[: max(PROBE_SAMPLES, 3 if wanted == "image" else PROBE_SAMPLES)]  # the images: one whole group


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux)
        return True
    except OSError:
        return False


def _rss(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"{key} not in /proc/self/status")
