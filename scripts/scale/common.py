"""The real-scale check's machinery: cases, measurements in fresh subprocesses, and the results file.

A **case** (:class:`Case`) is one flagship reward at its real size. A family module ``scripts/scale/<family>.py``
defines ``CASES: list[Case]``; ``scripts/scale_check.py`` finds every module of this folder with a ``CASES``
list (``--list`` prints them, ``--only NAME`` runs some). A case gives:

- ``name``: the row's key in ``benchmarks/results/scale.json`` (usually the reward's registry name; a variant
  such as ``group_diversity.gardo`` is fine) and ``reward``: the card it belongs to (registry name);
- ``build(folder)``: writes the checkpoint into the empty ``folder`` (real architecture at its real size, random
  weights, seeded; numbers from the reference's published configuration; the file layout the published checkpoint
  uses: sharded safetensors + index, ``.bin``, ``.pt``, ...). Runs in its own subprocess; built once per run and
  reused while the folder holds a ``.built`` stamp (``--rebuild`` forces it);
- ``entry(folder)``: the reward's config entry (a mapping as in ``rewards:``; ``name`` is set by the harness)
  loading that checkpoint through the ``model_path`` (and kwargs) users pass;
- ``reference(folder)``: loads the same checkpoint with the reference library's own loader (transformers
  ``from_pretrained``, ``open_clip.create_model_and_transforms(pretrained=file)``, ``torch.load`` + the reference
  module, ...) and returns the loaded object (a module, or a tuple / list / dict holding modules), or ``None`` for
  no reference loader (the row then says so);
- ``samples()``: the inputs of ONE call at real size, as the processor takes them (a list of sample dicts: one
  sample for a pointwise reward; one group, with ``group_id``, for a groupwise one). Per-sample figures divide by
  ``len(samples())``;
- ``imports``: modules imported in every measuring subprocess BEFORE its baseline, so the reference loader and
  rewardzoo's are measured in the same process layout (the reward's own module is imported too);
- ``dtype``: the card's dtype the checkpoint is loaded at (written into the entry when the entry has none);
- ``layout``: one line saying which published file layout the build reproduces (and where that is documented);
- ``notes``: anything a reader of the row needs (what is not reproduced, ...).

Every measurement runs in a FRESH subprocess (``python scripts/scale/common.py --child FAMILY CASE TASK FOLDER``)
which imports ``imports``, resets its peak RSS (``/proc/self/clear_refs``), measures and prints one ``RESULT``
JSON line. Peak memory is the child's ``VmHWM`` minus its ``VmRSS`` just before the measured step. Tasks
(:data:`TASKS`): ``reference`` (the reference loader), ``load`` (rewardzoo's loader, then the plan, then one
forward twice: activation peak and seconds per sample), ``drop`` and ``cpu`` (``offload:`` sleep/wake: RSS freed,
bit-identical tensors and scores, wake time), ``shared`` (train + eval entries naming the same model through
``build_processors``: constructions and RSS). :func:`run_case` runs them all and returns the row;
:func:`write_rows` merges rows into ``benchmarks/results/scale.json`` by case name (other rows are kept) and
writes the standard benchmark figures from them (the Benchmarks page and the cards read those).

Heavy: run under ``flock /tmp/rewardzoo-heavy.lock`` on a shared machine. Never in CI.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import importlib
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
for _p in (str(ROOT), str(SCRIPTS), str(ROOT / "benchmarks")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

RESULTS = ROOT / "benchmarks" / "results" / "scale.json"
SCRATCH = Path(os.environ.get("REWARDZOO_SCALE_SCRATCH", "/work/scratch/scale-check"))
TASKS = ("reference", "load", "drop", "cpu", "shared")
MB = 1e6


@dataclasses.dataclass
class Case:
    """One flagship reward at its real size (see the module docstring for each field)."""

    name: str
    reward: str
    build: Callable[[Path], None]
    entry: Callable[[Path], dict[str, Any]]
    reference: Callable[[Path], Any] | None
    samples: Callable[[], list[dict[str, Any]]]
    imports: tuple[str, ...] = ("torch",)
    dtype: str = "float32"
    layout: str = ""
    notes: str = ""
    family: str = ""  # set by :func:`cases` (the module name)

    def full_entry(self, folder: Path, name: str | None = None, **extra: Any) -> dict[str, Any]:
        entry = {"name": name or self.name.replace(".", "_"), "reward_model": self.reward, **self.entry(folder)}
        entry.setdefault("dtype", self.dtype)
        entry.setdefault("device", "cpu")
        return {**entry, **extra}


# --------------------------------------------------------------------------------------------- process memory
def _status(key: str) -> int:
    """A ``/proc/self/status`` figure (``VmRSS``, ``VmHWM``) in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def rss() -> int:
    """This process's resident set now (bytes)."""
    return _status("VmRSS")


