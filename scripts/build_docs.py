#!/usr/bin/env python
"""Generate the documentation that repeats the model cards and the benchmark results.

Sources (the only places a fact is written by hand):

- ``rewardzoo/model_cards/<name>.md``: each reward's record in the YAML front matter (for a judge, its ``pairing:``
  rows: what each reference runs, and rewardzoo's default and presets);
- ``benchmarks/results/<script>.json``: the figures each benchmark script wrote (schema in
  ``benchmarks/results_io.py``);

Generated, between ``<!-- generated: ... -->`` and ``<!-- end generated -->`` markers:

- docs/guides/references.md: the reference packages (``reference packages``, from
  ``rewardzoo.rewards.references.REFERENCES``);
- the cards of the rewards with a reference package: a ``## Reference package`` section (``reference package``);
- each card's ``## Speed`` section: the figures whose ``rewards`` name that card (``speed``); the
  hand-written prose around the block must not contain measured numbers (checked here);
- benchmarks/README.md: the latest run of each script (``benchmark runs``);
- each judge's card: its ``## Reference pairing`` table (``pairing``) from its front matter's ``pairing:`` rows
  (:mod:`rewardzoo.catalog.pairings`; the section is added before ``## Speed`` when a card lacks it);
- each card that loads weights: its ``## Precision`` section (``precision``), what ``dtype: auto`` runs in
  and where the reference sets it, from the front matter's ``default_dtype`` and ``dtype_source`` (added
  before ``## Speed`` when a card lacks it);
- each card with a ``published:`` block: its ``## Published agreement`` table (``published``), the agreement
  figures its paper or a reference reports (what ``rewardzoo evaluate`` prints beside the measured value; added
  before ``## Speed`` when a card lacks it).

The documentation site (``mkdocs.yml``, sources under ``docs/``):

- ``docs/rewards/NAME.md``, one page per card (its facts, then its markdown body), and ``docs/rewards/index.md``,
  the table of every reward; a page whose card is gone is removed (``--check``: reported);
- each family page ``docs/rewards/families/FAMILY.md``: its members (``family members``), after the
  hand-written advice on choosing between them; the Rewards part of the nav in ``mkdocs.yml`` (``reward nav``);
- ``rewardzoo/catalog/options.json`` (``scripts/gen_options.py``, where the reward modules import: not with
  ``--check``) from each reward's ``Options``; each reward page's ``## Options`` table from it;
- ``docs/guides/config-reference.md`` from ``rewardzoo.spec.config.json_schema()``; ``docs/api.md`` from the
  public names (``rewardzoo._LAZY``); ``docs/benchmarks.md`` from ``benchmarks/results/*.json``;
- ``docs/architecture.md``: each package's docstring (``package docstrings``);
- ``rewardzoo/configs/demo.yaml``, the config ``rewardzoo demo`` runs: every card that needs no download (a card's
  ``demo:`` key adjusts its entry);
- from ``benchmarks/results/scale.json`` (``scripts/scale_check.py``): the Benchmarks page's "At real size" table,
  each reward page's "at real size" row, and the package data ``rewardzoo/catalog/scale.json`` that
  ``rewardzoo plan`` reads (:mod:`rewardzoo.catalog.measured`).

    python scripts/build_docs.py            # rewrite what is out of date
    python scripts/build_docs.py --check    # exit 1 listing (with a short diff) what is out of date
    python scripts/build_docs.py --page NAME  # print one reward's page (a plugin's too: found through the registry)

Only the text between the markers (and nothing else) is rewritten; a card is re-read right before it
is written, so concurrent edits of its other sections survive.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import math
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rewardzoo.catalog.pairings import card_pairings  # noqa: E402  (pure data: no torch)
from rewardzoo.errors import RegistryError  # noqa: E402

CARDS = ROOT / "rewardzoo" / "model_cards"
RESULTS = ROOT / "benchmarks" / "results"
SCALE = RESULTS / "scale.json"  # scripts/scale_check.py: figures + the raw rows by case
MEASURED_DATA = ROOT / "rewardzoo" / "catalog" / "scale.json"  # package data for `rewardzoo plan` (generated here)
DOCS = ROOT / "docs"
REWARD_PAGES = DOCS / "rewards"
FAMILY_PAGES = REWARD_PAGES / "families"
MKDOCS = ROOT / "mkdocs.yml"
BENCH_README = ROOT / "benchmarks" / "README.md"

END = "<!-- end generated -->"
NOTE = "<!-- written by scripts/build_docs.py from {source}: edit the source and rerun it, not this block -->"
SPEED = "## Speed"
PAIRING = "## Reference pairing"
PRECISION = "## Precision"
PUBLISHED = "## Published agreement"
#: The scripts the Benchmarks page lists first (the front doors, then each family's); a reward's own benchmark
#: follows alphabetically with the others, so adding one touches nothing here.
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
    problems: list[str] = []
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


#: A Sphinx role in a docstring (``:class:`~a.b.C```): the site shows its code span alone (:func:`roles`).
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`([^`]+)`")


def roles(text: str) -> str:
    """Docstring text with each Sphinx role as the code span Sphinx would show (``~a.b.C``: ``C``)."""

    def shown(m: re.Match) -> str:
        target = m.group(1)
        title = re.fullmatch(r"(.+?)\s*<.+>", target)
        name = title.group(1) if title else target.rsplit(".", 1)[-1] if target.startswith("~") else target
        return f"`{name}`"

    return ROLE.sub(shown, text)


def what(fig: dict) -> str:
    notes = f" ({fig['notes']})" if fig.get("notes") else ""
    return cell(fig["title"] + notes)


def run_line(run: dict) -> str:
    torch = f", torch {run['torch']}" if run.get("torch") else ""
    command = f" (`{run['command']}`)" if run.get("command") else ""
    return f"`{run['script']}`: {run['date']}, {run['machine']}{torch}{command}"


# ------------------------------------------------------------------------------------------ blocks
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


def pairing_block(meta: dict) -> str:
    """A judge card's ``pairing:`` rows as a table; a default or preset row names what it reproduces."""

    def code(text: str) -> str:  # an id or key in backticks, a note after it as it is
        head, sep, note = text.partition(" (")
        return text if " " in head or head == "-" or head.startswith("`") else f"`{head}`{sep}{note}"

    lines = [
        "| setting | source | model | template | decoding | image bounds | frames |",
        "|---|---|---|---|---|---|---|",
    ]
    try:
        rows = card_pairings(meta, f"rewardzoo/model_cards/{meta['name']}.md")
    except RegistryError as exc:
        raise DocsError(str(exc)) from None
    for row in rows:
        source = (
            row.source
            if row.reference in (None, "-")
            else f"{row.source} (reproduces {row.reference.split(' (', 1)[0]})"
        )
        cells = (row.setting, source, code(row.model), code(row.template), row.decoding, row.image_bounds, row.frames)
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return "\n".join(lines)


