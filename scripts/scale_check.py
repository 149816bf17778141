"""The real-scale check: each flagship reward at its real size (random weights), against its reference loader.

For every case of ``scripts/scale/<family>.py`` (interface: ``scripts/scale/common.py``): build the checkpoint in
its published layout, then, each in a fresh subprocess, load it with the reference library's loader and with
rewardzoo's (time, peak RSS), compare ``rewardzoo plan``'s bytes with the loaded bytes, score one real-sized
sample (seconds and peak memory per sample), sleep and wake with ``offload: drop`` and ``cpu``, and load train +
eval entries naming the same model. Rows are merged by case name into ``benchmarks/results/scale.json`` (figures
for the Benchmarks page and the cards; ``scripts/build_docs.py`` regenerates both).

Heavy (GBs of RAM and disk, minutes per case): on demand, never in CI; on a shared machine under
``flock /tmp/rewardzoo-heavy.lock``. Checkpoints go to ``$REWARDZOO_SCALE_SCRATCH`` (default
/work/scratch/scale-check) and are deleted after each case unless ``--keep``.

Run: python scripts/scale_check.py [--only NAME ...] [--list] [--tasks load drop ...] [--keep] [--rebuild]
[--timeout SECONDS_PER_TASK]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale.common import TASKS, cases, run_case, write_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="cases to run (default: all)")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS), help="measurements to run")
    parser.add_argument("--keep", action="store_true", help="keep the built checkpoints")
    parser.add_argument("--rebuild", action="store_true", help="rebuild checkpoints even when built")
    parser.add_argument("--timeout", type=float, default=1500, help="seconds per task (default 1500)")
    parser.add_argument("--no-write", action="store_true", help="print the rows, do not write scale.json")
    args = parser.parse_args(argv)
    found = cases()
    if args.list:
        for name, case in found.items():
            print(f"{name:28s} {case.family:10s} {case.reward:22s} {case.layout}")
        return 0
    unknown = sorted(set(args.only or ()) - set(found))
    if unknown:
        parser.error(f"unknown cases {unknown}; --list shows them")
    rows = {}
    for name in args.only or list(found):
        rows[name] = run_case(found[name], args.tasks, rebuild=args.rebuild, keep=args.keep, timeout=args.timeout)
        print(json.dumps({name: rows[name].get("checks")}), flush=True)
        if not args.no_write:  # after each case: a crash later keeps what was measured
            write_rows({name: rows[name]}, command="flock /tmp/rewardzoo-heavy.lock python " + " ".join(sys.argv))
    failed = {n: [k for k, ok in r.get("checks", {}).items() if ok is False] for n, r in rows.items()}
    failed = {n: f for n, f in failed.items() if f}
    errors = [f"{n}.{t}" for n, r in rows.items() for t, v in r.items() if isinstance(v, dict) and "error" in v]
    if failed or errors:
        print(f"goals missed: {failed}; errors: {errors}")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
