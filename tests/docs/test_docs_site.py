"""The documentation site builds strictly and works in a browser, offline.

The site is the one ``scripts/test`` built (``REWARDZOO_DOCS_SITE``: there this test must run), else one built
here from the checkout's ``mkdocs.yml`` when mkdocs is installed (the ``docs`` extra), else the tests skip.
Headless Chromium opens it, from the disk and from a local server: the home page, the reward table and a reward
page render (screenshots kept in the test's tmp dir), search finds a reward by name, and no page loads anything
from another host or logs an error.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ..commands import require_chromium
from .rendered import unrendered

ROOT = Path(__file__).resolve().parents[2]
CARDS = sorted(p.stem for p in (ROOT / "rewardzoo" / "model_cards").glob("*.md"))
#: an asset (not a hyperlink) fetched from elsewhere: a script, stylesheet, icon, image or frame, or a CSS url()
REMOTE_ASSET = re.compile(
    r"<(?:script|img|iframe|source|video|audio|embed)\b[^>]*\bsrc=[\"']?(?:https?:)?//"
    r"|<link\b[^>]*\bhref=[\"']?(?:https?:)?//"
    r"|url\(\s*[\"']?(?:https?:)?//"
    r"|@import\s+[\"']?(?:url\()?[\"']?(?:https?:)?//",
    re.I,
)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    given = os.environ.get("REWARDZOO_DOCS_SITE")
    if given:
        assert (Path(given) / "index.html").is_file(), f"REWARDZOO_DOCS_SITE={given} holds no built site"
        return Path(given)
    if importlib.util.find_spec("mkdocs") is None or not (ROOT / "mkdocs.yml").is_file():
        pytest.skip("mkdocs is not installed (the docs extra) and scripts/test did not build the site")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def chromium() -> None:
    require_chromium()


needs_chromium = pytest.mark.usefixtures("chromium")


def _external(requests: list[str]) -> list[str]:
    return [u for u in requests if re.match(r"(https?|wss?|ftp)://", u) and not u.startswith("http://127.0.0.1:")]


def _not_blank(png: Path) -> None:
    img = np.asarray(Image.open(png).convert("RGB"))
    white = (img > 245).all(axis=-1).mean()
    assert white < 0.98, f"{png.name}: {white:.1%} of the screenshot is white"
    packed = (img[..., 0].astype(np.uint32) << 16) | (img[..., 1].astype(np.uint32) << 8) | img[..., 2]
    assert len(np.unique(packed)) > 20, f"{png.name} is a flat fill"


def test_every_card_has_a_built_page_and_nothing_loads_from_elsewhere(site):
    for name in CARDS:
        assert (site / "rewards" / f"{name}.html").is_file(), name
    pages = [*site.rglob("*.html"), *site.rglob("*.css")]
    assert len(pages) > len(CARDS)
    remote = [
        f"{p.relative_to(site)}: {m.group(0)}" for p in pages for m in REMOTE_ASSET.finditer(p.read_text("utf-8"))
    ]
    assert not remote, remote[:10]
    assert not re.search(r"fonts\.(googleapis|gstatic)\.com", (site / "index.html").read_text("utf-8"))


def test_a_reward_page_shows_its_options_table(site):
    """The options a reward declares (rewardzoo/catalog/options.json) as a table on its built page."""
    import json

    rows = json.loads((ROOT / "rewardzoo" / "catalog" / "options.json").read_text("utf-8"))["pickscore"]["rows"]
    page = (site / "rewards" / "pickscore.html").read_text("utf-8")
    table = page[page.index('id="options"') :].split("</table>", 1)[0]
    assert [r["name"] for r in rows] == re.findall(r"<tr>\s*<td><code>(\w+)</code></td>", table) != []


def test_text_rendering_is_two_clicks_from_home(site):
    """Home -> the image family (which says which reward scores rendered text) -> the ocr page."""
    home = (site / "index.html").read_text("utf-8")
    assert 'href="rewards/families/image.html"' in home
    family = (site / "rewards" / "families" / "image.html").read_text("utf-8")
    assert "text rendering" in family and 'href="../ocr.html"' in family


@needs_chromium
def test_pages_render_in_chromium(site, server, tmp_path):
    from .cdp import Browser

    with Browser() as browser:
        browser.open((site / "index.html").as_uri())  # from the disk, no server
        assert browser.evaluate("document.querySelector('h1').textContent").startswith("rewardzoo")
        _not_blank(browser.screenshot(tmp_path / "home-file.png"))
        # from file:// a page renders; only search, which needs a web worker (and so a server), cannot start
        assert all("search" in e for e in browser.errors), browser.errors
        browser.errors.clear()

        browser.open(f"{server}/index.html")
        assert browser.evaluate("document.querySelectorAll('.md-nav__link').length") > 10
        _not_blank(browser.screenshot(tmp_path / "home.png"))

        browser.open(f"{server}/rewards/index.html")
        rows = browser.evaluate(
            "[...document.querySelectorAll('table tbody tr td:first-child a')].map(a => a.textContent)"
        )
        assert sorted(rows) == CARDS
        _not_blank(browser.screenshot(tmp_path / "rewards.png"))

        browser.open(f"{server}/rewards/ocr.html")
        assert browser.evaluate("document.querySelector('h1').textContent").startswith("ocr")
        headings = browser.evaluate("[...document.querySelectorAll('h2')].map(h => h.id)")
        assert {"what-it-measures", "inputs", "limitations", "how-to-configure", "speed"} <= set(headings)
        _not_blank(browser.screenshot(tmp_path / "ocr.png"))

        assert _external(browser.requests) == [], _external(browser.requests)
        assert browser.errors == [], browser.errors


#: In a page: its reward table (in ``div.reward-table``) as [its width past its column in px, the
#: names whose link breaks over lines, the number of rows].
TABLE_FIT = """(() => {
  const table = document.querySelector('article .reward-table table');
  const wrap = table.closest('.md-typeset__scrollwrap') || table.parentElement;
  const article = document.querySelector('article').getBoundingClientRect();
  const links = [...table.querySelectorAll('tbody tr td:first-child a')];
  return [
    Math.max(wrap.scrollWidth - wrap.clientWidth, table.getBoundingClientRect().right - article.right),
    links.filter(a => a.getClientRects().length > 1 || a.querySelector('code').getClientRects().length > 1)
      .map(a => a.textContent),
    links.length,
  ];
})()"""


@needs_chromium
def test_the_reward_tables_fit_their_column_at_1280_px(server, tmp_path):
    """No horizontal scroll and no name broken mid-word (``audio_cli pping``) in the reward table and a family's
    table, in a 1280 px wide window; the summary is the column that wraps."""
    from .cdp import Browser

    with Browser(width=1280) as browser:
        families = sorted(p.stem for p in (ROOT / "docs" / "rewards" / "families").glob("*.md"))
        pages = [("rewards/index.html", len(CARDS))] + [(f"rewards/families/{f}.html", 1) for f in families]
        for page, rows in pages:
            browser.open(f"{server}/{page}")
            overflow, broken, count = browser.evaluate(TABLE_FIT)
            assert count >= rows, (page, count)
            assert overflow <= 1, f"{page}: the table is {overflow} px wider than its column"
            assert broken == [], f"{page}: names broken over lines: {broken}"
            browser.screenshot(tmp_path / page.replace("/", "-").replace(".html", ".png"))


def test_cited_papers_and_repositories_are_links(site):
    """Every reward page links its card's repository, and a paper citation with a year is a link."""
    for name in CARDS:
        page = (site / "rewards" / f"{name}.html").read_text("utf-8")
        row = page[page.index("reference repository") :].split("</tr>", 1)[0]
        assert re.search(r'<a href="https?://', row), name
    pickscore = (site / "rewards" / "pickscore.html").read_text("utf-8")
    row = pickscore[pickscore.index("reference paper") :].split("</tr>", 1)[0]
    assert 'href="https://scholar.google.com/scholar?q=Kirstain+et+al.' in row
    gardo = (site / "rewards" / "diversity_weighted.html").read_text("utf-8")
    assert 'href="https://arxiv.org/abs/2512.24138"' in gardo