def published_block(meta: dict) -> str:
    """The card's ``published:`` figures as a table (benchmark, metric, value, source)."""
    lines = [
        "Agreement with human judgements as its paper or a reference reports it (`published:`); "
        "`rewardzoo evaluate` prints the figure beside the measured one when both the benchmark and the metric match "
        "(docs/evaluate.md).",
        "",
        "| benchmark (`--benchmark`) | metric | published | source |",
        "|---|---|---|---|",
    ]
    for entry in meta["published"]:
        value = entry["value"]
        shown = f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else cell(str(value))
        lines.append(
            f"| `{cell(str(entry['benchmark']))}` | {cell(str(entry['metric']))} | {shown} | "
            f"{cell(str(entry['source']))} |"
        )
    return "\n".join(lines)


def precision_block(meta: dict) -> str:
    """What ``dtype: auto`` runs a card's reward in, per device kind, and the reference line that sets it."""
    kinds = {"cuda": "CUDA", "mps": "MPS", "cpu": "the CPU"}
    lower = [
        f"{dtype} on {kinds[kind]}" for kind, dtype in (meta.get("default_dtype") or {}).items() if dtype != "float32"
    ]
    where = " and ".join(lower) + " and float32 on every other device" if lower else "float32 on every device"
    field = "`default_dtype`" if meta.get("default_dtype") else "no `default_dtype`: float32"
    rows = [
        f"`{option}: {value}` resolves to "
        + (" and ".join(f"{d} on {kinds[k]}" for k, d in table.items() if d != "float32") or "float32")
        + " and float32 on every other device"
        for option, per_value in (meta.get("default_dtype_when") or {}).items()
        for value, table in per_value.items()
    ]
    selected = f" Where an entry selects it (`default_dtype_when`), {'; '.join(rows)}." if rows else ""
    return (
        f"`dtype: auto` (the default) resolves to {where}, the precision its reference runs in ({field}).{selected} "
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


def published_text(text: str, block: str, where: str) -> str:
    """The card with its Published agreement block up to date (the section inserted before Speed if missing)."""
    if not re.search(rf"^{re.escape(PUBLISHED)}[ \t]*$", text, re.M):
        a, _ = speed_section(text, where)
        text = f"{text[:a]}{PUBLISHED}\n\n<!-- generated: published -->\n{END}\n\n{text[a:]}"
    elif "<!-- generated: published -->" not in text:
        raise DocsError(f"{where}: the '{PUBLISHED}' section lacks the '<!-- generated: published -->' block")
    return splice(text, "published", block, where)


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


# ------------------------------------------------------------------------------------------ the site
PAGE_NOTE = "<!-- written by scripts/build_docs.py from {source}: edit the source and rerun it, not this page -->"
#: Reward families: the package of the card's ``implementation`` (rewardzoo.rewards.<family>), in nav order.
FAMILIES = {
    "image": "Image",
    "video": "Video",
    "vlm": "Vision-language judges",
    "audio": "Audio and speech",
    "group": "Group-relative",
    "text": "Text and sequences",
    "latent": "Latent rewards",
    "remote": "Served rewards",
}
FACT_KEYS = ("modality", "kind", "extra", "score_range", "higher_is_better", "download", "devices", "differentiable")


def family(meta: dict) -> str:
    """The family of a card: ``rewardzoo.rewards.<family>[.module]:Class``."""
    parts = str(meta["implementation"]).split(":", 1)[0].split(".")
    if len(parts) < 3 or parts[:2] != ["rewardzoo", "rewards"] or parts[2] not in FAMILIES:
        raise DocsError(f"the card '{meta['name']}' names an implementation outside the families: {parts}")
    return parts[2]


def card_body(name: str, card: Path | None = None) -> str:
    """A card's markdown after its front matter (read now: the cards may have just been rewritten); ``card``: its
    file when it is not a shipped card (a plugin's)."""
    text = (card or CARDS / f"{name}.md").read_text(encoding="utf-8")
    return text[4:].split("\n---\n", 1)[1].lstrip("\n")


def install_line(meta: dict) -> str:
    extra = meta.get("extra")
    return "`pip install rewardzoo`" if not extra else f"`pip install 'rewardzoo[{extra}]'`"


def licence_cell(meta: dict) -> str:
    """The licence column: the first clause past rewardzoo's own Apache-2.0 (the page has the whole text)."""
    text = str(meta.get("license", "")).strip()
    rest = text.split(";", 1)[1].strip() if text.startswith("Apache-2.0 (rewardzoo);") else text
    first = rest.split(";", 1)[0].strip()
    return first if len(first) <= 70 else first[:67].rstrip() + "..."


def speed_count(name: str, runs: list[dict]) -> int:
    return sum(name in f["rewards"] for run in runs for f in run["figures"])


def reward_page(name: str, meta: dict, runs: list[dict], card: Path | None = None) -> str:
    """A reward's page: the card's front matter as a table of facts, then the card's own text. ``card``: the file of
    a card that is not shipped (a plugin's, :func:`plugin_page`); its family row names the plugin."""
    lo, hi = (float(b) for b in meta["score_range"])
    ref = meta.get("reference") or {}
    if card is None:
        fam = family(meta)
        family_row = f"[{FAMILIES[fam]}](families/{fam}.md)"
    else:
        family_row = f"a plugin's (`{meta['implementation']}`)"
    rows = [
        ("family", family_row),
        ("modality", meta["modality"]),
        ("kind", meta["kind"]),
        ("install", install_line(meta)),
        ("score range", f"[{bound(lo)}, {bound(hi)}], {'higher' if meta['higher_is_better'] else 'lower'} is better"),
        ("weights", "downloaded from a hub / local path" if meta.get("download", True) else "none to download"),
        ("devices", ", ".join(meta["devices"]) if meta.get("devices") else "any (`device: auto`)"),
        ("differentiable", "yes" if meta.get("differentiable") else "no"),
        ("reads the prompt", {True: "yes", False: "no"}.get(meta.get("prompt_conditioned"), "not stated")),
        ("licence", str(meta.get("license", ""))),
        ("implementation", f"`{meta['implementation']}`"),
    ]
    if meta.get("typical_range"):
        rows.append(("typical range", str(meta["typical_range"])))
    if isinstance(ref, dict):
        for key, value in ref.items():
            shown = {"paper": paper_links, "repository": repository_link}.get(key, str)(str(value))
            rows.append((f"reference {key}", shown))
    for case, row in scale_rows().items():
        if row.get("reward") == name:
            rows.append(("at real size", scale_summary(case, row)))
    figures = speed_count(name, runs)
    rows.append(("speed", f"[{figures} benchmark figure{'s' * (figures != 1)}](#speed)" if figures else "not measured"))
    body = card_body(name, card)
    head, _, rest = body.partition("\n")
    source = f"rewardzoo/model_cards/{name}.md" if card is None else str(card)
    if not head.startswith("# "):
        raise DocsError(f"{source}: the body does not start with '# {name}'")
    lines = [
        PAGE_NOTE.format(source=source),
        f"# {name}",
        "",
        cell(meta.get("summary", "")),
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {cell(v)} |" for k, v in rows),
        "",
        f"`rewardzoo card {name}` prints this card; `rewardzoo score {name} ...` scores with its example config.",
        "",
        with_example(page_options(name, rest).strip("\n"), python_example(name, meta, card)),
        "",
    ]
    return "\n".join(lines)


#: What stands in for the download when the site's tests run a reward page's example (tests/docs/stand_ins.py builds
#: each, once per test session): a tiny random-weight model of the reward's architecture in its published layout,
#: set as the entry's ``model_path`` (and the ``kwargs`` named here merged into the entry's). Every downloading
#: reward but ``remote`` has one.
_QWEN25 = "a tiny random-weight Qwen2.5-VL"
_JUDGE = "; a random model writes no verdict, so `kwargs` add `on_failure: {substitute: 0.0}` and `max_new_tokens: 8`"
_OPEN_CLIP = "a tiny random-weight open_clip model (hub layout)"
_MUSIQ = "a tiny random-weight MUSIQ (`kwargs.arch`: 2 layers of width 32)"
STAND_INS = {
    "clip_score": _OPEN_CLIP,
    "video_clip_score": _OPEN_CLIP,
    "clip_image_similarity": _OPEN_CLIP,
    "video_background_consistency": _OPEN_CLIP,
    "hpsv2": "a tiny random-weight HPS checkpoint (`HPS_v2.1_compressed.pt`) on a tiny open_clip model (`kwargs.clip_model`)",
    "laion_aesthetic": "a tiny random-weight LAION aesthetic head (`.pth`) on a tiny open_clip model (`kwargs.clip_model`)",
    "video_aesthetic": "a tiny random-weight LAION aesthetic head on a tiny open_clip model (`kwargs.clip_model`, "
    "`clip_pretrained: null`)",
    "pickscore": "a tiny random-weight transformers CLIP model with its processor files",
    "image_reward": "a tiny random-weight ImageReward checkpoint (`ImageReward.pt` + `med_config.json`, a word vocabulary)",
    "geneval": "a tiny random-weight Mask2Former and a tiny open_clip model (`kwargs.clip_model`, `clip_pretrained: "
    "null`), images resized to 64-96 pixels (`kwargs.shortest_edge: 64`, `longest_edge: 96`) instead of 800-1333",
    "image_quality": "a random-weight TOPIQ-NR (its default metric) as safetensors",
    "video_quality": "a random-weight TOPIQ-NR (its default metric) as safetensors",
    "imaging_quality": _MUSIQ,
    "video_imaging_quality": _MUSIQ + " on 2 frames a clip at their own size (`kwargs.num_frames: 2`, `resize: "
    "null`: 8 frames resized to 512 pixels would take the test 15 s)",
    "video_subject_consistency": "a tiny random-weight DINO ViT",
    "video_dynamic_degree": "a random-weight RAFT-large state dict (`kwargs.iters: 4`: 20 refinement passes would "
    "take the test 10 s)",
    "group_diversity": "a tiny random-weight DINO ViT",
    "diversity_weighted": "a tiny random-weight DINO ViT, and for its base a tiny transformers CLIP model "
    "(`kwargs.base.model_path`)",
    "av_sync": "a tiny random-weight Synchformer",
    "imagebind_score": "a tiny random-weight ImageBind",
    "clap_score": "a tiny random-weight CLAP",
    "asr_wer": "a tiny random-weight Whisper (`kwargs.max_new_tokens: 6`)",
    "asr_cer": "a tiny random-weight Whisper (`kwargs.max_new_tokens: 6`)",
    "utmos": "a random-weight UTMOS checkpoint whose wav2vec2 is shrunk to one layer (the tests patch "
    "`utmos_pytorch`'s `Wav2Vec2Config` while it runs, as its own tests do)",
    "audiobox_aesthetics": "a random-weight Audiobox Aesthetics checkpoint whose WavLM is shrunk (the tests patch "
    "`audiobox_aesthetics`' `DEFAULT_AUDIO_CFG` while it runs, as its own tests do)",
    "speaker_similarity": "a tiny random-weight WavLM x-vector model",
    "song_eval": "a tiny random-weight SongEval head and MuQ (`kwargs.muq_path`)",
    "speech_judge": "a tiny random-weight Qwen2.5-Omni thinker" + _JUDGE,
    "sequence_reward": "a tiny random-weight GPT-2 sequence classifier",
    "implicit_prm": "a tiny random-weight GPT-2 policy and reference (`kwargs.ref_model_path`)",
    "lrm": "a tiny random-weight LRM UNet checkpoint and SD1.5-style pipeline (`kwargs.base_model_path`)",
    "dina_lrm": "a tiny random-weight DiNa-LRM checkpoint on a tiny SD3-style pipeline",
    "hpsv3": "a tiny random-weight HPSv3 checkpoint on a tiny Qwen2-VL base (`kwargs.base_model`)",
    "edit_reward": "a tiny random-weight EditReward checkpoint on a tiny Qwen2.5-VL base (`kwargs.base_model`)",
    "videoalign": "a tiny random-weight VideoAlign release (LoRA checkpoint folder on a tiny Qwen2-VL)",
    "vqascore": _QWEN25,
    "video_vqascore": _QWEN25,
    "tifa_vqa": "a tiny random-weight Qwen3-VL",
    "videoscore2": _QWEN25 + "; a random model writes no verdict, so `kwargs` add `on_failure: {substitute: 0.0}`",
    "unified_reward": _QWEN25 + _JUDGE,
    "unified_reward_think": _QWEN25 + _JUDGE,
    "unified_reward_edit": _QWEN25 + _JUDGE,
    "unified_reward_edit_pairwise": _QWEN25 + _JUDGE,
    "edit_score": _QWEN25 + _JUDGE,
    "rational_rewards": _QWEN25 + _JUDGE,
    "rational_rewards_edit": _QWEN25 + _JUDGE,
    "vlm_judge": _QWEN25 + _JUDGE,
    "video_vlm_judge": _QWEN25 + _JUDGE,
    "unified_reward_2": "a tiny random-weight Qwen3-VL" + _JUDGE,
    "video_unified_reward_2": "a tiny random-weight Qwen3-VL" + _JUDGE,
}
#: The metadata an example's samples carry for rewards that read it (GenEval's metadata line, TIFA's questions).
METADATA = {
    "geneval": {
        "tag": "single_object",
        "include": [{"class": "bicycle", "count": 1}],
        "prompt": "a photo of a bicycle",
    },
    "tifa_vqa": {"questions": [{"question": "Is there a bicycle?", "answer": "yes"}]},
}
#: Options an example sets because the reward requires them (the card's example sets them too).
EXAMPLE_KWARGS = {"videoalign": {"source_fps": 16}}
#: Audio rewards that compare the clip with a reference clip (``condition_audio``).
REFERENCE_AUDIO = ("pesq", "si_sdr", "speaker_similarity", "stoi", "speech_judge")
EXAMPLE = "## Python example"
#: The marker above an example the tests do not run (tests/no_extras/doc_examples.py reads it).
NOT_RUN_MARK = "<!-- example: not run (needs {}) -->"


def example_inputs(name: str, meta: dict, dataset: str | None) -> list[str]:
    """The lines of an example that build ``samples``: four generated inputs of what the reward reads, one group."""
    modality = meta["modality"]
    kind = dataset or {"any": "image"}.get(modality, modality)
    if name in ("imagebind_score", "av_sync"):
        kind = "audio-video"
    elif name in ("lrm", "dina_lrm"):
        kind = "latent"
    elif "edit" in name or name == "clip_image_similarity":
        kind = "edit"
    rng = ["rng = np.random.default_rng(0)"]
    if kind == "latent":
        channels, model = (4, "SD1.5") if name == "lrm" else (16, "SD3.5")
        return rng + [
            f"# your {model} sampler's latents (C, H / 8, W / 8) of 256-pixel images, scaled by the VAE's factor",
            f"latents = rng.standard_normal((4, {channels}, 32, 32), dtype=np.float32)",
            'samples = [Sample(latent=latent, prompt="a red bicycle on a beach", group_id="p0") for latent in latents]',
        ]
    if name in METADATA:
        return rng + [
            "images = rng.integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)",
            *python_literal("metadata = ", METADATA[name]),
            'samples = [Sample(image=image, prompt="a photo of a bicycle", metadata=metadata) for image in images]',
        ]
    if kind == "image":
        return rng + [
            "# your generator's images: (H, W, 3) uint8 arrays here; PIL images, paths and tensors work too",
            "images = rng.integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)",
            'samples = [Sample(image=image, prompt="a red bicycle on a beach", group_id="p0") for image in images]',
        ]
    if kind == "edit":
        return rng + [
            "sources = rng.integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)  # the images the edits start from",
            "edited = rng.integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)  # your editor's outputs",
            "samples = [",
            '    Sample(image=out, condition_images=[src], prompt="make the sky red", group_id="p0")',
            "    for out, src in zip(edited, sources)",
            "]",
        ]
    if name == "av_sync":  # Synchformer reads 4.8 s of video and audio (14 segments of 16 frames at 25 fps)
        return rng + [
            "videos = rng.integers(0, 256, (2, 125, 64, 64, 3), dtype=np.uint8)  # 2 clips of 5 s at 25 fps",
            "sound = (0.3 * np.sin(2 * np.pi * 440 * np.arange(80000) / 16000)).astype(np.float32)  # 5 s at 16 kHz",
            "samples = [Sample(video=v, audio=sound, audio_sample_rate=16000) for v in videos]",
        ]
    if kind in ("video", "audio-video"):
        if name == "video_dynamic_degree":  # RAFT needs 128 pixels a side; every pair of frames is a RAFT pass
            lines = rng + ["videos = rng.integers(0, 256, (2, 8, 128, 128, 3), dtype=np.uint8)  # 2 clips of 8 frames"]
        else:
            lines = rng + ["videos = rng.integers(0, 256, (4, 16, 64, 64, 3), dtype=np.uint8)  # 4 clips of 16 frames"]
        if kind == "video":
            return lines + [
                'samples = [Sample(video=video, prompt="a dog running on grass", group_id="p0") for video in videos]'
            ]
        return lines + [
            "sound = (0.3 * np.sin(2 * np.pi * 440 * np.arange(32000) / 16000)).astype(np.float32)  # 2 s at 16 kHz",
            'samples = [Sample(video=v, audio=sound, audio_sample_rate=16000, prompt="a dog barking") for v in videos]',
        ]
    if kind == "audio":
        lines = [
            "rate = 16000",
            "t = np.arange(int(1.2 * rate)) / rate  # 1.2 s",
            "# your generator's clips: float32 waveforms here; paths to audio files work too",
            "clips = [(0.3 * np.sin(2 * np.pi * f * t)).astype(np.float32) for f in (220, 440)]",
        ]
        if name in REFERENCE_AUDIO:
            return lines + [
                *(['text = "a pure tone"  # what was to be spoken'] if name == "speech_judge" else []),
                "reference = clips[1]  # the clip each one is compared with",
                "samples = [",
                "    Sample(audio=clip, audio_sample_rate=rate, condition_audio=reference, condition_audio_sample_rate=rate)"
                if name != "speech_judge"
                else "    Sample(audio=clip, audio_sample_rate=rate, condition_audio=reference, "
                "condition_audio_sample_rate=rate, prompt=text)",
                "    for clip in clips",
                "]",
            ]
        return lines + [
            'samples = [Sample(audio=clip, audio_sample_rate=rate, prompt="a pure tone", group_id="p0") for clip in clips]'
        ]
    return [
        'answers = ["4", "5", "four", "2 + 2 = 4"]  # your policy\'s completions',
        'samples = [Sample(prompt="What is 2 + 2?", completion=a, group_id="p0") for a in answers]',
    ]


def example_entry(name: str, meta: dict, card: Path | None = None) -> tuple[dict, str | None]:
    """The config entry an example builds (the demo's when the reward is in it, else the reward's defaults, or the
    card's first example entry for a wrapper that needs its options) and the demo dataset it reads."""
    demo = {e["name"]: e for e in yaml.safe_load(DEMO.read_text(encoding="utf-8"))["rewards"]}
    if name in demo:
        entry = dict(demo[name])
        return {k: v for k, v in entry.items() if k != "applicable_datasets"}, entry["applicable_datasets"][0]
    from rewardzoo.catalog.resources import example_yaml, load_yaml_text

    body = card_body(name, card)
    try:
        first = load_yaml_text(example_yaml(body, name))["rewards"][0]
    except Exception:  # a card without an example config: the defaults
        return {"name": name}, None
    kwargs = first.get("kwargs") or {} if isinstance(first, dict) else {}
    if any(k in kwargs for k in ("base", "judge", "template", "url")):
        return {k: v for k, v in first.items() if k not in ("device", "batch_size", "dtype")}, None
    if name in EXAMPLE_KWARGS:
        return {"name": name, "kwargs": EXAMPLE_KWARGS[name]}, None
    return {"name": name}, None


def python_example(name: str, meta: dict, card: Path | None = None) -> str:
    """A reward page's Python example: generated inputs scored through a processor built with the reward."""
    entry, dataset = example_entry(name, meta, card)
    stream = entry["name"]
    download = bool(meta.get("download", True))
    if name == "remote":
        why = "a running `rewardzoo serve`: the Serving guide's example runs one"
    elif download and name not in STAND_INS:
        why = "the downloaded weights"
    else:
        why = None
    if why:
        note = f"This example is not run by the site's tests: it needs {why.split(':')[0]}."
    elif download:
        note = (
            "The site's tests run this example with a stand-in for the download, set on `entry` right before the "
            f"processor is built (the only change): {STAND_INS[name]}."
        )
    else:
        note = "It downloads nothing; the site's tests run it as it is."
    load = "  # the weights download on first use" if download else ""
    source = "the demo config's entry" if dataset else "its defaults" if entry == {"name": name} else "its card's entry"
    lines = [
        EXAMPLE,
        "",
        f"The reward with {source} "
        "(the YAML above shows every option) on generated inputs, through a processor as a trainer calls it. " + note,
        "",
    ]
    if why:
        lines += [NOT_RUN_MARK.format(why), ""]
    code = [
        "import numpy as np",
        "",
        "import rewardzoo",
        "from rewardzoo import Sample",
        "",
        *example_inputs(name, meta, dataset),
        "",
        *python_literal("entry = ", entry),
        f'train, _ = rewardzoo.build_processors({{"rewards": [entry]}}){load}',
        "result = train(samples)",
        f'print(result.rewards["{stream}"])  # one float32 score per sample',
    ]
    return "\n".join(lines + ["```python", *code, "```"])


def _literal(value: object) -> str:
    """One Python literal on one line, quoted as ruff's formatter quotes it (double quotes unless that escapes)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, str):
        return "'" + value + "'" if '"' in value and "'" not in value else json.dumps(value)
    return repr(value)


def python_literal(head: str, value: object, indent: int = 0, tail: str = "", width: int = 120) -> list[str]:
    """``head`` + ``value`` as lines that ruff's formatter leaves as they are (a mapping or list split one item a
    line, with a magic trailing comma, where it does not fit in ``width``)."""
    pad = " " * indent
    one = f"{pad}{head}{_literal(value)}{tail}"
    if len(one) <= width or not isinstance(value, (dict, list)) or not value:
        return [one]
    items = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
    lines = [f"{pad}{head}{'{' if isinstance(value, dict) else '['}"]
    for key, item in items:
        lines += python_literal("" if key is None else f"{_literal(key)}: ", item, indent + 4, ",", width)
    return lines + [f"{pad}{'}' if isinstance(value, dict) else ']'}{tail}"]


def with_example(body: str, example: str) -> str:
    """The page body with its Python example before its Speed section (at the end when it has none)."""
    m = re.search(rf"^{re.escape(SPEED)}[ \t]*$", body, re.M)
    if not m:
        return body + "\n\n" + example
    return body[: m.start()] + example + "\n\n" + body[m.start() :]


#: A citation of a paper in a card: authors, title, venue and a year (a segment of ``reference.paper``).
CITATION = re.compile(r"\b(19|20)\d\d\b")
ARXIV = re.compile(r"arXiv:(\d{4}\.\d{4,5})")


def paper_links(text: str) -> str:
    """A card's ``reference.paper`` with each cited paper a link: its arXiv page when the card gives the id, else a
    Google Scholar search for the citation (the cards name papers, not their addresses). A segment (split at
    ``;``) without a year is not a paper citation and stays text."""
    from urllib.parse import quote_plus

    parts = []
    for segment in text.split("; "):
        arxiv = ARXIV.search(segment)
        if arxiv:
            parts.append(f"[{segment}](https://arxiv.org/abs/{arxiv.group(1)})")
        elif CITATION.search(segment) and not segment.lower().startswith(("see ", "no model")):
            parts.append(f"[{segment}](https://scholar.google.com/scholar?q={quote_plus(segment)})")
        else:
            parts.append(segment)
    return "; ".join(parts)


def repository_link(url: str) -> str:
    """A repository's address as a link named by its path (``owner/name``)."""
    if not url.startswith(("https://", "http://")):
        return url
    name = url.split("://", 1)[1].split("/", 1)[-1].removesuffix(".git")
    return f"[{name}]({url})"


