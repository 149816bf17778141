"""Machine-readable benchmark results: every script writes ``benchmarks/results/<script stem>.json``.

The documentation site's Benchmarks page (``docs/benchmarks.md``) and each model card's ``## Speed`` figures are
generated from these files by ``scripts/build_docs.py``; nobody copies a figure by hand.

File layout::

    {"script": "bench_image.py", "date": "2026-12-01", "machine": "Linux x86_64, 2 CPU cores",
     "torch": "2.4.1" | null, "command": "python benchmarks/bench_image.py --quick",
     "figures": [FIGURE, ...]}

    FIGURE = {"id": "image.preprocess.from_pil",           # stable key, unique over all result files
              "title": "CLIP preprocessing, 32 images 512x512, tensor path from PIL",   # incl. the workload
              "baseline": {"label": "open_clip PIL", "value": 96.2, "unit": "ms"} | null,
              "value": {"label": "rewardzoo", "value": 19.5, "unit": "ms"},
              "ratio": 4.93 | null, "ratio_label": "x faster" | "async/sync" | ...,
              "goal": ">= 3x" | null,
              "rewards": ["clip_score", ...],                 # registry names (model cards) it belongs to
              "date": "2026-12-01",                           # the run that measured this figure
              "notes": "..."}                                 # optional

A script that runs only some of its parts (``--part``, ``--only``) passes the id prefixes it measured as
``parts``: figures of the other parts are kept from the previous file, with their own ``date``, so one
partial run does not erase the rest. The top-level ``date`` is the newest figure's date.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _round(x: float | None, digits: int = 4) -> float | None:
    """``x`` to ``digits`` significant digits (benchmark noise is far larger), for short diffs."""
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x) or x == 0:
        return x
    return float(f"{x:.{digits}g}")


def measure(label: str, value: float, unit: str) -> dict:
    """One side of a figure: ``{"label", "value", "unit"}``."""
    return {"label": label, "value": _round(value), "unit": unit}


def figure(
    id: str,
    title: str,
    value: dict,
    *,
    baseline: dict | None = None,
    ratio: float | None = None,
    ratio_label: str | None = None,
    goal: str | None = None,
    rewards: Iterable[str] = (),
    notes: str | None = None,
) -> dict:
    """A figure record (see the module docstring); ``value`` / ``baseline`` come from :func:`measure`."""
    fig = {
        "id": id,
        "title": title,
        "baseline": baseline,
        "value": value,
        "ratio": _round(ratio),
        "ratio_label": ratio_label if ratio is not None else None,
        "goal": goal,
        "rewards": sorted(rewards),
    }
    if notes:
        fig["notes"] = notes
    return fig


def machine() -> str:
    """A short description of the machine: OS, architecture, CPU count, GPU when torch sees one."""
    desc = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores"
    torch = sys.modules.get("torch")  # never import torch just for this
    if torch is not None:
        try:
            if torch.cuda.is_available():
                desc += f", {torch.cuda.get_device_name(0)}"
        except Exception:
            pass
    return desc


def torch_version() -> str | None:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def print_figures(figures: list[dict]) -> None:
    """One line per figure: its id, value against baseline, and ratio."""
    for f in figures:
        base = f["baseline"]
        print(
            f"{f['id']}: {f['value']['value']} {f['value']['unit']} vs {base['value']} {base['unit']} -> "
            f"{f['ratio']} {f['ratio_label']}"
        )


def write_results(
    script: str, figures: list[dict], *, parts: Iterable[str] | None = None, path: Path | None = None
) -> Path:
    """Write ``figures`` to ``benchmarks/results/<stem of script>.json`` and return the path.

    ``parts``: id prefixes this run measured. Figures of the previous file whose id starts with none of
    them are kept (a partial run). ``None``: the run measured everything; the previous file is replaced.
    """
    name = Path(script).name
    path = path or RESULTS_DIR / f"{Path(name).stem}.json"
    today = _dt.date.today().isoformat()
    ids = [f["id"] for f in figures]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"duplicate figure ids: {dup}")
    new = [{**f, "date": f.get("date") or today} for f in figures]
    all_figures, kept = new, []
    command = " ".join(["python", f"benchmarks/{name}", *sys.argv[1:]])
    commands = [command]
    if parts is not None and path.is_file():
        prefixes = [p.rstrip(".") + "." for p in parts]

        def part(fid: str) -> str | None:
            return next((p for p in prefixes if (fid + ".").startswith(p)), None)

        previous = json.loads(path.read_text(encoding="utf-8"))
        old = previous.get("figures", [])
        kept = [f for f in old if part(f["id"]) is None and f["id"] not in ids]
        # the old order of the parts; a re-measured part takes the place of its old figures
        all_figures, placed = [], set()
        for f in old:
            p = part(f["id"])
            if p is None:
                if f["id"] not in ids:
                    all_figures.append(f)
            elif p not in placed:
                placed.add(p)
                all_figures += [n for n in new if part(n["id"]) == p]
        all_figures += [n for n in new if part(n["id"]) not in placed]
        if kept:  # the commands that wrote the kept figures, then this one
            commands = list(dict.fromkeys([*str(previous.get("command") or "").split("; "), command]))
            commands = [c for c in commands if c]
    record = {
        "script": name,
        "date": max(f["date"] for f in all_figures) if all_figures else today,
        "machine": machine(),
        "torch": torch_version(),
        "command": "; ".join(commands),
        "figures": all_figures,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(record), encoding="utf-8")
    print(f"\nwrote {len(new)} figures to {path}" + (f" (kept {len(kept)} from the previous run)" if kept else ""))
    return path


def dumps(record: dict) -> str:
    """JSON with one line per key of the record and of each figure (short, readable diffs)."""

    def one(v) -> str:
        return json.dumps(v, ensure_ascii=False)

    head = [f" {one(k)}: {one(v)}" for k, v in record.items() if k != "figures"]
    figs = [
        "  {\n" + ",\n".join(f"   {one(k)}: {one(v)}" for k, v in f.items()) + "\n  }"
        for f in record.get("figures", [])
    ]
    return "{\n" + ",\n".join(head + [' "figures": [\n' + ",\n".join(figs) + "\n ]"]) + "\n}\n"