def reset_peak() -> bool:
    """Reset this process's peak RSS (``VmHWM``) to its RSS now; False where the kernel does not allow it (the
    peak is then the process's peak since it started, ``ru_maxrss``)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak() -> int:
    """This process's peak RSS since :func:`reset_peak` (bytes)."""
    try:
        return _status("VmHWM")
    except (OSError, KeyError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Measured:
    """``with Measured() as m: step()``: ``m.seconds`` (wall), ``m.cpu_seconds`` (this process's CPU time),
    ``m.peak`` (peak RSS during the step minus the RSS before it, bytes), ``m.rss_before`` / ``m.rss_after``."""

    def __enter__(self) -> Measured:
        import gc

        gc.collect()
        self.rss_before = rss()
        reset_peak()
        self._cpu = time.process_time()
        self._t = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._t
        self.cpu_seconds = time.process_time() - self._cpu
        self.peak = peak() - self.rss_before
        self.rss_after = rss()


def tensor_bytes(obj: Any) -> int:
    """Bytes of the parameters and buffers of the ``torch.nn.Module`` objects in ``obj`` (a module, or a tuple /
    list / dict of them, nested), each tensor once."""
    seen: dict[int, int] = {}
    for module in _modules(obj):
        for t in (*module.parameters(), *module.buffers()):
            seen.setdefault(id(t), t.numel() * t.element_size())
    return sum(seen.values())


def _modules(obj: Any) -> list[Any]:
    import torch

    if isinstance(obj, torch.nn.Module):
        return [obj]
    if isinstance(obj, Mapping):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [m for item in obj for m in _modules(item)]
    return []


def digest(tensors: Iterable[Any]) -> str:
    """One hash of the bits of ``tensors`` (in order): equal digests = bit-identical weights."""
    import torch

    h = hashlib.blake2b(digest_size=16)
    for t in tensors:
        data = t.detach().contiguous().reshape(-1)
        if data.dtype == torch.bfloat16:
            data = data.view(torch.int16)
        h.update(str((tuple(t.shape), str(t.dtype))).encode())
        h.update(data.cpu().numpy())
    return h.hexdigest()


# --------------------------------------------------------------------------------------------- cases
def cases() -> dict[str, Case]:
    """Every case of every family module in ``scripts/scale/`` (by case name)."""
    out: dict[str, Case] = {}
    for path in sorted(Path(__file__).parent.glob("*.py")):
        if path.stem in ("__init__", "common"):
            continue
        module = importlib.import_module(f"scale.{path.stem}")
        for case in getattr(module, "CASES", []):
            case.family = path.stem
            if case.name in out:
                raise ValueError(f"case {case.name} is defined twice ({out[case.name].family}, {path.stem})")
            out[case.name] = case
    return out


def case_folder(case: Case) -> Path:
    return SCRATCH / case.name


# --------------------------------------------------------------------------------------------- child tasks
def _setup(case: Case) -> None:
    import torch

    torch.manual_seed(0)
    for module in case.imports:
        importlib.import_module(module)
    import rewardzoo  # noqa: F401
    from rewardzoo.catalog.registry import find

    find(case.reward).load_class()  # the reward's module and what it imports at module level


def _score(proc: Any, samples: list[dict[str, Any]]) -> Any:
    result = proc(samples)
    return next(iter(result.rewards.values()))


def _in_range(case: Case, scores: Any) -> dict[str, Any]:
    import numpy as np

    from rewardzoo.catalog.registry import lookup

    card = lookup(case.reward)
    lo, hi = card.score_range if card is not None and card.score_range else (-math.inf, math.inf)
    finite = bool(np.isfinite(scores).all())
    return {
        "scores": [float(s) for s in scores],
        "finite": finite,
        "in_range": finite and bool(((scores >= lo) & (scores <= hi)).all()),
        "score_range": [lo, hi],
    }


def task_reference(case: Case, folder: Path) -> dict[str, Any]:
    if case.reference is None:
        return {"skipped": "no reference loader"}
    with Measured() as m:
        model = case.reference(folder)
    return {"load_s": m.seconds, "load_peak_bytes": m.peak, "loaded_bytes": tensor_bytes(model)}


def task_load(case: Case, folder: Path) -> dict[str, Any]:
    import numpy as np
    import torch

    from rewardzoo import RewardProcessor
    from rewardzoo.core.memory_plan import plan_config
    from rewardzoo.core.resolve import resolve_config

    entry = case.full_entry(folder)
    with Measured() as m:
        proc = RewardProcessor([entry])
    reward = proc.rewards[entry["name"]]
    out: dict[str, Any] = {
        "load_s": m.seconds,
        "load_peak_bytes": m.peak,
        "loaded_bytes": proc.loader.residency.weight_bytes(reward),
        "threads": torch.get_num_threads(),
    }
    planned = plan_config(resolve_config({"rewards": [entry]})).models[0]
    out["plan_bytes"], out["plan_from"] = planned.weights, planned.how
    samples = case.samples()
    runs = []
    for _ in range(2):  # the first call pays one-time costs (lazy init, allocator growth); the second is reported
        with Measured() as f:
            scores = _score(proc, samples)
        runs.append(f)
    out.update(_in_range(case, np.asarray(scores)))
    n = len(samples)
    out.update(
        samples_per_call=n,
        first_call_s=runs[0].seconds,
        s_per_sample=runs[1].seconds / n,
        cpu_s_per_sample=runs[1].cpu_seconds / n,
        activation_bytes_per_sample=max(r.peak for r in runs) / n,
    )
    return out


def _offload(case: Case, folder: Path, mode: str) -> dict[str, Any]:
    from rewardzoo import RewardProcessor
    from rewardzoo.core.residency import module_tensors

    entry = case.full_entry(folder, offload=mode)
    samples = case.samples()
    with Measured() as built:
        proc = RewardProcessor([entry])  # loads, then sleeps (binds the tensors to the files at the first drop)
    reward = proc.rewards[entry["name"]]
    res = proc.loader.residency
    tensors = module_tensors(res.modules(reward))
    with Measured() as w0:
        proc.wake()
    nbytes = res.weight_bytes(reward)
    before = digest(tensors)
    scores = _score(proc, samples)  # the call wakes, scores, sleeps again (phase_done)
    proc.wake()
    awake = rss()
    with Measured() as s:
        proc.sleep()
    asleep = rss()
    with Measured() as w:
        proc.wake()
    after = digest(tensors)
    again = _score(proc, samples)
    return {
        "construct_s": built.seconds,
        "first_wake_s": w0.seconds,
        "weight_bytes": nbytes,
        "rss_awake_bytes": awake,
        "rss_asleep_bytes": asleep,
        "freed_fraction": (awake - asleep) / nbytes if nbytes else None,
        "sleep_s": s.seconds,
        "wake_s": w.seconds,
        "wake_peak_bytes": w.peak,
        "tensors_bit_identical": before == after,
        "scores_bit_identical": bytes(memoryview(scores)) == bytes(memoryview(again)),
    }


def task_drop(case: Case, folder: Path) -> dict[str, Any]:
    return _offload(case, folder, "drop")


def task_cpu(case: Case, folder: Path) -> dict[str, Any]:
    return _offload(case, folder, "cpu")


def task_shared(case: Case, folder: Path) -> dict[str, Any]:
    from rewardzoo import RewardLoader, build_processors

    loader = RewardLoader()
    config = {
        "rewards": [case.full_entry(folder, name="train_entry")],
        "eval_rewards": [case.full_entry(folder, name="eval_entry")],
    }
    with Measured() as m:
        train, evaluate = build_processors(config, loader)
    same = train.rewards["train_entry"] is evaluate.rewards["eval_entry"]
    return {
        "constructions": loader.constructions,
        "same_instance": same,
        "load_peak_bytes": m.peak,
        "rss_added_bytes": m.rss_after - m.rss_before,
        "weight_bytes": loader.residency.weight_bytes(train.rewards["train_entry"]),
    }


def task_build(case: Case, folder: Path) -> dict[str, Any]:
    with Measured() as m:
        case.build(folder)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    (folder / ".built").write_text(_dt.datetime.now().isoformat())
    return {
        "build_s": m.seconds,
        "build_peak_bytes": m.peak,
        "files_bytes": size,
        "files": sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != ".built"),
    }