def plugin_page(name: str) -> str:
    """The page of any reward the registry knows by a card (a plugin's included), as the site renders it."""
    from rewardzoo.registry import info

    found = info(name)
    if found is None or found.card is None:
        raise DocsError(f"no reward named '{name}' with a model card (rewardzoo list shows them)")
    meta = read_front_matter(found.card)
    meta = {**meta, "name": found.name, "implementation": found.implementation}
    shipped = found.card.parent.resolve() == CARDS.resolve()
    return reward_page(found.name, meta, load_results(), None if shipped else found.card)


def rewards_index(cards: dict[str, dict], runs: list[dict]) -> str:
    """The table of every reward, each linked to its page, after the families."""
    lines = [
        PAGE_NOTE.format(source="the model cards' front matter"),
        "# Rewards",
        "",
        f"{len(cards)} rewards, each with a page generated from its model card (`rewardzoo card NAME` prints the same "
        "card; `rewardzoo list` lists them with whether their code is installed and their weights are on this machine). "
        "Families, each with advice on choosing between "
        "its members:",
        "",
    ]
    for fam, title in FAMILIES.items():
        members = [n for n, m in cards.items() if family(m) == fam]
        lines.append(f"- [{title}](families/{fam}.md): " + ", ".join(f"[`{n}`]({n}.md)" for n in members))
    lines += [
        "",
        "The table: each reward's kind, the extra that installs it and what it scores; its page has the rest "
        "(modality, score range, licence, weights, options, speed, the papers and repositories it follows).",
        "",
        '<div class="reward-table" markdown>',
        "",
        "| reward | kind | extra | what it scores |",
        "|---|---|---|---|",
    ]
    for name, meta in sorted(cards.items()):
        lines.append(
            f"| [`{name}`]({name}.md) | {meta['kind']} | {meta.get('extra') or 'core'} | "
            f"{cell(meta.get('summary', ''))} |"
        )
    return "\n".join(lines + ["", "</div>"]) + "\n"


