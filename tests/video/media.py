"""Generated media for the video tests (a helper module with a unique name, imported by the tests)."""

from __future__ import annotations

import numpy as np

from rewardzoo.testing import CLIP_PREPROCESS, TINY_VIDEO_OPEN_CLIP  # noqa: F401  (re-exported

T_FRAMES = 30
STEP = 8  # frame i of the ramp clip is a flat gray of value STEP * i, so a decoded frame names its index


def ramp_frames(t: int = T_FRAMES, size: int = 64) -> np.ndarray:
    """(t, size, size, 3) uint8, frame i uniformly STEP * i."""
    return np.repeat((np.arange(t, dtype=np.uint8) * STEP)[:, None, None, None], size * size * 3, axis=1).reshape(
        t, size, size, 3
    )


def textured_frames(t: int = 12, height: int = 48, width: int = 64, seed: int = 0) -> np.ndarray:
    """(t, H, W, 3) uint8: a smooth random texture drifting one pixel per frame, plus noise."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (height // 4, (width + t) // 4 + 1, 3)).repeat(4, 0).repeat(4, 1)
    frames = []
    for i in range(t):
        f = base[:height, i : i + width].astype(np.int64) + rng.integers(-20, 21, (height, width, 3))
        frames.append(np.clip(f, 0, 255).astype(np.uint8))
    return np.stack(frames)


def frame_index(frame: np.ndarray) -> int:
    """Which ramp frame a decoded frame is (H.264 is lossy: the gray level is off by a few units)."""
    return int(round(float(frame.mean()) / STEP))


# The tiny open_clip config (one text layer) and preprocessing of the video tests' clip_dir, from rewardzoo.testing.
TINY_CLIP = TINY_VIDEO_OPEN_CLIP


def write_ramp_clip(path, frames: int, height: int = 720, width: int = 1280) -> None:
    """A moving colour ramp, ``frames`` frames of ``width x height`` at 30 fps, H.264 (ultrafast), encoded one frame
    at a time (the memory tests' real-sized clip; never held whole)."""
    from fractions import Fraction

    import av

    y = np.arange(height, dtype=np.int32)[:, None]
    x = np.arange(width, dtype=np.int32)[None, :]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(30), options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(frames):
            r = np.broadcast_to((x + 3 * i) % 256, (height, width))
            g = np.broadcast_to((y + 2 * i) % 256, (height, width))
            b = ((x + y) // 4 + 5 * i) % 256
            frame = np.stack([r, g, b], -1).astype(np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
