"""The page: well formed, one section per reward, every requested thumbnail embedded, nothing fetched."""

from __future__ import annotations

import base64
import io
import re
import subprocess
import sys
import warnings
import wave

import numpy as np
import pytest
from PIL import Image

from rewardzoo.report import build_report, media

from .conftest import COLUMNS
from .dom import parse

NETWORK = re.compile(r"https?://|(?:src|href)\s*=\s*[\"']?\s*//|url\(\s*[\"']?\s*//|@import", re.I)


@pytest.fixture(scope="module")
def synthetic_page(synthetic, tmp_path_factory):
    out = build_report(synthetic.scores, manifest=synthetic.manifest, out=tmp_path_factory.mktemp("page") / "r.html")
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def demo_page(demo):
    out = build_report(demo.scores, manifest=demo.manifest, config="demo", out=demo.folder / "report.html")
    return out.read_text(encoding="utf-8")


def _no_network(page: str) -> None:
    assert not NETWORK.search(page), NETWORK.search(page).group(0)
    root, errors = parse(page)
    assert errors == []
    for node in root.iter():
        for attr in ("src", "href", "xlink:href", "poster", "srcset", "action"):
            value = node.attrs.get(attr)
            if value is not None:
                assert value.startswith(("data:", "#")), f"<{node.tag} {attr}={value[:60]!r}>"
    assert not root.find_all("script") and not root.find_all("link") and not root.find_all("iframe")


def _decoded(src: str) -> bytes:
    head, _, data = src.partition(",")
    assert head.endswith(";base64"), head
    return base64.b64decode(data, validate=True)


def test_the_page_parses_and_has_one_section_per_reward(synthetic_page):
    root, errors = parse(synthetic_page)
    assert errors == []
    assert [s.attrs["data-reward"] for s in root.find_all("section", class_="reward")] == list(COLUMNS)
    ids = [n.attrs["id"] for n in root.iter() if "id" in n.attrs and n.tag in ("section", "clippath", "path")]
    assert len(ids) == len(set(ids))  # inline SVGs do not reuse each other's clip-path ids


@pytest.mark.parametrize("page", ["synthetic_page", "demo_page"])
def test_no_network_reference(page, request):
    _no_network(request.getfixturevalue(page))


def test_every_shown_sample_embeds_its_thumbnail(synthetic_page):
    root, _ = parse(synthetic_page)
    cards = root.find_all("figure", class_="sample")
    assert len(cards) >= 2 * 8 * 3  # best and worst of three rankable rewards, plus disagreements
    for card in cards:
        imgs = card.find_all("img", class_="thumb")
        assert len(imgs) == 1, card.attrs
        img = Image.open(io.BytesIO(_decoded(imgs[0].attrs["src"])))
        assert img.format == "JPEG" and max(img.size) <= media.THUMB_SIDE


def test_the_header_says_what_was_scored(demo_page, demo):
    root, _ = parse(demo_page)
    header = root.find("header").get_text()
    for fact in ("demo", str(demo.scores), str(demo.manifest), "rows", "9", "numpy", "matplotlib", "rewardzoo"):
        assert fact in header
    rewards = {
        row.children[0].get_text(): [c.get_text() for c in row.children]
        for row in root.find("header").find_all("tr")
        if len(row.children) == 8
    }
    assert rewards["jpeg_compressibility"][2:4] == ["[-inf, 0]", "higher"]
    assert rewards["audio_clipping"][2:4] == ["[0, 1]", "higher"]


def test_demo_media_images_video_frames_and_audio(demo_page):
    root, _ = parse(demo_page)
    videos = root.find_all("img", class_="video")
    assert videos, "no video frames shown"
    strip = Image.open(io.BytesIO(_decoded(videos[0].attrs["src"])))
    assert strip.width > 2 * strip.height  # three frames side by side
    players = root.find_all("audio")
    assert players and root.find_all("img", class_="wave")
    with wave.open(io.BytesIO(_decoded(players[0].attrs["src"]))) as clip:
        assert clip.getframerate() == media.AUDIO_RATE and clip.getnframes() <= media.AUDIO_SECONDS * media.AUDIO_RATE