CHILD_TASKS: dict[str, Callable[[Case, Path], dict[str, Any]]] = {
    "build": task_build,
    "reference": task_reference,
    "load": task_load,
    "drop": task_drop,
    "cpu": task_cpu,
    "shared": task_shared,
}


def child_main(argv: list[str]) -> int:
    """``--child FAMILY CASE TASK FOLDER``: run one task and print ``RESULT <json>``."""
    family, name, task, folder = argv
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    module = importlib.import_module(f"scale.{family}")
    case = next(c for c in module.CASES if c.name == name)
    case.family = family
    if task != "build":
        _setup(case)
    result = CHILD_TASKS[task](case, Path(folder))
    result["rss_end_bytes"] = rss()
    result["process_peak_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------------------------------------- parent side
def run_child(case: Case, task: str, folder: Path, timeout: float = 1500) -> dict[str, Any]:
    """Run one task in a fresh interpreter; its result, or ``{"error": ...}`` (the tail of its output)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", case.family, case.name, task, str(folder)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), str(SCRIPTS)])}
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-12:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    out = json.loads(lines[-1][len("RESULT ") :])
    out["child_wall_s"] = time.perf_counter() - start
    return out


def run_case(
    case: Case,
    tasks: Iterable[str] = TASKS,
    *,
    rebuild: bool = False,
    keep: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Build ``case``'s checkpoint (unless built), run ``tasks`` each in a fresh subprocess, return the row."""
    folder = case_folder(case)
    row: dict[str, Any] = {
        "reward": case.reward,
        "family": case.family,
        "dtype": case.dtype,
        "layout": case.layout,
        "notes": case.notes,
        "date": _dt.date.today().isoformat(),
    }
    if rebuild or not (folder / ".built").is_file():
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        log(f"[{case.name}] build ...")
        row["build"] = run_child(case, "build", folder)
        log(f"[{case.name}] build: {_short(row['build'])}")
        if "error" in row["build"]:
            return row
    for task in tasks:
        log(f"[{case.name}] {task} ...")
        row[task] = run_child(case, task, folder)
        log(f"[{case.name}] {task}: {_short(row[task])}")
    row["checks"] = checks(row)
    if not keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return row


def _short(result: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in result.items() if k not in ("scores", "files")})[:600]


