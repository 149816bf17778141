"""imaging_quality benchmark: rewardzoo's batched MUSIQ against VBench's frame-by-frame loop.

The model is pyiqa's MUSIQ at its published size (``pyiqa.archs.musiq_arch.MUSIQ`` with pyiqa's default
dimensions, random init: speed does not depend on the weight values; the linear head rescaled so
scores come out on a MOS-like 0-100 scale), saved as a state dict and loaded by both sides from it. Workload: 2 videos of 8 frames 288x512 (16:9, no resize needed under
``longer``). Baseline: VBench's ``technical_quality`` loop re-written from its source (float 0-255
frames, ``transform(images, "longer")``, one ``model(frame)`` call per frame, mean per video / 100).
Contestant: ``video_imaging_quality`` with ``preset: vbench`` (all frames of a size in one batch).
Also reported: the largest score difference between the two on these frames.

Run: ``python benchmarks/bench_imaging_quality.py [--quick]`` (about 9 minutes on the shared 2-core CPU
machine). Ratios > 1 mean rewardzoo is faster.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
from results_io import figure, measure, write_results
from timing import interleaved

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VIDEOS, FRAMES, HEIGHT, WIDTH = 2, 8, 288, 512


def vbench_scores(model, videos) -> list[float]:
    """VBench's imaging-quality loop on float 0-255 videos (T, C, H, W), 'longer' mode (no resize here)."""
    import torch

    out = []
    with torch.no_grad():
        for images in videos:
            images = images / 255.0  # the longer side is 512: VBench's transform only divides
            acc = sum(float(model(images[i].unsqueeze(0))) for i in range(len(images)))
            out.append(acc / len(images) / 100.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch
    from pyiqa.archs.musiq_arch import MUSIQ

    from rewardzoo import load_reward

    repeats = 2 if args.quick else 3
    torch.set_num_threads(2)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    arrays = [rng.integers(0, 256, (FRAMES, HEIGHT, WIDTH, 3), dtype=np.uint8) for _ in range(VIDEOS)]
    vbench_videos = [torch.Tensor(a.astype(np.uint8)).permute(0, 3, 1, 2) for a in arrays]  # load_video
    ours_videos = [torch.from_numpy(a).permute(0, 3, 1, 2).float() / 255 for a in arrays]
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "musiq_full_size_random.pth")
        net = MUSIQ(pretrained=False)
        with torch.no_grad():  # a MOS-like head (tens), so the score difference is read on a realistic scale
            net.head.weight.normal_(0.0, 5.0)
            net.head.bias.fill_(50.0)
        torch.save(net.state_dict(), path)
        model = MUSIQ(pretrained_model_path=path)  # VBench's construction
        model.training = False
        reward = load_reward({"name": "video_imaging_quality", "model_path": path, "device": "cpu"}, preset="vbench")
    ref = vbench_scores(model, vbench_videos)
    got = reward(video=ours_videos).rewards
    diff = float(np.max(np.abs(np.asarray(got) - np.asarray(ref))))
    times, _ = interleaved(
        {"VBench loop": lambda: vbench_scores(model, vbench_videos), "rewardzoo": lambda: reward(video=ours_videos)},
        repeats,
    )
    base, ours = times["VBench loop"], times["rewardzoo"]
    n = VIDEOS * FRAMES
    print(
        f"video_imaging_quality, {n} frames: VBench loop {base:.2f} s | rewardzoo {ours:.2f} s | "
        f"{base / ours:.2f}x; max |score difference| {diff:.2e}"
    )
    workload = (
        f"{VIDEOS} videos x {FRAMES} frames {HEIGHT}x{WIDTH}, pyiqa MUSIQ at its published size (random init), "
        "CPU, 2 torch threads"
    )
    figs = [
        figure(
            "imaging_quality.video.vbench_loop",
            f"`video_imaging_quality` (`preset: vbench`, frames of one size "
            f"batched) vs VBench's frame-by-frame loop on the same model; {workload}, median of {repeats} "
            "interleaved repetitions",
            measure("rewardzoo", n / ours, "frames/s"),
            baseline=measure("VBench loop", n / base, "frames/s"),
            ratio=base / ours,
            ratio_label="x faster",
            rewards=["video_imaging_quality", "imaging_quality"],
        ),
        figure(
            "imaging_quality.video.agreement",
            f"`video_imaging_quality` (`preset: vbench`) vs VBench's loop: max "
            f"|score difference| (mean score {float(np.mean(ref)):.3f}); {workload}",
            measure("difference", diff, ""),
            rewards=["video_imaging_quality", "imaging_quality"],
        ),
    ]
    write_results(__file__, figs)


if __name__ == "__main__":
    main()
