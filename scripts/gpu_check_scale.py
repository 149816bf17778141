"""The real-scale table on CUDA, for a session that is lent a GPU (prepared; runs only where CUDA is present).

For each case of ``scripts/scale/`` (the cases of ``scripts/scale_check.py``; ``--only`` picks some): build its
checkpoint (real architecture, real size, random weights, the published layout), then, in a fresh subprocess
(``scripts/scale/common.py``, task ``gpu``), on ``cuda``:

1. load: seconds, ``torch.cuda.memory_allocated`` added, ``max_memory_allocated`` during the load;
2. one call on one real-sized sample, twice: seconds per sample (the second call) and the activation peak per
   sample (``max_memory_allocated`` over the call minus the allocation before it);
3. ``offload: drop`` and ``cpu``: ``memory_allocated`` awake and asleep (freed / weight bytes, goal >= 0.9), wake
   seconds, tensors and scores bit-identical after the wake.

The rows gain a ``gpu`` task in ``benchmarks/results/scale.json`` (merged by case; the CPU figures are kept) and,
with ``--copy-to DIR``, the file is also written there (``$OUT`` on a lent machine). Rerun
``python scripts/build_docs.py`` afterwards: the cards, the Benchmarks page and ``rewardzoo plan``'s CUDA
activation figures come from those rows. Without CUDA it prints ``{"skipped": ...}`` and exits 0. Exits 1 when a
check fails.

Run: python scripts/gpu_check_scale.py [--only NAME ...] [--copy-to DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale.common import RESULTS, cases, run_case, write_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="cases to run (default: all)")
    parser.add_argument("--copy-to", type=Path, help="also write scale.json into this folder")
    parser.add_argument("--keep", action="store_true", help="keep the built checkpoints")
    args = parser.parse_args(argv)
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if not cuda:
        print(json.dumps({"skipped": "no CUDA device"}))
        return 0
    found = cases()
    unknown = sorted(set(args.only or ()) - set(found))
    if unknown:
        parser.error(f"unknown cases {unknown}; scripts/scale_check.py --list shows them")
    failed: dict[str, list[str]] = {}
    for name in args.only or list(found):
        row = run_case(found[name], ["gpu"], keep=args.keep)
        write_rows({name: row}, command="python " + " ".join(sys.argv))
        checks = {k: v for k, v in (row.get("checks") or {}).items() if k.startswith("gpu_")}
        print(json.dumps({name: {"gpu": row.get("gpu"), "checks": checks}}, default=str), flush=True)
        bad = [k for k, ok in checks.items() if ok is False] + (["error"] if "error" in (row.get("gpu") or {}) else [])
        if bad:
            failed[name] = bad
    if args.copy_to:
        args.copy_to.mkdir(parents=True, exist_ok=True)
        shutil.copy(RESULTS, args.copy_to / RESULTS.name)
    if failed:
        print(f"checks failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