@needs_chromium
@pytest.mark.parametrize("name", ["speaker_similarity", "video_temporal_flickering"])
def test_search_finds_a_reward_by_name(server, name, tmp_path):
    from .cdp import Browser

    with Browser() as browser:
        browser.open(f"{server}/index.html?q={name}", ready="document.querySelector('.md-search-result__item')")
        first = browser.evaluate("document.querySelector('.md-search-result__item a').getAttribute('href')")
        assert first.split("?")[0].endswith(f"rewards/{name}.html"), first
        browser.screenshot(tmp_path / f"search-{name}.png")
        assert _external(browser.requests) == [] and browser.errors == [], (browser.requests, browser.errors)


def test_the_remote_asset_check_sees_what_it_should():
    """The pattern flags assets from elsewhere (the offline plugin's unpkg shim, web fonts) and not hyperlinks."""
    assert REMOTE_ASSET.search('<script src="https://unpkg.com/iframe-worker/shim"></script>')
    assert REMOTE_ASSET.search('<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">')
    assert REMOTE_ASSET.search("@font-face{src:url(https://example.test/a.woff2)}")
    assert not REMOTE_ASSET.search('<a href="https://github.com/yifan123/flow_grpo">flow_grpo</a>')
    assert not REMOTE_ASSET.search('<script src="assets/javascripts/bundle.js"></script>')


def test_no_page_shows_markdown_that_did_not_render(site):
    """No built page holds a table left as ``|`` text, a raw Sphinx role or a backtick outside code."""
    found = {
        str(p.relative_to(site)): marks[:3]
        for p in sorted(site.rglob("*.html"))
        if (marks := unrendered(p.read_text("utf-8")))
    }
    assert not found, found


def test_the_unrendered_check_sees_each_mark():
    """The check flags what the broken pages showed (a table split by a blank line, a role, a stray fence) and
    passes a table cell holding a pipe between code spans."""
    page = "<article>{}</article>"
    assert unrendered(page.format("<p>| <code>genai</code> | GenAI-Bench | accuracy |</p>"))
    assert unrendered(page.format("<p>See :class:<code>~rewardzoo.core.processor.RewardResult</code>.</p>"))
    assert unrendered(page.format("<p>its example config is the <code>yaml block of</code>`</p>"))
    assert unrendered(page.format("<td>see :mod:`rewardzoo.jobs`</td>"))
    clean = "<table><tr><td><code>a</code> | <code>b</code></td><td>x</td></tr></table><pre>| a | b |`</pre>"
    assert unrendered(page.format(clean)) == []
