#!/usr/bin/env python
"""Generate the documentation that repeats the model cards and the benchmark results.

Sources (the only places a fact is written by hand):

- ``rewardzoo/model_cards/<name>.md``: each reward's record in the YAML front matter;
- ``benchmarks/results/<script>.json``: the figures each benchmark script wrote (schema in
  ``benchmarks/results_io.py``);
- ``rewardzoo/rewards/vlm/pairings.py``: what each judge's reference runs, and rewardzoo's default and presets.

Generated, between ``<!-- generated: ... -->`` and ``<!-- end generated -->`` markers:

- README.md: the reward table (``reward table``), the Benchmarks figures (``benchmark figures``) and the
  reference packages (``reference packages``, from ``rewardzoo.rewards.references.REFERENCES``);
- the cards of the rewards with a reference package: a ``## Reference package`` section (``reference package``);
- each card's ``## Speed`` section: the figures whose ``rewards`` name that card (``speed``); the
  hand-written prose around the block must not contain measured numbers (checked here);
- benchmarks/README.md: the latest run of each script (``benchmark runs``);
- each judge's card: its ``## Reference pairing`` table (``pairing``) from
  ``rewardzoo/rewards/vlm/pairings.py`` (the section is added before ``## Speed`` when a card lacks it);
- each card that loads weights: its ``## Precision`` section (``precision``), what ``dtype: auto`` runs in
  and where the reference sets it, from the front matter's ``default_dtype`` and ``dtype_source`` (added
  before ``## Speed`` when a card lacks it).

    python scripts/build_docs.py            # rewrite what is out of date
    python scripts/build_docs.py --check    # exit 1 listing (with a short diff) what is out of date

Only the text between the markers (and nothing else) is rewritten; a card is re-read right before it
is written, so concurrent edits of its other sections survive.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rewardzoo.rewards.vlm.pairings import PAIRINGS  # noqa: E402  (pure data: no torch

CARDS = ROOT / "rewardzoo" / "model_cards"
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
BENCH_README = ROOT / "benchmarks" / "README.md"

END = "<!-- end generated -->"
NOTE = "<!-- written by scripts/build_docs.py from {source}: edit the source and rerun it, not this block -->"
SPEED = "## Speed"
PAIRING = "## Reference pairing"
PRECISION = "## Precision"
#: Scripts in the order the README lists them; others follow alphabetically.
SCRIPT_ORDER = (
    "bench_processor.py",
    "bench_execution.py",
    "bench_group.py",
    "bench_image.py",
    "bench_audio.py",
    "bench_video.py",
    "bench_text.py",
    "bench_integrations.py",
    "bench_differentiable.py",
    "bench_speech.py",
    "bench_report.py",
    "bench_ray.py",
    "bench_vlm.py",
    "bench_verifiers.py",
    "bench_geneval.py",
    "bench_imaging_quality.py",
    "bench_image_quality.py",
    "bench_utmos.py",
    "bench_serve.py",
    "bench_residency.py",
)
#: A measured-looking number in hand-written Speed prose: a decimal, "x1.2", or a number with a unit.
MEASURED = re.compile(
    r"(?<![\w.])(?:\d+\.\d+|x\d+(?:\.\d+)?|\d+(?:\.\d+)?\s*(?:ms|us|µs|s|x|MB|GB|kB|KB|%|"
    r"img/s|clips/s|frames/s)(?![\w/]))"
)


class DocsError(Exception):
    """The sources are inconsistent (a marker is missing, a figure names an unknown card, ...)."""


# ------------------------------------------------------------------------------------------ sources
def read_front_matter(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n") or "\n---\n" not in text:
        raise DocsError(f"{rel(path)}: no YAML front matter")
    meta = yaml.safe_load(text[4:].split("\n---\n", 1)[0])
    if not isinstance(meta, dict):
        raise DocsError(f"{rel(path)}: the front matter is not a mapping")
    return meta


def load_cards() -> dict[str, dict]:
    """Card name (file stem) -> front matter."""
    return {p.stem: read_front_matter(p) for p in sorted(CARDS.glob("*.md"))}


def load_results() -> list[dict]:
    """Every results file, in :data:`SCRIPT_ORDER`; each figure gets its file's ``script`` and defaults."""
    runs = []
    for path in sorted(RESULTS.glob("*.json")):
        try:
            run = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DocsError(f"{rel(path)}: not valid JSON ({exc})") from None
        for key in ("script", "date", "machine", "figures"):
            if key not in run:
                raise DocsError(f"{rel(path)}: the key '{key}' is missing")
        for fig in run["figures"]:
            for key in ("id", "title", "value", "rewards"):
                if key not in fig:
                    raise DocsError(f"{rel(path)}: a figure lacks '{key}': {json.dumps(fig)[:120]}")
            fig.setdefault("date", run["date"])
            fig["script"] = run["script"]
        run["path"] = path
        runs.append(run)
    order = {s: i for i, s in enumerate(SCRIPT_ORDER)}
    return sorted(runs, key=lambda r: (order.get(r["script"], len(order)), r["script"]))


