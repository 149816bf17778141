"""The demo's media, made on the fly (a few kB of arithmetic, nothing bundled): three images of increasing
detail, three short videos (static, smoothly moving, strobing), three audio clips (a tone, noise, a clipped tone)
and three edits of the gradient (one square redrawn inside its mask, the same without the mask, the whole image
redrawn). ``rewardzoo demo`` scores them, ``rewardzoo plan`` probes with them and the report's demo writes them
to files: the front doors share them from here.
"""

from __future__ import annotations

import math

import numpy as np

from ..spec.sample import Sample

SR = 16000


def demo_samples() -> list[tuple[str, Sample]]:
    """(label, sample) pairs: images in one group, videos and audio clips."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:256, 0:256] / 255.0
    gradient = np.stack([x, y, 0.5 * (x + y)], axis=-1)
    checker = ((np.floor(x * 16) + np.floor(y * 16)) % 2)[..., None].repeat(3, axis=-1)
    noise = rng.random((256, 256, 3))
    images = [("flat gradient", gradient), ("checkerboard", checker), ("noise", noise)]

    frames = 16
    static = np.repeat((gradient[None, :64, :64] * 255).astype(np.uint8), frames, axis=0)
    moving = np.zeros((frames, 64, 64, 3), np.uint8)
    for k in range(frames):
        moving[k, 20:36, 4 + 3 * k : 20 + 3 * k] = 255
    strobe = np.zeros((frames, 64, 64, 3), np.uint8)
    strobe[::2] = 255
    videos = [("static video", static), ("moving square", moving), ("strobe video", strobe)]

    t = np.arange(3 * SR) / SR
    tone = 0.3 * np.sin(2 * math.pi * 440 * t)
    hiss = 0.1 * rng.standard_normal(t.size)
    clipped = np.clip(1.6 * np.sin(2 * math.pi * 220 * t), -1.0, 1.0)
    clips = [("440 Hz tone", tone), ("white noise", hiss), ("clipped tone", clipped)]

    out = [
        (label, Sample(image=img.astype(np.float32), prompt=label, dataset="image", group_id="images"))
        for label, img in images
    ]
    out += [(label, Sample(video=v, prompt=label, dataset="video")) for label, v in videos]
    # every clip is compared with the clean 440 Hz tone by the reference-based rewards (si_sdr, pesq, stoi); its
    # label is the text speech_duration_ratio times
    reference = tone.astype(np.float32)
    out += [
        (
            label,
            Sample(
                audio=a.astype(np.float32),
                audio_sample_rate=SR,
                prompt=label,
                condition_audio=reference,
                condition_audio_sample_rate=SR,
                dataset="audio",
            ),
        )
        for label, a in clips
    ]
    # edits of the flat gradient: a square redrawn inside its mask (the rest untouched), then the whole image redrawn
    source = (gradient * 255).astype(np.uint8)
    mask = np.zeros((256, 256), np.uint8)
    mask[96:160, 96:160] = 255
    square = source.copy()
    square[96:160, 96:160] = (noise[96:160, 96:160] * 255).astype(np.uint8)
    redrawn = (noise * 255).astype(np.uint8)
    edits = [
        ("square redrawn, masked", square, [source, mask]),
        ("square redrawn, no mask", square, [source]),
        ("whole image redrawn", redrawn, [source, mask]),
    ]
    out += [
        (label, Sample(image=img, condition_images=conds, prompt="replace the centre with noise", dataset="edit"))
        for label, img, conds in edits
    ]
    return out
