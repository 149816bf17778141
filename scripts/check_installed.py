"""Check an installed rewardzoo as a user has it (``scripts/test`` steps 2-4).

    cd SOMEWHERE_ELSE && ENV/bin/python /path/to/scripts/check_installed.py [--extra all] [--demo-complete]

Run with the environment's interpreter from a folder outside the checkout, so that ``import rewardzoo`` finds
the installed package (it fails when it finds the checkout). It runs the ``rewardzoo`` console script of that
environment the way a user does, and fails with the reason on:

- ``rewardzoo list`` (table and ``--json``) not listing every shipped card, or ``rewardzoo card NAME`` failing or
  printing another card, for any shipped card;
- ``rewardzoo demo`` failing, or (``--demo-complete``) skipping a reward whose extra is installed for anything
  but the add-ons its card names (``add_ons``: modules installed beside the extra with ``--no-deps``);
- a card's ``implementation`` that does not import, other than for a missing third-party module that the card's
  extra requires; a module of the package (``pkgutil.walk_packages``) that does not import, other than for a
  missing third-party module that one of rewardzoo's extras requires (or, for a trainer adapter, the trainer
  it adapts, when that is on no index: Flow-Factory). With ``--extra E``, a missing module
  that ``E`` requires fails too: that extra is installed, so its modules must be.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as metadata
import importlib.util
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
#: trainers an adapter module imports as its subject (not on PyPI, so in no extra); only for that module
TRAINERS = {"rewardzoo.integrations.flow_factory": {"flow-factory"}}


def run(*args: str) -> str:
    exe = Path(sys.executable).parent / "rewardzoo"
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(
            f"check_installed: `rewardzoo {' '.join(args)}` exited {done.returncode}:\n"
            f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", help="the extra this environment was installed with (all, dev, ...)")
    parser.add_argument(
        "--demo-complete",
        action="store_true",
        help="fail when the demo skips a reward for a module an installed extra requires",
    )
    args = parser.parse_args(argv)

    import rewardzoo
    from rewardzoo.catalog.extras import canonical, distribution_of, requirements
    from rewardzoo.errors import MissingExtraError
    from rewardzoo.registry import builtin, missing_modules, resolve

    where = Path(rewardzoo.__file__).resolve()
    if CHECKOUT in where.parents:
        raise SystemExit(
            f"check_installed: rewardzoo was imported from the checkout ({where}); run this from "
            "another folder with the environment's interpreter"
        )
    reqs = requirements()
    optional = set().union(*(deps for extra, deps in reqs.items() if extra)) - reqs[None]
    installed = reqs.get(canonical(args.extra), set()) if args.extra else reqs[None]
    if args.extra and canonical(args.extra) not in reqs:
        raise SystemExit(
            f"check_installed: rewardzoo has no extra {args.extra!r} (extras: {sorted(e for e in reqs if e)})"
        )
    problems: list[str] = []
    tolerated: dict[str, set[str]] = {}

    def missing_is_optional(where_: str, exc: ImportError, allowed: set[str]) -> None:
        name = getattr(exc, "name", None) or ""
        dist = distribution_of(name) if name else ""
        if not isinstance(exc, ModuleNotFoundError) or not name or name.split(".")[0] == "rewardzoo":
            problems.append(f"{where_}: {type(exc).__name__}: {exc}")
        elif importlib.util.find_spec(name.split(".")[0]) is not None:
            problems.append(f"{where_}: {exc} although '{name.split('.')[0]}' is installed")
        elif dist not in allowed:
            problems.append(f"{where_}: needs '{name}', which no extra that could hold it requires")
        elif dist in installed:
            problems.append(
                f"{where_}: needs '{name}', which the installed extra {args.extra or 'core'!r} requires but is missing"
            )
        else:
            tolerated.setdefault(dist, set()).add(where_)

    # list and card, as a user runs them
    cards = builtin()
    table = run("list")
    listed = {row["name"] for row in json.loads(run("list", "--json"))}
    problems += [f"`rewardzoo list --json` lacks {n}" for n in sorted(set(cards) - listed)]
    problems += [f"`rewardzoo list` lacks {n}" for n in sorted(cards) if not re.search(rf"\b{n}\b", table)]
    for name in sorted(cards):
        text = run("card", name)
        if not text.lstrip().startswith(f"# {name}\n") and f"\n# {name}\n" not in text:
            problems.append(f"`rewardzoo card {name}` did not print that card")

    # every card's implementation, imported the way the loader imports it
    for name, entry in sorted(cards.items()):
        try:
            resolve(name)
        except MissingExtraError as exc:
            allowed = reqs.get(canonical(entry.extra), set()) if entry.extra else set()
            missing_is_optional(f"card {name} ({entry.implementation})", exc.__cause__ or exc, allowed)
        except Exception as exc:
            problems.append(f"card {name} ({entry.implementation}): {type(exc).__name__}: {exc}")

    # every module of the package
    modules = ["rewardzoo"] + [
        m.name for m in pkgutil.walk_packages(rewardzoo.__path__, "rewardzoo.", onerror=lambda n: None)
    ]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            missing_is_optional(f"module {module}", exc, optional | TRAINERS.get(module, set()))
        except Exception as exc:
            problems.append(f"module {module}: {type(exc).__name__}: {exc}")

    # the demo, from this folder
    demo = run("demo")
    skipped = re.search(r"^skipped \(extra not installed\): (.*)$", demo, re.M)
    for item in re.findall(r"(\w+) \(", skipped.group(1)) if args.demo_complete and skipped else []:
        extra, add_ons = cards[item].extra, cards[item].add_ons
        lacking = [m for m in missing_modules(extra, add_ons) if m not in add_ons]
        if reqs.get(canonical(extra), set()) <= installed and lacking:
            problems.append(f"the demo skipped {item}, whose extra '{extra}' is installed, for {', '.join(lacking)}")

    for problem in problems:
        print(f"check_installed: {problem}", file=sys.stderr)
    if problems:
        return 1
    notes = "; ".join(f"{d} (needed by {len(w)})" for d, w in sorted(tolerated.items()))
    print(
        f"check_installed: rewardzoo {metadata.version('rewardzoo')} at {where.parent}: list, {len(cards)} "
        f"cards, demo and {len(modules)} modules checked"
        + (f"; optional, not installed (modules and cards that need it): {notes}" if notes else "")
        + (f"\ncheck_installed: the demo skipped {skipped.group(1)}" if skipped else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