def validate(cards: dict[str, dict], runs: list[dict]) -> None:
    seen: dict[str, str] = {}
    problems = [
        f"rewardzoo/rewards/vlm/pairings.py names '{name}', which has no card" for name in PAIRINGS if name not in cards
    ]
    for run in runs:
        for fig in run["figures"]:
            if fig["id"] in seen:
                problems.append(f"figure id '{fig['id']}' is in {seen[fig['id']]} and {rel(run['path'])}")
            seen[fig["id"]] = rel(run["path"])
            unknown = [r for r in fig["rewards"] if r not in cards]
            if unknown:
                problems.append(f"{rel(run['path'])}: figure '{fig['id']}' names rewards without a card: {unknown}")
    if problems:
        raise DocsError("\n".join(problems))


# ------------------------------------------------------------------------------------------ format
def num(x: float | int | None) -> str:
    """A figure's number: about three significant digits, no exponent above 1e-3."""
    if x is None:
        return ""
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == int(x) and abs(x) < 1e6:
        return str(int(x))
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}" if a >= 1000 else f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}" if a < 10 else f"{x:.1f}"
    if a >= 0.01:
        return f"{x:.3f}"
    mantissa, exp = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exp)}"


def bound(x: float) -> str:
    return ("inf" if x > 0 else "-inf") if math.isinf(x) else f"{x:g}"


def side(m: dict | None) -> str:
    if not m:
        return ""
    if m.get("value") is None:  # a transcribed figure whose side was not recorded
        return m.get("label") or ""
    unit = f" {m['unit']}" if m.get("unit") else ""
    label = f"{m['label']} " if m.get("label") else ""
    return f"{label}{num(m['value'])}{unit}"


def ratio(fig: dict) -> str:
    if fig.get("ratio") is None:
        return ""
    r = f"{fig['ratio']:.2f}" if abs(fig["ratio"]) < 10 else num(fig["ratio"])
    label = fig.get("ratio_label") or ""
    if label.startswith("x"):
        return f"**{r}x**{label[1:]}"
    return f"**{r}** {label}".rstrip()


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def what(fig: dict) -> str:
    notes = f" ({fig['notes']})" if fig.get("notes") else ""
    return cell(fig["title"] + notes)


def run_line(run: dict) -> str:
    torch = f", torch {run['torch']}" if run.get("torch") else ""
    command = f" (`{run['command']}`)" if run.get("command") else ""
    return f"`{run['script']}`: {run['date']}, {run['machine']}{torch}{command}"


