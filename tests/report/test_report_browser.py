"""A report renders in headless Chromium: no console message, no request, and a picture that is not blank."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from rewardzoo.report import build_report
from rewardzoo.report.screenshot import render_png

from ..commands import require_chromium


@pytest.fixture(autouse=True)
def _chromium() -> None:
    require_chromium()


def _not_blank(png) -> None:
    img = np.asarray(Image.open(png).convert("RGB"))
    assert img.shape[1] == 1280
    white = (img > 245).all(axis=-1).mean()
    assert white < 0.97, f"{white:.1%} of the screenshot is white"
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50  # text, charts and thumbnails, not a flat fill


def test_the_demo_report_renders_cleanly(demo, tmp_path):
    html = build_report(demo.scores, manifest=demo.manifest, config="demo", out=tmp_path / "demo.html")
    shot = render_png(html, tmp_path / "demo.png", timeout=120)
    assert shot.console == [], shot.console
    assert shot.requests == [], shot.requests
    _not_blank(shot.png)


def test_a_compare_report_renders_cleanly(synthetic, tmp_path):
    html = build_report(synthetic.scores, manifest=synthetic.manifest, compare=synthetic.other, out=tmp_path / "c.html")
    shot = render_png(html, tmp_path / "c.png", timeout=120)
    assert shot.console == [] and shot.requests == [], (shot.console, shot.requests)
    _not_blank(shot.png)


def test_the_checks_see_faults(tmp_path):
    """The method catches what it should: a script error and a remote image."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><body><p>x</p><img src="http://example.test/a.png">'
        "<script>undefinedFunction();</script></body></html>",
        encoding="utf-8",
    )
    shot = render_png(page, tmp_path / "bad.png", width=400, height=300, timeout=120)
    assert any("Uncaught ReferenceError" in m for m in shot.console), shot.stderr[-2000:]
    assert "http://example.test/a.png" in shot.requests
