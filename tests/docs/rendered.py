"""What a built page shows as text, and the marks of markdown that did not render: table rows left as ``|`` text
(a blank line or a missing header row inside a table), Sphinx roles (``:class:`X```) that mkdocstrings shows as
they are, and backticks outside code (a code span or a fence that was not closed)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

#: A Sphinx role as markdown leaves it: ``:class:`` / ``:py:meth:`` ... right before a code span or a backtick.
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|ref|const|term|doc):(?=`|<code>)")
#: A table row or a header rule that markdown left as text.
PIPES = re.compile(r"(?m)^\s*\|.*\|\s*$|\|\s*:?-{3,}:?\s*\|")
#: Containers whose text is not prose: code, scripts, styles, and the search box's templates.
SKIP = {"code", "pre", "script", "style", "svg", "kbd", "samp"}
#: Elements that start a line of prose (so a table cell's text is not read as a row of pipes).
BLOCKS = {"p", "li", "td", "th", "tr", "div", "h1", "h2", "h3", "h4", "h5", "h6", "dt", "dd", "br", "blockquote"}
CODE = "\u25af"


class _Text(HTMLParser):
    """The prose of a page's article (``<article>``, or the whole body when it has none), code left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skip = 0
        self.in_article = 0
        self.prose: list[str] = []
        self.html_roles: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "article":
            self.in_article += 1
        if tag in SKIP:
            if not self.skip and self.in_article:
                self.prose.append(CODE)  # a code span stands in the prose as one mark
            self.skip += 1
        elif tag in BLOCKS and self.in_article:
            self.prose.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self.in_article -= 1
        if tag in SKIP and self.skip:
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if self.in_article and not self.skip:
            self.prose.append(data)


def unrendered(html: str) -> list[str]:
    """What on the page is markdown that did not render (empty when the page is clean)."""
    parser = _Text()
    parser.feed(html)
    article = html[html.find("<article") :] if "<article" in html else html
    found = [f"a Sphinx role: {m.group(0)}{article[m.end() : m.end() + 60]!r}" for m in ROLE.finditer(article)]
    prose = "".join(parser.prose)
    found += [f"table pipes left as text: {m.group(0).strip()[:80]!r}" for m in PIPES.finditer(prose)]
    for line in prose.splitlines():
        if "`" in line:
            found.append(f"a backtick outside code: {line.strip()[:100]!r}")
    return found