def checks(row: Mapping[str, Any]) -> dict[str, bool | None]:
    """The issue's goals for one row: load peak <= 1.1x the reference's; plan bytes = loaded bytes (safetensors);
    drop frees >= 90% and wakes bit-identical; the shared model constructed once; the forward finite, in range."""
    ref, load, drop = row.get("reference", {}), row.get("load", {}), row.get("drop", {})
    shared = row.get("shared", {})
    out: dict[str, bool | None] = {}
    if ref.get("load_peak_bytes") and load.get("load_peak_bytes"):
        out["load_peak_le_1.1x_reference"] = load["load_peak_bytes"] <= 1.1 * ref["load_peak_bytes"]
    if load.get("plan_bytes") is not None:
        out["plan_equals_loaded"] = load["plan_bytes"] == load.get("loaded_bytes")
    if "finite" in load:
        out["forward_finite_in_range"] = bool(load["finite"] and load["in_range"])
    if drop.get("freed_fraction") is not None:
        out["drop_frees_ge_90pct"] = drop["freed_fraction"] >= 0.9
        out["drop_wakes_bit_identical"] = bool(drop["tensors_bit_identical"] and drop["scores_bit_identical"])
    if "tensors_bit_identical" in row.get("cpu", {}):
        out["cpu_wakes_bit_identical"] = bool(
            row["cpu"]["tensors_bit_identical"] and row["cpu"]["scores_bit_identical"]
        )
    if "constructions" in shared:
        out["shared_model_loaded_once"] = shared["constructions"] == 1 and bool(shared["same_instance"])
    return out


