"""A small DOM built with html.parser: enough to find a report's sections, tables, cards and images."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def iter(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        """Descendants (and self) with ``tag`` whose attributes contain ``attrs`` (``class_`` matches a class)."""
        found = []
        for node in self.iter():
            if tag is not None and node.tag != tag:
                continue
            ok = True
            for key, value in attrs.items():
                if key == "class_":
                    ok &= value in node.attrs.get("class", "").split()
                else:
                    ok &= node.attrs.get(key.replace("_", "-")) == value
            if ok:
                found.append(node)
        return found

    def find(self, tag: str | None = None, **attrs: str) -> Node:
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag}> with {attrs}"
        return found[0]

    def get_text(self) -> str:
        return "".join(self.text) + "".join(c.get_text() for c in self.children)


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if self.stack[-1].tag != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1].tag}> at {self.getpos()}")
            while len(self.stack) > 1 and self.stack[-1].tag != tag:
                self.stack.pop()
        if len(self.stack) > 1:
            self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].text.append(data)


def parse(html: str) -> tuple[Node, list[str]]:
    """(root, nesting errors); a well-formed page has none and closes every element it opens."""
    builder = _Builder()
    builder.feed(html)
    builder.close()
    errors = builder.errors + [f"<{n.tag}> never closed" for n in builder.stack[1:]]
    return builder.root, errors


def table_values(table: Node) -> list[list[str]]:
    """Body rows of a report table: each cell's ``data-value`` when it has one, else its text."""
    rows = []
    for tr in table.find("tbody").find_all("tr"):
        rows.append(
            [
                td.attrs["data-value"] if "data-value" in td.attrs else td.get_text().strip()
                for td in tr.children
                if td.tag in ("td", "th")
            ]
        )
    return rows