def family_block(cards: dict[str, dict], fam: str) -> str:
    lines = [
        '<div class="reward-table" markdown>',
        "",
        "| reward | kind | extra | range | what it scores |",
        "|---|---|---|---|---|",
    ]
    for name, meta in sorted(cards.items()):
        if family(meta) != fam:
            continue
        lo, hi = (float(b) for b in meta["score_range"])
        lines.append(
            f"| [`{name}`](../{name}.md) | {meta['kind']} | {meta.get('extra') or 'core'} | "
            f"[{bound(lo)}, {bound(hi)}] | {cell(meta.get('summary', ''))} |"
        )
    return "\n".join(lines + ["", "</div>"])


#: The demo's datasets (``rewardzoo demo`` generates media for each), in the config's order.
DEMO_DATASETS = ("image", "video", "audio", "edit")
DEMO = ROOT / "rewardzoo" / "configs" / "demo.yaml"


def demo_config(cards: dict[str, dict]) -> str:
    """``rewardzoo/configs/demo.yaml``: an entry per card that needs no download, routed by its modality (a card's
    ``demo:`` mapping adds to its entry or replaces its datasets; ``demo: false`` leaves it out)."""
    entries = []
    for name, meta in sorted(cards.items()):
        demo = meta.get("demo", {})
        if demo is False:
            continue
        if not isinstance(demo, dict):
            raise DocsError(f"rewardzoo/model_cards/{name}.md: 'demo' must be a mapping or false, got {demo!r}")
        if meta.get("download", True):
            if "demo" in meta:
                raise DocsError(f"rewardzoo/model_cards/{name}.md: 'demo' on a card that downloads weights")
            continue
        entry = {"name": name, "applicable_datasets": [meta["modality"]], **demo}
        datasets = entry["applicable_datasets"]
        if not (isinstance(datasets, list) and len(datasets) == 1 and datasets[0] in DEMO_DATASETS):
            raise DocsError(
                f"rewardzoo/model_cards/{name}.md: the demo routes it to {datasets}, not one of {DEMO_DATASETS}"
            )
        entries.append(entry)
    entries.sort(key=lambda e: DEMO_DATASETS.index(e["applicable_datasets"][0]))  # stable: by name within a dataset
    lines = [
        "# written by scripts/build_docs.py from the model cards: every reward that needs no download, routed to the",
        "# demo's generated media by dataset (a card's `demo:` key adjusts its entry; `demo: false` leaves it out).",
        "# `rewardzoo demo` skips the entries whose extra is not installed and says which extra to install.",
        "rewards:",
    ]
    for entry in entries:
        lines.append(f"  - name: {entry.pop('name')}")
        for key in ("device", "applicable_datasets", *sorted(set(entry) - {"device", "applicable_datasets"})):
            if key in entry:
                value = yaml.safe_dump({key: entry[key]}, default_flow_style=True, width=1000).strip()[1:-1]
                lines.append(f"    {value}")
    return "\n".join(lines) + "\n"


