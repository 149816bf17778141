"""HTML building blocks of the report page: escaping, number cells, tables and the page shell (CSS included)."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence

CSS = """
:root { --fg: #1d2330; --muted: #5f6b7a; --line: #d9dee5; --bg-alt: #f5f7fa; --accent: #2c5d9e; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); margin: 0; background: #fff; }
header, main { max-width: 1180px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; border-bottom: 1px solid var(--line); }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-top: 8px; border-top: 2px solid var(--accent); }
h3 { font-size: 15px; margin: 16px 0 6px; }
p { margin: 6px 0; }
code { font-size: 12px; background: var(--bg-alt); padding: 0 3px; border-radius: 3px; }
.muted, .note { color: var(--muted); }
.note { font-size: 12px; display: block; }
nav ul { list-style: none; padding: 0; margin: 8px 0 12px; display: flex; flex-wrap: wrap; gap: 4px 14px; }
nav a { color: var(--accent); text-decoration: none; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 12.5px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg-alt); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.scroll { overflow-x: auto; }
svg { max-width: 100%; height: auto; }
.charts { display: flex; flex-wrap: wrap; gap: 10px 18px; align-items: flex-start; }
.charts figure { margin: 0; }
.charts figcaption { font-size: 12px; color: var(--muted); }
.samples { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr)); gap: 8px; margin: 6px 0 12px; }
.sample { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 6px; background: #fff;
          break-inside: avoid; }
.sample figcaption { font-size: 12px; }
.sample .score { font-weight: 600; font-variant-numeric: tabular-nums; }
.sample p { font-size: 12px; margin: 3px 0 0; overflow-wrap: anywhere; }
.media img.thumb { display: block; max-width: 100%; height: auto; margin-bottom: 4px; border-radius: 3px; }
.media img.wave { display: block; width: 100%; height: auto; }
.media audio { width: 100%; height: 28px; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 14px; }
@media (max-width: 800px) { .pair { grid-template-columns: 1fr; } }
@page { size: A4; margin: 12mm; }
@media print {
  body { font-size: 9pt; }
  header, main { max-width: none; padding: 0; }
  nav, audio { display: none; }
  .scroll { overflow: visible; }
  table { font-size: 8pt; }
  th, td { padding: 2px 4px; }
  h2, h3 { break-after: avoid; }
  tr, .sample, .charts figure { break-inside: avoid; }
  .samples { grid-template-columns: repeat(5, 1fr); }
  .pair .samples { grid-template-columns: repeat(2, 1fr); }
  a { color: inherit; text-decoration: none; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""


def esc(value: object) -> str:
    """Text escaped for HTML content and attribute values."""
    return html.escape(str(value), quote=True)


def fmt(x: float | int | None, digits: int = 4) -> str:
    """A number for reading: ``digits`` significant digits, integers as they are, '—' for missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.{digits}g}"


def num(x: float | int | None, digits: int = 4) -> str:
    """A numeric table cell: the rounded number shown, the exact value in ``data-value`` (for tools and tests)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return '<td class="num" data-value="">—</td>'
    return f'<td class="num" data-value="{x!r}">{fmt(x, digits)}</td>'


def text_cell(x: object) -> str:
    return f"<td>{esc(x)}</td>"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, css: str = "", numeric_from: int = 1) -> str:
    """A table from pre-rendered ``<td>`` cells; header cells from column ``numeric_from`` on align right."""
    head = "".join(
        f'<th class="num">{esc(h)}</th>' if i >= numeric_from else f"<th>{esc(h)}</th>" for i, h in enumerate(header)
    )
    body = "".join("<tr>" + "".join(r) + "</tr>" for r in rows)
    cls = f' class="{css}"' if css else ""
    return f'<div class="scroll"><table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def anchor(prefix: str, index: int, name: str) -> str:
    """A unique, URL-safe element id."""
    return f"{prefix}-{index}-{re.sub(r'[^A-Za-z0-9_-]+', '-', name)}"


def document(title: str, header: str, nav: Sequence[tuple[str, str]], sections: Sequence[str]) -> str:
    """The whole page: one file, inline CSS, no script and no external reference."""
    links = "".join(f'<li><a href="#{esc(target)}">{esc(label)}</a></li>' for target, label in nav)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body><header>{header}"
        f"<nav><ul>{links}</ul></nav></header>\n<main>\n" + "\n".join(sections) + "\n</main></body></html>\n"
    )