# --------------------------------------------------------------------------------------------- results file
def read_rows(path: Path = RESULTS) -> dict[str, Any]:
    if not path.is_file():
        return {}
    return dict(json.loads(path.read_text(encoding="utf-8")).get("rows", {}))


def write_rows(rows: Mapping[str, Mapping[str, Any]], path: Path = RESULTS, command: str | None = None) -> Path:
    """Merge ``rows`` (case name -> row) into ``path`` by name (rows of other cases are kept) and write the
    standard results record (``benchmarks/results_io.py``) with its figures made from every row."""
    from results_io import dumps, machine

    merged = {**read_rows(path), **{k: dict(v) for k, v in rows.items()}}
    merged = dict(sorted(merged.items()))
    figures = [fig for name, row in merged.items() for fig in figures_of(name, row)]
    import torch

    record = {
        "script": "scale_check.py",
        "date": max((r.get("date", "") for r in merged.values()), default=_dt.date.today().isoformat()),
        "machine": machine(),
        "torch": torch.__version__.split("+")[0],
        "command": command or "flock /tmp/rewardzoo-heavy.lock python scripts/scale_check.py",
        "figures": figures,
        "rows": merged,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    text = dumps({k: v for k, v in record.items() if k != "rows"})
    rows_text = json.dumps(merged, indent=1, sort_keys=True)
    path.write_text(text.rstrip()[:-1].rstrip() + ',\n "rows": ' + rows_text.replace("\n", "\n ") + "\n}\n")
    return path


def figures_of(name: str, row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The benchmark figures (results_io schema) of one row: load peak and time vs the reference, plan vs loaded
    bytes, seconds and memory per sample, drop's RSS freed and wake vs cold load."""
    from results_io import figure, measure

    fid = f"scale.{name}"
    rewards = [row["reward"]]
    date = row.get("date")
    ref, load, drop, cpu = (row.get(k) or {} for k in ("reference", "load", "drop", "cpu"))
    shared = row.get("shared") or {}
    size = f"{name}, real size, {row.get('dtype')}"
    out = []

    def add(fig: dict[str, Any]) -> None:
        fig["date"] = date
        out.append(fig)

    if "error" not in load and "load_peak_bytes" in load:
        base = None if "load_peak_bytes" not in ref else measure("reference loader", ref["load_peak_bytes"] / MB, "MB")
        add(
            figure(
                f"{fid}.load.peak",
                f"peak RSS added by loading, {size}",
                measure("rewardzoo", load["load_peak_bytes"] / MB, "MB"),
                baseline=base,
                ratio=load["load_peak_bytes"] / ref["load_peak_bytes"] if base else None,
                ratio_label="rewardzoo / reference",
                goal="<= 1.1",
                rewards=rewards,
            )
        )
        base = None if "load_s" not in ref else measure("reference loader", ref["load_s"], "s")
        add(
            figure(
                f"{fid}.load.time",
                f"load time, {size}",
                measure("rewardzoo", load["load_s"], "s"),
                baseline=base,
                ratio=load["load_s"] / ref["load_s"] if base else None,
                ratio_label="rewardzoo / reference",
                rewards=rewards,
            )
        )
        if load.get("plan_bytes") is not None:
            add(
                figure(
                    f"{fid}.plan",
                    f"`rewardzoo plan` weight bytes vs the loaded parameters + buffers, {size}",
                    measure("plan", load["plan_bytes"] / MB, "MB"),
                    baseline=measure("loaded", load["loaded_bytes"] / MB, "MB"),
                    ratio=load["plan_bytes"] / load["loaded_bytes"],
                    ratio_label="plan / loaded",
                    goal="= 1",
                    rewards=rewards,
                    notes=load.get("plan_from"),
                )
            )
        n = load.get("samples_per_call", 1)
        add(
            figure(
                f"{fid}.forward.time",
                f"CPU seconds per real-sized sample ({n} per call, {load.get('threads')} threads), {size}",
                measure("rewardzoo", load["s_per_sample"], "s"),
                rewards=rewards,
            )
        )
        add(
            figure(
                f"{fid}.forward.memory",
                f"peak RSS added per real-sized sample during a call, {size}",
                measure("rewardzoo", load["activation_bytes_per_sample"] / MB, "MB"),
                rewards=rewards,
            )
        )
    if "freed_fraction" in drop and drop["freed_fraction"] is not None:
        add(
            figure(
                f"{fid}.drop.rss",
                f"RSS freed by sleep() with offload: drop, {size}",
                measure("RSS freed", (drop["rss_awake_bytes"] - drop["rss_asleep_bytes"]) / MB, "MB"),
                baseline=measure("weight bytes", drop["weight_bytes"] / MB, "MB"),
                ratio=drop["freed_fraction"],
                ratio_label="freed / weight bytes",
                goal=">= 0.9",
                rewards=rewards,
                notes="wake bit-identical"
                if drop.get("tensors_bit_identical") and drop.get("scores_bit_identical")
                else "wake NOT bit-identical",
            )
        )
        if load.get("load_s"):
            add(
                figure(
                    f"{fid}.drop.wake",
                    f"wake from offload: drop vs a cold load, {size}",
                    measure("drop wake", drop["wake_s"], "s"),
                    baseline=measure("cold load", load["load_s"], "s"),
                    ratio=drop["wake_s"] / load["load_s"],
                    ratio_label="wake / cold load",
                    rewards=rewards,
                )
            )
    if "wake_s" in cpu and load.get("load_s"):
        add(
            figure(
                f"{fid}.cpu.wake",
                f"wake from offload: cpu (weights already on the CPU) vs a cold load, {size}",
                measure("cpu wake", cpu["wake_s"], "s"),
                baseline=measure("cold load", load["load_s"], "s"),
                ratio=cpu["wake_s"] / load["load_s"],
                ratio_label="wake / cold load",
                rewards=rewards,
            )
        )
    if "rss_added_bytes" in shared and load.get("loaded_bytes"):
        add(
            figure(
                f"{fid}.shared",
                f"train + eval entries naming the same model: RSS added (constructions: {shared['constructions']}), {size}",
                measure("two entries", shared["rss_added_bytes"] / MB, "MB"),
                baseline=measure("one model's weights", load["loaded_bytes"] / MB, "MB"),
                ratio=shared["rss_added_bytes"] / load["loaded_bytes"],
                ratio_label="RSS added / weight bytes",
                goal="~ 1",
                rewards=rewards,
            )
        )
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child_main(sys.argv[2:]))
    print(__doc__)
