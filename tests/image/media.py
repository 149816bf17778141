"""Generated test media for tests/image (no files committed): images, and edits with a known edited region."""

from __future__ import annotations

import numpy as np
from PIL import Image


def make_images(n: int, size=(96, 80), seed: int = 0) -> list[Image.Image]:
    """Smooth random RGB images (upsampled noise) of (width, height) `size` (or a list of sizes)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        w, h = size if not isinstance(size, list) else size[i % len(size)]
        low = rng.integers(0, 256, (max(2, h // 8), max(2, w // 8), 3), dtype=np.uint8)
        img = Image.fromarray(low).resize((w, h), Image.BICUBIC)
        out.append(img)
    return out


PROMPTS = [
    "a photo of a cat",
    "a red car on a street",
    "an astronaut riding a horse",
    "a bowl of soup",
    "two dogs playing in the snow at night",
    "a cat",
]


# ------------------------------------------------------------------------------------------ edits
EDIT = (slice(20, 44), slice(30, 70))  # the edited region of every generated pair (rows, columns)


def edit_pair(seed: int, h: int = 64, w: int = 96, noise: float = 6.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source, result, mask) uint8: a smooth random source; the result redraws EDIT and adds mild noise elsewhere."""
    rng = np.random.default_rng(seed)
    coarse = rng.random((h // 8 + 1, w // 8 + 1, 3))
    src = np.asarray(Image.fromarray((coarse * 255).astype(np.uint8)).resize((w, h), Image.BICUBIC))
    res = np.clip(src + rng.normal(0, noise, src.shape), 0, 255).astype(np.uint8)
    res[EDIT] = rng.integers(0, 256, res[EDIT].shape, dtype=np.uint8)
    mask = np.zeros((h, w), dtype=np.uint8)
    mask[EDIT] = 255
    return src, res, mask


def t(a: np.ndarray):
    """An (H, W[, 3]) uint8 array as the (3, H, W) uint8 tensor a reward receives."""
    import torch

    a = np.repeat(a[..., None], 3, -1) if a.ndim == 2 else a
    return torch.from_numpy(np.array(a)).permute(2, 0, 1)


def reference(metric: str, src: np.ndarray, res: np.ndarray, mask: np.ndarray | None) -> float:
    """scikit-image / torchmetrics on float64 images in [0, 1] (scikit-image imported here: the tests that call
    this skip without it)."""
    import torch
    from skimage import metrics as skimage_metrics

    x, y = src / 255.0, res / 255.0
    keep = np.ones(src.shape[:2], bool) if mask is None else mask < 128
    if metric == "psnr":
        return skimage_metrics.peak_signal_noise_ratio(x[keep], y[keep], data_range=1.0)
    if metric == "l1":
        from torchmetrics.functional import mean_absolute_error

        return float(mean_absolute_error(torch.from_numpy(y[keep]), torch.from_numpy(x[keep])))
    kwargs = dict(channel_axis=-1, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1.0)
    if mask is None:
        return skimage_metrics.structural_similarity(x, y, **kwargs)
    _, full = skimage_metrics.structural_similarity(x, y, full=True, **kwargs)
    pad = 5  # (win_size - 1) // 2 of the 11x11 window skimage derives from sigma 1.5, truncate 3.5
    return float(full[pad:-pad, pad:-pad].mean(-1)[keep[pad:-pad, pad:-pad]].mean())


def edit_files(root, n: int = 3) -> tuple[list[dict], list[float]]:
    """An edit manifest's rows (every other one with a mask) written under ``root``, and psnr per row."""
    rows, want = [], []
    for i in range(n):
        src, res, mask = edit_pair(10 + i)
        for name, arr in (("src", src), ("res", res), ("mask", mask)):
            Image.fromarray(arr).save(root / f"{name}{i}.png")
        conds = [f"src{i}.png", f"mask{i}.png"] if i % 2 == 0 else [f"src{i}.png"]
        rows.append({"image": f"res{i}.png", "condition_images": conds, "prompt": "make the sky pink"})
        want.append(reference("psnr", src, res, mask if i % 2 == 0 else None))
    return rows, want