def reward_nav(cards: dict[str, dict]) -> str:
    """The Rewards part of mkdocs.yml's nav: the table, then each family's page and members."""
    lines = ["    - rewards/index.md"]
    for fam, title in FAMILIES.items():
        lines += [f"    - {title}:", f"      - rewards/families/{fam}.md"]
        lines += [f"      - {n}: rewards/{n}.md" for n, m in sorted(cards.items()) if family(m) == fam]
    return "\n".join(lines)


def yaml_splice(text: str, marker: str, content: str, where: str) -> str:
    """Replace the lines between ``# generated: marker`` and ``# end generated`` (YAML comments)."""
    m = re.search(rf"^([ \t]*)# generated: {re.escape(marker)}[ \t]*\n", text, re.M)
    if not m:
        raise DocsError(f"{where}: the comment '# generated: {marker}' is missing")
    e = re.compile(r"^[ \t]*# end generated[ \t]*$", re.M).search(text, m.end())
    if not e:
        raise DocsError(f"{where}: no '# end generated' after '# generated: {marker}'")
    return text[: m.end()] + content.rstrip("\n") + "\n" + text[e.start() :]


def _alternatives(node: dict) -> list[dict]:
    """A union's alternatives (``oneOf`` or ``anyOf``; none for an object requiring one key or another)."""
    return [] if "type" in node else node.get("oneOf", node.get("anyOf", []))