def test_prompts_are_escaped(synthetic_page):
    root, _ = parse(synthetic_page)
    prompt = root.find("p", class_="prompt")
    assert "<b>&" in prompt.get_text() and not prompt.find_all("b")


def test_without_a_manifest_samples_are_listed_by_line(synthetic, tmp_path):
    page = build_report(synthetic.scores, out=tmp_path / "r.html").read_text(encoding="utf-8")
    root, errors = parse(page)
    assert errors == [] and not root.find_all("img")
    assert root.find_all("figure", class_="sample") and "no manifest given" in page


def test_past_the_media_budget_samples_show_a_note(synthetic, tmp_path, monkeypatch):
    monkeypatch.setattr(media, "MEDIA_BUDGET", 30_000)
    page = build_report(synthetic.scores, manifest=synthetic.manifest, out=tmp_path / "r.html").read_text("utf-8")
    root, _ = parse(page)
    embedded = sum(len(img.attrs["src"]) for img in root.find_all("img"))
    assert embedded <= 30_000
    assert "media budget is spent" in page and "left out past the budget" in page
    assert "At most 0.03 MB of media" in page  # the page states its sampling rule


def test_nulls_constant_and_unapplied_rewards_render_without_warnings(synthetic, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build_report(synthetic.scores, manifest=synthetic.manifest, compare=synthetic.other, out=tmp_path / "r.html")


def test_one_reward_one_row(tmp_path):
    from .conftest import write_scores

    scores = write_scores(tmp_path / "s.jsonl", {"solo": np.array([0.5])})
    page = build_report(scores, out=tmp_path / "r.html").read_text("utf-8")
    assert "nothing to correlate" in page and parse(page)[1] == []


def test_unreadable_media_is_a_note_not_a_failure(tmp_path):
    from .conftest import write_manifest, write_scores

    Image.new("RGB", (8, 8)).save(tmp_path / "ok.png")
    (tmp_path / "broken.png").write_bytes(b"not a png")
    manifest = write_manifest(tmp_path / "m.jsonl", [{"image": "ok.png"}, {"image": "broken.png"}])
    scores = write_scores(tmp_path / "s.jsonl", {"jpeg_compressibility": np.array([-0.1, -0.2])})
    page = build_report(scores, manifest=manifest, out=tmp_path / "r.html").read_text("utf-8")
    assert "image not shown: cannot read image file" in page and "1 could not be read" in page


def test_importing_the_package_stays_light():
    code = (
        "import sys, rewardzoo, rewardzoo.report; "
        "print(sorted(m for m in ('matplotlib', 'scipy', 'torch') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_dollar_signs_in_stream_and_dataset_names_are_text_not_mathtext(tmp_path):
    """`$` opens matplotlib's mathtext: an unbalanced one (`e$\\frac{$`) in a name used to crash the report."""
    from .conftest import write_manifest, write_scores

    names = {"e$\\frac{$": np.array([0.1, 0.5, 0.9, 0.3]), "b$x$": np.array([1.0, 0.2, 0.4, 0.8])}
    scores = write_scores(tmp_path / "s.jsonl", names)
    manifest = write_manifest(
        tmp_path / "m.jsonl", [{"prompt": f"p{i}", "dataset": "d$\\frac{$" if i % 2 else "$"} for i in range(4)]
    )
    page = build_report(scores, manifest=manifest, out=tmp_path / "r.html").read_text("utf-8")
    root, errors = parse(page)
    assert errors == []
    svg_text = " ".join(t.get_text() for svg in root.find_all("svg") for t in svg.find_all("text"))
    assert "e$\\frac{$" in svg_text and "b$x$" in svg_text  # drawn as written, not as math
