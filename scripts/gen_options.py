#!/usr/bin/env python
"""Write ``rewardzoo/catalog/options.json``: each shipped reward's typed options, from its ``Options`` class.

``{registry name: {"schema": Options.model_json_schema(), "rows": Options.rows()}}`` (and ``"passes_on": true`` for
a composite, whose undeclared keys may configure its inner rewards) for every card whose class declares options (rewards sorted by name; a class declaring none is left out: its ``kwargs:`` is a free mapping).
``rewardzoo card``, the docs' reward pages and the config's JSON schema read the file, so none of them imports a
reward (torch). It imports every reward module: run it where the extras are installed (the dev environment);
``scripts/build_docs.py`` runs it when it can.

    python scripts/gen_options.py           # rewrite the file when it is out of date
    python scripts/gen_options.py --check   # exit 1 when it is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rewardzoo.catalog.options import FILE  # noqa: E402


def collect() -> dict[str, dict[str, Any]]:
    """``{name: {"schema", "rows"}}`` of the shipped rewards whose class declares options."""
    from rewardzoo.registry import builtin, resolve
    from rewardzoo.rewards.base import Reward
    from rewardzoo.rewards.options import RewardOptions

    out: dict[str, dict[str, Any]] = {}
    for name in sorted(builtin()):
        cls = resolve(name)
        options = getattr(cls, "Options", RewardOptions)
        if options is not RewardOptions:
            out[name] = {"schema": options.model_json_schema(), "rows": options.rows()}
            if getattr(cls.inner_rewards, "__func__", None) is not Reward.inner_rewards.__func__:
                out[name]["passes_on"] = True  # a composite: keys it does not declare may configure its inner rewards
    return out


def text(data: dict[str, dict[str, Any]]) -> str:
    """The file's text: stable (names sorted, each schema in pydantic's own order), one trailing newline."""
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if the file is out of date")
    args = ap.parse_args(argv)
    new = text(collect())
    old = FILE.read_text(encoding="utf-8") if FILE.is_file() else ""
    where = FILE.relative_to(ROOT)
    if new == old:
        print(f"gen_options: {where} is up to date")
        return 0
    if args.check:
        print(f"gen_options: {where} is out of date (run `python scripts/gen_options.py`)", file=sys.stderr)
        return 1
    FILE.write_text(new, encoding="utf-8")
    print(f"gen_options: rewrote {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