def _schema_type(node: dict) -> str:
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    if _alternatives(node):
        return " or ".join(_schema_type(alt) for alt in _alternatives(node))
    kinds = node.get("type", "any")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    names = {"object": "mapping", "array": "list", "null": "null", "number": "number", "integer": "integer"}
    out = []
    for k in kinds:
        if k == "array" and isinstance(node.get("items"), dict) and "type" in node["items"]:
            out.append(f"list of {_schema_type(node['items'])}")
        else:
            out.append(names.get(k, k))
    return " or ".join(out)


def _schema_constraints(node: dict) -> str:
    words = {
        "minimum": ">= {}",
        "exclusiveMinimum": "> {}",
        "maximum": "<= {}",
        "minLength": "at least {} characters",
        "minItems": "at least {} items",
        "minProperties": "at least {} keys",
        "pattern": "matches `{}`",
    }
    out = [w.format(node[k]) for k, w in words.items() if k in node]
    for alt in _alternatives(node):  # the bounds of a value that may also be null
        out += [w.format(alt[k]) for k, w in words.items() if k in alt and alt.get("type") != "null"]
    if "default" in node:
        out.append(f"default `{json.dumps(node['default'])}`")
    if node.get("required"):
        out.append("requires " + ", ".join(f"`{r}`" for r in node["required"]))
    return "; ".join(out)


def schema_rows(node: dict, path: str, seen: dict[str, str], rows: list[tuple[str, str, str, str]]) -> None:
    """Flatten a JSON schema into (key path, type, constraints, description) rows; a sub-schema met before
    is named by the path that documented it."""
    key = json.dumps(node, sort_keys=True)
    if path:
        desc = node.get("description", "").replace("``", "`")
        if key in seen and node.get("type") in ("object", None) and ("properties" in json.dumps(node)):
            rows.append((path, _schema_type(node), "", cell(f"{desc} (as `{seen[key]}`)".strip())))
            return
        rows.append((path, _schema_type(node), _schema_constraints(node), cell(desc)))
        seen.setdefault(key, path)
    for alt in _alternatives(node):
        if isinstance(alt, dict) and ("properties" in alt or "items" in alt or "additionalProperties" in alt):
            schema_rows_inner(alt, path, seen, rows)
    schema_rows_inner(node, path, seen, rows)


def schema_rows_inner(node: dict, path: str, seen: dict[str, str], rows: list) -> None:
    for name, sub in (node.get("properties") or {}).items():
        schema_rows(sub, f"{path}.{name}" if path else name, seen, rows)
    items = node.get("items")
    if isinstance(items, dict) and ("properties" in items or "oneOf" in items):
        for alt in items.get("oneOf", [items]):
            if "properties" in alt:
                schema_rows_inner(alt, f"{path}[]", seen, rows)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        schema_rows(extra, f"{path}.KEY", seen, rows)


def page_options(name: str, body: str) -> str:
    """A reward page's card body with the reward's ``## Options`` table (``rewardzoo/catalog/options.json``, the
    same section ``rewardzoo card`` prints), before its ``## Speed``."""
    from rewardzoo.catalog.options import with_options

    return roles(with_options(body, name))