# ------------------------------------------------------------------------------------------ blocks
def reward_table(cards: dict[str, dict]) -> str:
    lines = [
        "| reward | modality | kind | extra | range | better | weights | what it scores |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, meta in sorted(cards.items()):
        lo, hi = (float(b) for b in meta["score_range"])
        weights = "from a hub / local path" if meta.get("download", True) else "none needed"
        lines.append(
            f"| `{name}` | {meta['modality']} | {meta['kind']} | {meta.get('extra') or 'core'} | "
            f"[{bound(lo)}, {bound(hi)}] | {'higher' if meta['higher_is_better'] else 'lower'} | "
            f"{weights} | {cell(meta.get('summary', ''))} |"
        )
    return "\n".join(lines)


def references_table() -> str:
    from rewardzoo.rewards.references import REFERENCES

    lines = [
        "| reward | reference package | runs in its own environment | why it needs one / why not |",
        "|---|---|---|---|",
    ]
    for name, ref in sorted(REFERENCES.items()):
        runs = f"yes: `{'`, `'.join(ref.requirements)}`" if ref.runs else "no"
        lines.append(f"| `{name}` | {ref.package} | {runs} | {cell(ref.why)} |")
    return "\n".join(lines)


def reference_block(name: str) -> str:
    from rewardzoo.rewards.references import REFERENCES

    ref = REFERENCES[name]
    if not ref.runs:
        return f"The reference package, {ref.package}, is not wrapped here. Why: {ref.why}."
    return (
        f"`reference: true` on an entry scores it with the reference package, {ref.package}, through its own "
        f"API (`{ref.wrapper}`), in an environment rewardzoo builds once from `{'`, `'.join(ref.requirements)}` "
        f"(with this environment's torch: `system_site_packages`). It needs one because it {ref.why}. "
        f"`rewardzoo compare-reference {name} --input samples.jsonl` scores the same samples both ways and "
        f"prints the per-sample differences and their maximum."
    )


REFERENCE_SECTION = "## Reference package"


def reference_card_text(text: str, name: str, block: str, where: str) -> str:
    """The card with its Reference package section (added before the Speed section the first time)."""
    if "<!-- generated: reference package -->" not in text:
        a, _ = speed_section(text, where)
        text = f"{text[:a]}{REFERENCE_SECTION}\n\n<!-- generated: reference package -->\n{END}\n\n{text[a:]}"
    return splice(text, "reference package", block, where)


def figures_table(figures: list[dict], *, script_column: bool) -> list[str]:
    head = (
        "| what | script | date | baseline | rewardzoo | ratio | goal |"
        if script_column
        else "| measurement | baseline | rewardzoo | ratio | goal | run |"
    )
    lines = [head, "|---" * head.count(" | ") + "|---|"]
    for fig in figures:
        cells = [what(fig)]
        if script_column:
            cells += [f"`{fig['script']}`", fig["date"]]
        cells += [
            cell(side(fig.get("baseline"))),
            cell(side(fig["value"])),
            cell(ratio(fig)),
            cell(fig.get("goal") or ""),
        ]
        if not script_column:
            cells.append(f"`{fig['script']}` {fig['date']}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def benchmark_block(runs: list[dict], *, goals_only: bool) -> str:
    """The figures of every run (or only those measured against a goal), after a line per run."""
    figures = [f for run in runs for f in run["figures"] if f.get("goal") or not goals_only]
    lines = ["The latest run of each script:", ""]
    lines += [f"- {run_line(run)}" for run in runs]
    lines += [""] + figures_table(figures, script_column=True)
    if goals_only:
        total = sum(len(run["figures"]) for run in runs)
        lines += [
            "",
            f"The figures measured against a goal; all {total} are in `benchmarks/README.md`, and "
            "each reward's in its model card.",
        ]
    return "\n".join(lines)


def speed_block(name: str, runs: list[dict]) -> str:
    figs = [f for run in runs for f in run["figures"] if name in f["rewards"]]
    if not figs:
        return "No benchmark in `benchmarks/` covers this reward yet."
    used = [run for run in runs if any(f["script"] == run["script"] for f in figs)]
    lines = figures_table(figs, script_column=False)
    lines += ["", "Measured by " + "; ".join(run_line(run) for run in used) + "."]
    return "\n".join(lines)


def runs_block(runs: list[dict]) -> str:
    lines = ["| script | results | latest run | machine | torch | figures |", "|---|---|---|---|---|---|"]
    for run in runs:
        lines.append(
            f"| `{run['script']}` | `{rel(run['path'], BENCH_README.parent)}` | {run['date']} | "
            f"{cell(run['machine'])} | {run.get('torch') or ''} | {len(run['figures'])} |"
        )
    return "\n".join(lines)


def pairing_block(name: str) -> str:
    """The reward's rows of :data:`PAIRINGS` as a table; a default or preset row names what it reproduces."""

    def code(text: str) -> str:  # an id or key in backticks, a note after it as it is
        head, sep, note = text.partition(" (")
        return text if " " in head or head == "-" or head.startswith("`") else f"`{head}`{sep}{note}"

    lines = [
        "| setting | source | model | template | decoding | image bounds | frames |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in PAIRINGS[name]:
        source = (
            row.source
            if row.reference in (None, "-")
            else f"{row.source} (reproduces {row.reference.split(' (', 1)[0]})"
        )
        cells = (row.setting, source, code(row.model), code(row.template), row.decoding, row.image_bounds, row.frames)
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return "\n".join(lines)


def precision_block(meta: dict) -> str:
    """What ``dtype: auto`` runs a card's reward in, per device kind, and the reference line that sets it."""
    kinds = {"cuda": "CUDA", "mps": "MPS", "cpu": "the CPU"}
    lower = [
        f"{dtype} on {kinds[kind]}" for kind, dtype in (meta.get("default_dtype") or {}).items() if dtype != "float32"
    ]
    where = " and ".join(lower) + " and float32 on every other device" if lower else "float32 on every device"
    field = "`default_dtype`" if meta.get("default_dtype") else "no `default_dtype`: float32"
    return (
        f"`dtype: auto` (the default) resolves to {where}, the precision its reference runs in ({field}). "
        f"Where the reference sets it (`dtype_source`): {meta['dtype_source']}."
    )


# ------------------------------------------------------------------------------------------ splicing
def splice(text: str, marker: str, content: str, where: str) -> str:
    """Replace what lies between ``<!-- generated: marker -->`` and the next end marker."""
    start = f"<!-- generated: {marker} -->"
    i = text.find(start)
    if i < 0:
        raise DocsError(f"{where}: the marker '{start}' is missing")
    j = text.find(END, i)
    if j < 0:
        raise DocsError(f"{where}: no '{END}' after '{start}'")
    return text[: i + len(start)] + "\n" + content.strip("\n") + "\n" + text[j:]


def speed_section(text: str, where: str) -> tuple[int, int]:
    """Start and end offsets of a card's Speed section (its heading line to the next '## ' or the end)."""
    m = re.search(rf"^{re.escape(SPEED)}[ \t]*$", text, re.M)
    if not m:
        raise DocsError(f"{where}: no '{SPEED}' section")
    nxt = re.search(r"^## ", text[m.end() :], re.M)
    return m.start(), (m.end() + nxt.start()) if nxt else len(text)


def pairing_text(text: str, block: str, where: str) -> str:
    """The card with its Reference pairing block up to date (the section inserted before Speed if missing)."""
    if not re.search(rf"^{re.escape(PAIRING)}[ \t]*$", text, re.M):
        a, _ = speed_section(text, where)
        text = f"{text[:a]}{PAIRING}\n\n<!-- generated: pairing -->\n{END}\n\n{text[a:]}"
    elif "<!-- generated: pairing -->" not in text:
        raise DocsError(f"{where}: the '{PAIRING}' section lacks the '<!-- generated: pairing -->' block")
    return splice(text, "pairing", block, where)


def precision_text(text: str, block: str, where: str) -> str:
    """The card with its Precision block up to date (the section inserted before Speed if missing)."""
    if not re.search(rf"^{re.escape(PRECISION)}[ \t]*$", text, re.M):
        a, _ = speed_section(text, where)
        text = f"{text[:a]}{PRECISION}\n\n<!-- generated: precision -->\n{END}\n\n{text[a:]}"
    elif "<!-- generated: precision -->" not in text:
        raise DocsError(f"{where}: the '{PRECISION}' section lacks the '<!-- generated: precision -->' block")
    return splice(text, "precision", block, where)


def card_text(text: str, name: str, block: str, where: str) -> str:
    a, b = speed_section(text, where)
    section = text[a:b]
    if "<!-- generated: speed -->" not in section:  # first generation: append the block to the section
        body = section.rstrip("\n")
        trailing = section[len(body) :] or "\n"
        section = f"{body}\n\n<!-- generated: speed -->\n{END}{trailing}"
    return text[:a] + splice(section, "speed", block, where) + text[b:]


def prose_problems(text: str, where: str) -> list[str]:
    """Measured-looking numbers in a Speed section outside the generated block."""
    a, b = speed_section(text, where)
    section = text[a:b]
    i = section.find("<!-- generated: speed -->")
    j = section.find(END, i)
    prose = section if i < 0 or j < 0 else section[:i] + section[j + len(END) :]
    return [
        f"{where}: the Speed prose has the hand-written figure '{m.group(0)}' (make it a benchmark figure)"
        for m in MEASURED.finditer(prose)
    ]


# ------------------------------------------------------------------------------------------ main
def rel(path: Path, base: Path = ROOT) -> str:
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return str(path)


def targets(cards: dict[str, dict], runs: list[dict]) -> dict[Path, callable]:
    """File -> function(current text) -> the text it should have."""
    table = NOTE.format(source="the model cards' front matter") + "\n" + reward_table(cards)
    bench = NOTE.format(source="benchmarks/results/*.json") + "\n" + benchmark_block(runs, goals_only=True)
    references = NOTE.format(source="rewardzoo/rewards/references/__init__.py") + "\n" + references_table()
    out = {
        README: lambda t: splice(
            splice(splice(t, "reward table", table, "README.md"), "benchmark figures", bench, "README.md"),
            "reference packages",
            references,
            "README.md",
        ),
        BENCH_README: lambda t: splice(
            t,
            "benchmark runs",
            NOTE.format(source="benchmarks/results/*.json")
            + "\n"
            + runs_block(runs)
            + "\n\n"
            + benchmark_block(runs, goals_only=False),
            "benchmarks/README.md",
        ),
    }
    pairing_note = NOTE.format(source="rewardzoo/rewards/vlm/pairings.py")
    for name in cards:
        block = NOTE.format(source="benchmarks/results/*.json") + "\n" + speed_block(name, runs)
        where = f"rewardzoo/model_cards/{name}.md"
        if name in PAIRINGS:
            pairing = pairing_note + "\n" + pairing_block(name)
            out[CARDS / f"{name}.md"] = lambda t, n=name, b=block, p=pairing, w=where: card_text(
                pairing_text(t, p, w), n, b, w
            )
        else:
            out[CARDS / f"{name}.md"] = lambda t, n=name, b=block, w=where: card_text(t, n, b, w)

    front = NOTE.format(source="the card's front matter")
    for name, meta in cards.items():
        if meta.get("dtype_source"):
            block = front + "\n" + precision_block(meta)
            build = out[CARDS / f"{name}.md"]
            out[CARDS / f"{name}.md"] = lambda t, f=build, b=block, w=f"rewardzoo/model_cards/{name}.md": (
                precision_text(f(t), b, w)
            )

    from rewardzoo.rewards.references import REFERENCES

    for name in REFERENCES:
        if name not in cards:
            raise DocsError(f"rewardzoo/rewards/references: '{name}' has no card")
        block = NOTE.format(source="rewardzoo/rewards/references/__init__.py") + "\n" + reference_block(name)
        speed = out[CARDS / f"{name}.md"]
        out[CARDS / f"{name}.md"] = lambda t, n=name, b=block, f=speed: reference_card_text(
            f(t), n, b, f"rewardzoo/model_cards/{n}.md"
        )
    return out


def short_diff(old: str, new: str, name: str, limit: int = 30) -> str:
    lines = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), f"{name} (committed)", f"{name} (generated)", n=1, lineterm=""
        )
    )
    more = f"\n... {len(lines) - limit} more diff lines" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is out of date")
    args = ap.parse_args(argv)
    try:
        cards, runs = load_cards(), load_results()
        validate(cards, runs)
        stale, problems = [], []
        for path, build in targets(cards, runs).items():
            old = path.read_text(encoding="utf-8")  # re-read right before writing
            new = build(old)
            if path.parent == CARDS:
                problems += prose_problems(new, rel(path))
            if new != old:
                stale.append(rel(path))
                if args.check:
                    print(short_diff(old, new, rel(path)), end="\n\n")
                else:
                    path.write_text(new, encoding="utf-8")
    except DocsError as exc:
        print(f"build_docs: {exc}", file=sys.stderr)
        return 1
    for p in problems:
        print(f"build_docs: {p}", file=sys.stderr)
    if args.check and stale:
        print("out of date (run `python scripts/build_docs.py`):\n  " + "\n  ".join(stale), file=sys.stderr)
        return 1
    if not args.check:
        print(f"build_docs: rewrote {len(stale)} file(s)" + (": " + ", ".join(stale) if stale else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
