"""edit_preservation on 64 edit pairs of 512x512 against scikit-image called once per pair.

Each pair is a smooth random source, a result that redraws a 192x192 square and adds mild noise elsewhere, and the
square's mask (every other pair without a mask: the whole image). rewardzoo: one processor call over the 64 NumPy
pairs (conversion to uint8 tensors, the masked metric batched per size). Baseline: scikit-image on each pair as
float64 in [0, 1] — ``structural_similarity(..., gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
full=True)`` and the SSIM map's mean outside the mask (border cropped as scikit-image's mean does), and
``peak_signal_noise_ratio`` over the pixels outside the mask. The scores are checked to agree (max |difference| in
the notes).

Run: ``python benchmarks/bench_edit.py [--quick] [--threads N]``. Ratios > 1: rewardzoo is faster.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from results_io import figure, measure, write_results
from timing import interleaved

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

N, SIZE, SQUARE = 64, 512, slice(160, 352)


def pairs(n: int) -> list[tuple]:
    """(source, result, mask or None) uint8 NumPy arrays."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        coarse = (rng.random((SIZE // 16, SIZE // 16, 3)) * 255).astype(np.uint8)
        src = np.asarray(Image.fromarray(coarse).resize((SIZE, SIZE), Image.BICUBIC))
        res = np.clip(src + rng.normal(0, 4, src.shape), 0, 255).astype(np.uint8)
        res[SQUARE, SQUARE] = rng.integers(0, 256, res[SQUARE, SQUARE].shape, dtype=np.uint8)
        mask = None
        if i % 2 == 0:
            mask = np.zeros((SIZE, SIZE), np.uint8)
            mask[SQUARE, SQUARE] = 255
        out.append((src, res, mask))
    return out


def skimage_scores(metric: str, data: list[tuple]) -> list[float]:
    import numpy as np
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    scores = []
    for src, res, mask in data:
        x, y = src / 255.0, res / 255.0
        keep = np.ones(src.shape[:2], bool) if mask is None else mask < 128
        if metric == "psnr":
            scores.append(peak_signal_noise_ratio(x[keep], y[keep], data_range=1.0))
        else:
            _, full = structural_similarity(
                x,
                y,
                channel_axis=-1,
                gaussian_weights=True,
                sigma=1.5,
                use_sample_covariance=False,
                data_range=1.0,
                full=True,
            )
            scores.append(float(full[5:-5, 5:-5].mean(-1)[keep[5:-5, 5:-5]].mean()))
    return scores


def bench(metric: str, data: list[tuple], repeats: int) -> dict:
    import numpy as np
    import torch

    from rewardzoo import RewardProcessor, Sample

    proc = RewardProcessor([{"name": "edit_preservation", "batch_size": len(data), "kwargs": {"metric": metric}}])
    samples = [Sample(image=res, condition_images=[src] if mask is None else [src, mask]) for src, res, mask in data]
    ours = proc(samples).rewards["edit_preservation"]
    diff = float(np.abs(ours - np.asarray(skimage_scores(metric, data))).max())
    times, _ = interleaved(
        {"scikit-image per pair": lambda: skimage_scores(metric, data), "rewardzoo": lambda: proc(samples)}, repeats
    )
    base, mine = times["scikit-image per pair"], times["rewardzoo"]
    print(
        f"edit_preservation {metric}, {len(data)} pairs {SIZE}x{SIZE}: scikit-image {base:.3f} s | rewardzoo "
        f"{mine:.3f} s ({base / mine:.2f}x) | max |difference| {diff:.2g}"
    )
    return figure(
        f"edit.preservation.{metric}",
        f"`edit_preservation` ({metric}, half the pairs masked) through the processor vs scikit-image per "
        f"pair; {len(data)} pairs {SIZE}x{SIZE} (NumPy uint8), {torch.get_num_threads()} torch thread(s), "
        f"median of {repeats} interleaved runs",
        measure("rewardzoo", len(data) / mine, "pairs/s"),
        baseline=measure("scikit-image per pair", len(data) / base, "pairs/s"),
        ratio=base / mine,
        ratio_label="x faster",
        rewards=["edit_preservation"],
        notes=f"max |score difference| {diff:.2g}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(args.threads)
    data = pairs(N)
    repeats = 3 if args.quick else 5
    write_results(__file__, [bench(metric, data, repeats) for metric in ("ssim", "psnr")])


if __name__ == "__main__":
    main()