def refresh_options() -> str | None:
    """Rewrite ``rewardzoo/catalog/options.json`` from the rewards' ``Options`` classes (``scripts/gen_options.py``);
    where the reward modules cannot be imported (no extras), say so and keep the file as it is."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_options

        new = gen_options.text(gen_options.collect())
    except ImportError as exc:
        return f"rewardzoo/catalog/options.json not regenerated ({exc}): run scripts/gen_options.py in the dev env"
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    if not gen_options.FILE.is_file() or gen_options.FILE.read_text(encoding="utf-8") != new:
        gen_options.FILE.write_text(new, encoding="utf-8")
        from rewardzoo.catalog.options import catalog

        catalog.cache_clear()
        return "rewrote rewardzoo/catalog/options.json"
    return None


def config_reference() -> str:
    from rewardzoo.spec.config import json_schema

    schema = json_schema()
    rows: list[tuple[str, str, str, str]] = []
    schema_rows(schema, "", {}, rows)
    lines = [
        PAGE_NOTE.format(source="rewardzoo.spec.config.json_schema()"),
        "# Configuration reference",
        "",
        "Every key a reward config may hold, from the JSON Schema `rewardzoo schema` prints (for editor "
        "validation). A `rewards` or `eval_rewards` item is a reward name, or a mapping with the keys under "
        "`rewards[]`; parsing is stricter than the schema (see [Configuring](configuring.md)). An entry's `kwargs` "
        "takes the options of the reward it names: the Options table on the reward's page (the schema checks them "
        "too).",
        "",
        f"Top level: required {', '.join(f'`{r}`' for r in schema.get('required', []))}; no other keys than those below.",
        "",
        "| key | type | constraints | what it is |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{p}` | {t} | {c} | {d} |" for p, t, c, d in rows]
    return "\n".join(lines) + "\n"


def _public_names() -> dict[str, str]:
    """``rewardzoo._LAZY`` (public name -> module), read without importing the package."""
    tree = ast.parse((ROOT / "rewardzoo" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_LAZY" for t in node.targets):
            return ast.literal_eval(node.value)
    raise DocsError("rewardzoo/__init__.py: no _LAZY table")


def api_page() -> str:
    names = _public_names()
    groups: dict[str, list[str]] = {}
    for name, module in names.items():
        groups.setdefault(module, []).append(name)
    lines = [
        PAGE_NOTE.format(source="rewardzoo/__init__.py (the public names) and their docstrings"),
        "# API reference",
        "",
        "The names `rewardzoo` exports (`rewardzoo.__all__`), each importable from the package root "
        "(`from rewardzoo import Sample`) and imported on first use; grouped by the module that defines them.",
        "",
    ]
    for module in sorted(groups):
        lines += [f"## `{module}`", ""]
        for name in groups[module]:
            lines += [f"::: {module}.{name}", ""]
    return "\n".join(lines)


def scale_rows() -> dict[str, dict]:
    """The rows of ``scripts/scale_check.py`` by case (``benchmarks/results/scale.json``), none when absent."""
    if not SCALE.is_file():
        return {}
    return dict(json.loads(SCALE.read_text(encoding="utf-8")).get("rows", {}))


def _gb(n: float | None) -> str:
    return "" if n is None else f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def scale_summary(case: str, row: dict) -> str:
    """One line of a case's real-size figures (the reward page's "at real size" row)."""
    load, ref, drop, gpu = (row.get(k) or {} for k in ("load", "reference", "drop", "gpu"))
    if not _measured(load):
        return f"`{case}`: not measured ({load.get('error', 'no load figures')[:80]})"
    parts = [f"weights {_gb(load['state_bytes'])} {row['dtype']}", f"load peak {_gb(load['load_peak_bytes'])}"]
    if ref.get("load_peak_bytes"):
        parts[-1] += f" (reference loader {_gb(ref['load_peak_bytes'])})"
    n = load.get("samples_per_call", 1)
    parts.append(
        f"{_gb(load['activation_bytes_per_sample'])} and {num(load['cpu_s_per_sample'])} CPU seconds per real-sized "
        f"sample ({load.get('threads')} threads" + (f", {n} per call)" if n != 1 else ")")
    )
    if gpu.get("activation_bytes_per_sample") is not None:
        parts.append(
            f"{_gb(gpu['activation_bytes_per_sample'])} and {num(gpu['s_per_sample'])} s per sample on "
            f"{gpu.get('device', 'CUDA')}"
        )
    if row.get("media_bytes"):
        peak = load.get("call_peak_bytes", load["activation_bytes_per_sample"] * n)
        ws = load.get("working_set_bytes", 0)
        parts.append(
            f"a call's peak {peak / row['media_bytes']:.2f}x its media's decoded 8-bit size ({_gb(row['media_bytes'])})"
            + (
                f", {(peak - ws) / row['media_bytes']:.2f}x after the model's working set on one item ({_gb(ws)})"
                if ws
                else ""
            )
        )
    if drop.get("freed_fraction") is not None:
        same = drop.get("tensors_bit_identical") and drop.get("scores_bit_identical")
        parts.append(
            f"`offload: drop` frees {drop['freed_fraction']:.0%}, wakes {'bit-identical' if same else 'CHANGED'}"
        )
    return f"`{case}` ({row.get('date')}): " + "; ".join(parts)


def _measured(load: dict) -> bool:
    """A load task that finished (a timed-out one keeps what it measured, with its error, but is not a row)."""
    return "state_bytes" in load and "activation_bytes_per_sample" in load and "error" not in load


def scale_table(rows: dict[str, dict]) -> list[str]:
    """The Benchmarks page's table of the real-size runs, one row per case."""
    lines = [
        "| case | layout | weights | load peak: rewardzoo / reference | plan = loaded | memory / sample | "
        "CPU s / sample | drop frees | wake / cold load | GPU memory, s / sample |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case, row in rows.items():
        load, ref, drop, gpu = (row.get(k) or {} for k in ("load", "reference", "drop", "gpu"))
        if not _measured(load):
            why = f" ({cell(load['error'][:80])})" if load.get("error") else ""
            lines.append(f"| `{case}` | {cell(row.get('layout', ''))} | not measured{why} | | | | | | | |")
            continue
        peak = _gb(load["load_peak_bytes"])
        if ref.get("load_peak_bytes"):
            peak += f" / {_gb(ref['load_peak_bytes'])} (**{load['load_peak_bytes'] / ref['load_peak_bytes']:.2f}x**)"
        plan = load.get("plan_bytes")
        if plan is None:
            plan_cell = "unknown"
        elif plan == load["state_bytes"]:
            plan_cell = "yes"
        else:
            plan_cell = f"{plan - load['state_bytes']:+d} B ({load.get('plan_from')})"
        freed = "" if drop.get("freed_fraction") is None else f"{drop['freed_fraction']:.0%}"
        if freed:
            freed += ", bit-identical" if drop.get("tensors_bit_identical") and drop.get("scores_bit_identical") else ""
        wake = f"{drop['wake_s'] / load['load_s']:.2f}" if drop.get("wake_s") is not None else ""
        on_gpu = (
            f"{_gb(gpu['activation_bytes_per_sample'])}, {num(gpu['s_per_sample'])} s"
            if gpu.get("activation_bytes_per_sample") is not None
            else "not measured"
        )
        lines.append(
            f"| `{case}` | {cell(row.get('layout', ''))} | {_gb(load['state_bytes'])} {row['dtype']} | {peak} | "
            f"{plan_cell} | {_gb(load['activation_bytes_per_sample'])} | {num(load['cpu_s_per_sample'])} | {freed} | "
            f"{wake} | {on_gpu} |"
        )
    return lines


def measured_data(rows: dict[str, dict]) -> str:
    """``rewardzoo/catalog/scale.json``: what ``rewardzoo plan`` reads of the real-size runs
    (:mod:`rewardzoo.catalog.measured`)."""
    machine = json.loads(SCALE.read_text(encoding="utf-8"))["machine"] if SCALE.is_file() else ""
    records = []
    for case, row in rows.items():
        load, gpu = row.get("load") or {}, row.get("gpu") or {}
        if not _measured(load):
            continue
        record = {
            "case": case,
            "reward": row["reward"],
            "matches": row.get("matches", {}),
            "stands_for": row.get("stands_for", []),
            "dtype": row["dtype"],
            "weights_bytes": load["state_bytes"],
            "load_peak_bytes": load["load_peak_bytes"],
            "date": row["date"],
            "machine": machine,
            "cpu": {
                "activation_bytes_per_sample": round(load["activation_bytes_per_sample"]),
                "cpu_s_per_sample": float(num(load["cpu_s_per_sample"])),
                "threads": load.get("threads"),
            },
        }
        if gpu.get("activation_bytes_per_sample") is not None:
            record["cuda"] = {
                "activation_bytes_per_sample": round(gpu["activation_bytes_per_sample"]),
                "s_per_sample": float(num(gpu["s_per_sample"])),
                "device": gpu.get("device"),
            }
        records.append(record)
    note = "generated by scripts/build_docs.py from benchmarks/results/scale.json; do not edit"
    return json.dumps({"note": note, "records": records}, indent=1) + "\n"


def benchmarks_page(runs: list[dict]) -> str:
    lines = [
        PAGE_NOTE.format(source="benchmarks/results/*.json"),
        "# Benchmarks",
        "",
        "Each script in `benchmarks/` times rewardzoo and a baseline in the same run (contestants interleaved, "
        "medians after a warm-up) and writes its figures to `benchmarks/results/<script>.json`. Absolute times "
        "drift between runs and machines (the development machine is shared with other jobs): read the ratios. "
        "Each reward's figures are also on its page, under Speed.",
        "",
        "| script | latest run | machine | torch | figures |",
        "|---|---|---|---|---|",
    ]
    for run in runs:
        anchor = run["script"].replace(".py", "").replace("_", "-")
        lines.append(
            f"| [`{run['script']}`](#{anchor}) | {run['date']} | {cell(run['machine'])} | {run.get('torch') or ''} | "
            f"{len(run['figures'])} |"
        )
    rows = scale_rows()
    if rows:
        lines += [
            "",
            "## At real size {#at-real-size}",
            "",
            "`scripts/scale_check.py` (on demand, never in CI) builds each flagship reward's real architecture at its "
            "real size with random weights, saved in the layout its published checkpoint uses, and measures each step "
            "in a fresh process: load (peak RSS against the reference library's own loader in the same process "
            "layout), `rewardzoo plan`'s bytes against the loaded parameters and persistent buffers, one call on a "
            "real-sized sample (peak RSS added, seconds), `offload: drop` (RSS freed, wake bit-identical, wake time "
            "against the cold load). Goals: load peak <= 1.1x the reference's, plan = loaded, drop frees >= 90%. "
            "The figures are in the `scale_check.py` section below; `rewardzoo plan` uses the memory per sample.",
            "",
            *scale_table(rows),
        ]
    for run in runs:
        anchor = run["script"].replace(".py", "").replace("_", "-")
        lines += ["", f"## {run['script']} {{#{anchor}}}", "", f"Run: {run_line(run)}.", ""]
        lines += figures_table(run["figures"], script_column=False)
    return "\n".join(lines) + "\n"


def package_block() -> str:
    """Each package's docstring (its first paragraph, and what it may import where it says so)."""
    lines = ["| package | what it holds (its docstring) |", "|---|---|"]
    paths = [
        ROOT / "rewardzoo" / "errors.py",
        ROOT / "rewardzoo" / "registry.py",
        *sorted((ROOT / "rewardzoo").glob("*/__init__.py")),
    ]
    for path in paths:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        first = " ".join(doc.split("\n\n", 1)[0].split())
        name = path.stem if path.name != "__init__.py" else path.parent.name + "/"
        lines.append(f"| `{name}` | {cell(roles(first.replace('``', '`')))} |")
    return "\n".join(lines)


def site_targets(cards: dict[str, dict], runs: list[dict]) -> dict[Path, callable]:
    """The site's generated pages and blocks (File -> function(current text) -> the text it should have)."""
    out: dict[Path, callable] = {}
    for name, meta in cards.items():
        out[REWARD_PAGES / f"{name}.md"] = lambda t, n=name, m=meta: reward_page(n, m, runs)
    out[REWARD_PAGES / "index.md"] = lambda t: rewards_index(cards, runs)
    note = NOTE.format(source="the model cards' front matter")
    for fam in FAMILIES:
        where = f"docs/rewards/families/{fam}.md"
        out[FAMILY_PAGES / f"{fam}.md"] = lambda t, f=fam, w=where: splice(
            t, "family members", note + "\n" + family_block(cards, f), w
        )
    out[MKDOCS] = lambda t: yaml_splice(t, "reward nav", reward_nav(cards), "mkdocs.yml")
    out[DEMO] = lambda t: demo_config(cards)
    out[DOCS / "guides" / "config-reference.md"] = lambda t: config_reference()
    out[DOCS / "api.md"] = lambda t: api_page()
    out[DOCS / "benchmarks.md"] = lambda t: benchmarks_page(runs)
    out[MEASURED_DATA] = lambda t: measured_data(scale_rows())
    pkg_note = NOTE.format(source="the package docstrings")
    out[DOCS / "architecture.md"] = lambda t: splice(
        t, "package docstrings", pkg_note + "\n" + package_block(), "docs/architecture.md"
    )
    return out


def orphan_pages(cards: dict[str, dict]) -> list[Path]:
    """Generated reward pages whose card is gone."""
    keep = {f"{n}.md" for n in cards} | {"index.md"}
    return sorted(p for p in REWARD_PAGES.glob("*.md") if p.name not in keep)


# ------------------------------------------------------------------------------------------ main
def rel(path: Path, base: Path = ROOT) -> str:
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return str(path)


def targets(cards: dict[str, dict], runs: list[dict]) -> dict[Path, callable]:
    """File -> function(current text) -> the text it should have."""
    references = NOTE.format(source="rewardzoo/rewards/references/__init__.py") + "\n" + references_table()
    out = {
        DOCS / "guides" / "references.md": lambda t: splice(
            t, "reference packages", references, "docs/guides/references.md"
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
    pairing_note = NOTE.format(source="the card's front matter (`pairing:`)")
    for name, meta in cards.items():
        block = NOTE.format(source="benchmarks/results/*.json") + "\n" + speed_block(name, runs)
        where = f"rewardzoo/model_cards/{name}.md"
        if meta.get("pairing") is not None:
            pairing = pairing_note + "\n" + pairing_block(meta)
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
        if meta.get("published"):
            block = front + "\n" + published_block(meta)
            build = out[CARDS / f"{name}.md"]
            out[CARDS / f"{name}.md"] = lambda t, f=build, b=block, w=f"rewardzoo/model_cards/{name}.md": (
                published_text(f(t), b, w)
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
    ap.add_argument("--page", metavar="NAME", help="print the page of one reward (any with a card: a plugin's too)")
    args = ap.parse_args(argv)
    if args.page:
        try:
            print(plugin_page(args.page), end="")
        except DocsError as exc:
            print(f"build_docs: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        if not args.check:  # --check leaves options.json to its own test (scripts/gen_options.py --check)
            note = refresh_options()
            if note:
                print(f"build_docs: {note}")
        cards, runs = load_cards(), load_results()
        validate(cards, runs)
        stale, problems = [], []
        for path, build in {**targets(cards, runs), **site_targets(cards, runs)}.items():
            old = path.read_text(encoding="utf-8") if path.is_file() else ""  # re-read right before writing
            new = build(old)
            if path.parent == CARDS:
                problems += prose_problems(new, rel(path))
            if new != old:
                stale.append(rel(path))
                if args.check:
                    print(short_diff(old, new, rel(path)), end="\n\n")
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(new, encoding="utf-8")
        for path in orphan_pages(cards):
            stale.append(f"{rel(path)} (its card is gone)")
            if not args.check:
                path.unlink()
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
