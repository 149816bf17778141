"""mkdocs hooks (``hooks:`` in mkdocs.yml): the API reference's docstrings are written for Sphinx; mkdocstrings
renders their roles as text (``:class:`` before a code span). Each role becomes its code span alone, with the
name Sphinx would show (``~a.b.C``: ``C``; ``Title <a.b.C>``: ``Title``)."""

from __future__ import annotations

import re

#: ``:class:<code>~rewardzoo.x.Y</code>``: a role as mkdocstrings renders it (the backticks already a code span).
ROLE_HTML = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):<code>([^<]*)</code>")


def shown(target: str) -> str:
    """What Sphinx shows for a role's target."""
    title = re.fullmatch(r"(.+?)\s*&lt;.+&gt;|(.+?)\s*<.+>", target)
    if title:
        return title.group(1) or title.group(2)
    return target.rsplit(".", 1)[-1] if target.startswith("~") else target


def on_page_content(html: str, **kwargs: object) -> str:
    return ROLE_HTML.sub(lambda m: f"<code>{shown(m.group(1))}</code>", html)
