"""A sample's media as small inline HTML: image thumbnails, a strip of video frames, an audio player.

Everything is embedded as base64 ``data:`` URIs, scaled down by the limits below, and counted against a
budget for the whole page; past it, a sample is shown without its media (the page says so).
"""

from __future__ import annotations

import base64
import html
import io
import wave
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from ..spec.sample import Sample

THUMB_SIDE = 160
VIDEO_FRAMES = 3
VIDEO_FRAME_SIDE = 112
JPEG_QUALITY = 80
AUDIO_SECONDS = 3.0
AUDIO_RATE = 8000
#: The longest audio file read for a waveform picture (longer files are not decoded).
AUDIO_MAX_SECONDS = 600.0
#: The most pixels of an image decoded for a thumbnail (after a JPEG's reduced-scale decoding); larger images are
#: refused from their header, before anything is decoded.
THUMB_MAX_PIXELS = 40_000_000
#: Characters of embedded media per page.
MEDIA_BUDGET = 12_000_000
TEXT_CHARS = 300


def describe_limits(budget: int = MEDIA_BUDGET) -> str:
    """The sampling rules, as the report states them."""
    return (
        f"Images are downscaled to at most {THUMB_SIDE} px on the longer side (JPEG, quality {JPEG_QUALITY}); "
        f"videos show {VIDEO_FRAMES} evenly spaced frames of at most {VIDEO_FRAME_SIDE} px; audio plays its first "
        f"{AUDIO_SECONDS:g} s, mono, resampled to {AUDIO_RATE} Hz (16-bit WAV), next to a picture of its whole "
        f"waveform; prompts and completions are cut at {TEXT_CHARS} characters. At most {budget / 1e6:g} MB of "
        "media are embedded in all; past that, samples are listed without their media."
    )


def _data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _jpeg(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    return buf.getvalue()


def image_thumbnail(path: Any) -> str:
    """An ``<img>`` of the image at ``path``, at most :data:`THUMB_SIDE` px; a JPEG is decoded at a reduced scale,
    and an image over :data:`THUMB_MAX_PIXELS` (read from its header) is refused before it is decoded."""
    from ..shared.media import check_pixels, is_path, open_image, to_pil_rgb

    if is_path(path):
        img = to_pil_rgb(open_image(path, THUMB_MAX_PIXELS, draft=(THUMB_SIDE, THUMB_SIDE)))
    else:
        img = to_pil_rgb(check_pixels(path, THUMB_MAX_PIXELS))
    img.thumbnail((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS)
    return f'<img class="thumb" alt="image" src="{_data_uri("image/jpeg", _jpeg(img))}">'


def video_strip(path: Any) -> str:
    """An ``<img>`` of :data:`VIDEO_FRAMES` evenly spaced frames side by side."""
    from ..shared.video import read_video

    frames = read_video(path, num_frames=VIDEO_FRAMES)
    tiles = []
    for frame in frames:
        tile = Image.fromarray(np.ascontiguousarray(frame))
        tile.thumbnail((VIDEO_FRAME_SIDE, VIDEO_FRAME_SIDE), Image.Resampling.LANCZOS)
        tiles.append(tile)
    gap = 2
    strip = Image.new(
        "RGB", (sum(t.width for t in tiles) + gap * (len(tiles) - 1), max(t.height for t in tiles)), "white"
    )
    x = 0
    for tile in tiles:
        strip.paste(tile, (x, 0))
        x += tile.width + gap
    return f'<img class="thumb video" alt="{len(tiles)} video frames" src="{_data_uri("image/jpeg", _jpeg(strip))}">'


def audio_player(path: Any) -> str:
    """A waveform picture and an ``<audio>`` player of the first :data:`AUDIO_SECONDS` s."""
    from scipy.signal import resample_poly

    from ..shared.audio import read_audio_file
    from .plots import waveform_png

    audio, rate = read_audio_file(path, max_seconds=AUDIO_MAX_SECONDS)
    source_rate = rate
    mono = audio.mean(axis=0)
    picture = _data_uri("image/png", waveform_png(np.clip(mono, -1, 1), rate))
    clip = mono[: int(AUDIO_SECONDS * rate)]
    if rate > AUDIO_RATE:
        g = np.gcd(rate, AUDIO_RATE)
        clip, rate = resample_poly(clip, AUDIO_RATE // g, rate // g), AUDIO_RATE
    pcm = (np.clip(clip, -1, 1) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(int(rate))
        out.writeframes(pcm.tobytes())
    seconds = audio.shape[1] / source_rate
    return (
        f'<img class="wave" alt="waveform of {seconds:.1f} s" src="{picture}">'
        f'<audio controls preload="none" src="{_data_uri("audio/wav", buf.getvalue())}"></audio>'
    )


@dataclass
class MediaEmbedder:
    """Media fragments for samples, each made once (cached by row) and charged to ``budget`` characters
    every time it is placed on the page. ``failed``: media that could not be read (shown as a note)."""

    budget: int = MEDIA_BUDGET
    used: int = 0
    placed: int = 0
    over_budget: int = 0
    failed: int = 0
    _cache: dict[int, str] = field(default_factory=dict)

    def fragment(self, row: int, sample: Sample | None) -> str:
        """The media of ``sample`` (row ``row``) as HTML, or a short note why there is none."""
        if sample is None:
            return ""
        if row not in self._cache:
            self._cache[row] = self._make(sample)
        media = self._cache[row]
        if "data:" not in media:
            return media
        if self.used + len(media) > self.budget:
            self.over_budget += 1
            return '<span class="note">media not embedded: the page\'s media budget is spent</span>'
        self.used += len(media)
        self.placed += 1
        return media

    def _make(self, sample: Sample) -> str:
        parts = []
        for kind, make in (("image", image_thumbnail), ("video", video_strip), ("audio", audio_player)):
            value = getattr(sample, kind)
            if value is None:
                continue
            try:
                parts.append(make(value))
            except Exception as exc:
                self.failed += 1
                why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                parts.append(f'<span class="note">{kind} not shown: {html.escape(why[:200])}</span>')
        return "".join(parts)


def sample_text(sample: Sample | None) -> str:
    """The prompt (and completion) of a sample, escaped and shortened."""
    if sample is None:
        return ""
    out = []
    for label, text in (("prompt", sample.prompt), ("completion", sample.completion)):
        if text:
            short = text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + "…"
            out.append(f'<p class="{label}"><span class="muted">{label}:</span> {html.escape(short)}</p>')
    return "".join(out)
