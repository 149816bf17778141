"""A missing weight with no hub: seconds to the error and warning lines, for ``clip_score``, ``pickscore``, ``hpsv2``.

Each case runs ``rewardzoo score NAME --input m.jsonl --out out.jsonl`` in a fresh process with an empty Hugging
Face cache (``HF_HOME`` and ``TORCH_HOME`` in a temporary folder) and ``HF_HUB_OFFLINE`` unset, on a machine where
the hub cannot be reached (the real case: the process tries, and fails). ``--offline`` adds the same runs with
``HF_HUB_OFFLINE=1``. Measured: wall seconds from start to exit, the lines of stderr that are warnings or retries
(``warning`` / ``retry`` / ``retrying`` in them, case-insensitive), the exit status and the error's last line.

``--checkout PATH`` measures another checkout (e.g. main before the change) with the same script; the figures
go to ``benchmarks/results/missing_weights/missing_weights.json`` (a folder of its own: not a figures file of
the Benchmarks page) under ``--label`` (default ``rewardzoo``), keeping the other
labels' figures, so a before/after pair is two runs::

    python benchmarks/missing_weights.py --checkout /path/to/main --label before
    python benchmarks/missing_weights.py --label after

Bounded: each run has a 300 s limit.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT = HERE / "results" / "missing_weights" / "missing_weights.json"  # not a figures file (build_docs)
REWARDS = ("clip_score", "pickscore", "hpsv2")
_WARNING = re.compile(r"warn|retry|retrying", re.IGNORECASE)


def _manifest(folder: Path) -> Path:
    from PIL import Image

    Image.new("RGB", (32, 32), (120, 30, 200)).save(folder / "a.png")
    manifest = folder / "m.jsonl"
    manifest.write_text(json.dumps({"image": "a.png", "prompt": "a purple square"}) + "\n")
    return manifest


def run_case(name: str, checkout: Path, folder: Path, offline: bool) -> dict:
    """One ``rewardzoo score`` run of reward ``name`` from ``checkout``, with an empty cache."""
    home = folder / f"home-{name}-{int(offline)}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "TORCH_HOME"))}
    env.update(
        PYTHONPATH=str(checkout),
        HF_HOME=str(home / "hf"),
        TORCH_HOME=str(home / "torch"),
        XDG_CACHE_HOME=str(home / "cache"),
    )
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    command = [sys.executable, "-m", "rewardzoo.cli", "score", name, "--input", str(folder / "m.jsonl")]
    command += ["--out", str(folder / f"out-{name}-{int(offline)}.jsonl"), "--quiet"]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, cwd=folder, capture_output=True, text=True, timeout=300)
        code, err = done.returncode, done.stderr
    except subprocess.TimeoutExpired as exc:
        code, err = None, (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    seconds = time.perf_counter() - start
    lines = [line for line in err.splitlines() if line.strip()]
    return {
        "reward": name,
        "offline": offline,
        "seconds": round(seconds, 2),
        "warning_lines": sum(1 for line in lines if _WARNING.search(line)),
        "stderr_lines": len(lines),
        "exit": code,
        "error": next((line for line in reversed(lines) if "error" in line.lower()), lines[-1] if lines else "")[:2000],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", default=str(HERE.parent), help="the rewardzoo checkout to measure")
    parser.add_argument("--label", default="rewardzoo", help="the name of this run in the results file")
    parser.add_argument("--offline", action="store_true", help="also measure with HF_HUB_OFFLINE=1")
    parser.add_argument("--reward", action="append", choices=REWARDS, help="only these rewards (repeatable)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rewardzoo-missing-") as tmp:
        folder = Path(tmp)
        _manifest(folder)
        for name in args.reward or REWARDS:
            for offline in (False, True) if args.offline else (False,):
                row = run_case(name, Path(args.checkout).resolve(), folder, offline)
                rows.append(row)
                print(
                    f"{name:12s} offline={int(offline)} {row['seconds']:7.2f} s  {row['warning_lines']:3d} warning "
                    f"lines  exit {row['exit']}\n    {row['error'][:400]}",
                    flush=True,
                )
    old = json.loads(RESULT.read_text()) if RESULT.is_file() else {}
    runs = dict(old.get("runs", {}))
    runs[args.label] = {
        "date": _dt.date.today().isoformat(),
        "checkout": args.checkout,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores",
        "rows": rows,
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps({"script": "missing_weights.py", "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
