#!/usr/bin/env python
"""Make docs/report.png: a screenshot of `rewardzoo report` on the demo's media.

The demo's generated images, videos and audio clips (rewardzoo.jobs.demo.demo_samples) are written to files with
a manifest in a temporary folder, scored with the shipped demo config (`rewardzoo score demo`), reported,
rendered by headless Chromium (/usr/bin/chromium, Debian's `chromium` package) and cropped to the top of
the page, 1280 px wide, as a palette PNG (kept under 300 KB).

    python scripts/make_report_screenshot.py [--out docs/report.png] [--height 1700]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 300_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report.png")
    parser.add_argument("--height", type=int, default=1700, help="CSS pixels of the page kept from its top")
    args = parser.parse_args()
    out, previous = args.out.resolve(), Path.cwd()
    with tempfile.TemporaryDirectory(prefix="rewardzoo-screenshot-") as tmp:
        os.chdir(tmp)  # the page names its inputs as given: short relative paths, not a temporary folder
        try:
            crop = demo_screenshot(args.height)
        finally:
            os.chdir(previous)
    if crop is None:
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    palette = crop.quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    crop.quantize(palette=palette, dither=Image.Dither.FLOYDSTEINBERG).save(out, optimize=True)  # dithered: no banding
    size = out.stat().st_size
    print(f"wrote {out} ({crop.width}x{crop.height}, {size / 1e3:.0f} kB)")
    if size > MAX_BYTES:
        print(f"{out} is over {MAX_BYTES / 1e3:.0f} kB: lower --height", file=sys.stderr)
        return 1
    return 0


def demo_screenshot(height: int) -> Image.Image | None:
    """Score and report the demo media in the current folder; the top ``height`` px of the page (None: failed)."""
    from rewardzoo.cli import main as rewardzoo
    from rewardzoo.report import build_report
    from rewardzoo.report.demo import write_demo_manifest
    from rewardzoo.report.screenshot import render_png

    manifest = write_demo_manifest("media")
    if rewardzoo(["score", "demo", "-i", str(manifest), "-o", "scores.jsonl", "-q"]) != 0:
        return None
    html = build_report("scores.jsonl", manifest=manifest, config="demo", out="report.html", top=3)
    shot = render_png(html, "full.png", width=1280, height=height + 200)
    if shot.console or shot.requests:
        print(f"the page logged {shot.console} and requested {shot.requests}", file=sys.stderr)
        return None
    with Image.open(shot.png) as full:
        return full.convert("RGB").crop((0, 0, 1280, height))


if __name__ == "__main__":
    raise SystemExit(main())
