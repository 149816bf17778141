"""image_quality benchmark: the processor (images of one size batched) against pyiqa's own inference loop.

The network is pyiqa's DBCNN (VGG-16 + SCNN) at its published size, random init (speed does not depend on
the weight values), saved as safetensors. Baseline: ``pyiqa.create_metric("dbcnn")`` with the same weights,
called on each image file in turn (``metric(path)``: pyiqa reads the file and runs its network), as pyiqa's
``inference_iqa.py`` loops. Contestant: ``RewardProcessor`` with one ``image_quality`` entry on the same
files. Workload: 8 PNG images 256x256. Both sides build their backbones without a download (timm and
torchvision random-init; pyiqa's own loader is a no-op for the SCNN branch). Also reported: the largest
score difference.

Run: ``python benchmarks/bench_image_quality.py [--quick]`` (about 2 minutes on the shared 2-core CPU
machine). Ratios > 1 mean rewardzoo is faster.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
from results_io import figure, measure, write_results
from timing import interleaved

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

IMAGES, SIDE, METRIC = 8, 256, "dbcnn"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import pyiqa
    import torch
    import torchvision
    from PIL import Image
    from pyiqa.archs import dbcnn_arch
    from safetensors.torch import save_file

    from rewardzoo.core.processor import RewardProcessor
    from rewardzoo.spec.sample import Sample

    repeats = 2 if args.quick else 3
    torch.set_num_threads(2)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    vgg16 = torchvision.models.vgg16
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(IMAGES):
            paths.append(str(Path(tmp) / f"{i}.png"))
            Image.fromarray(rng.integers(0, 256, (SIDE, SIDE, 3), dtype=np.uint8)).save(paths[-1])
        with (
            mock.patch.object(torchvision.models, "vgg16", lambda **k: vgg16(**{**k, "weights": None})),
            mock.patch.object(dbcnn_arch, "load_pretrained_network", lambda *a, **k: None),
        ):
            metric = pyiqa.create_metric(METRIC, device="cpu", pretrained=False)
        weights = str(Path(tmp) / "dbcnn.safetensors")
        save_file({k: v.contiguous() for k, v in metric.net.state_dict().items()}, weights)
        proc = RewardProcessor([{"name": "image_quality", "model_path": weights, "kwargs": {"metric": METRIC}}])
        samples = [Sample(image=p) for p in paths]

        def pyiqa_loop() -> list[float]:
            return [float(metric(p)) for p in paths]

        def ours() -> np.ndarray:
            return proc(samples).rewards["image_quality"]

        ref, got = pyiqa_loop(), ours()
        diff = float(np.max(np.abs(np.asarray(got) - np.asarray(ref))))
        times, _ = interleaved({"pyiqa loop": pyiqa_loop, "rewardzoo": ours}, repeats)
    base, mine = times["pyiqa loop"], times["rewardzoo"]
    print(
        f"image_quality ({METRIC}), {IMAGES} images: pyiqa loop {base:.2f} s | rewardzoo {mine:.2f} s | "
        f"{base / mine:.2f}x; max |score difference| {diff:.2e}"
    )
    workload = (
        f"{IMAGES} PNG images {SIDE}x{SIDE}, pyiqa DBCNN at its published size (random init), CPU, 2 torch threads"
    )
    figs = [
        figure(
            "image_quality.processor.pyiqa_loop",
            f"`image_quality` (`metric: {METRIC}`) through the processor (one batch) vs pyiqa's own loop "
            f"(`metric(path)` per image); {workload}, median of {repeats} interleaved repetitions",
            measure("rewardzoo", IMAGES / mine, "img/s"),
            baseline=measure("pyiqa loop", IMAGES / base, "img/s"),
            ratio=base / mine,
            ratio_label="x faster",
            rewards=["image_quality"],
        ),
        figure(
            "image_quality.processor.agreement",
            f"`image_quality` (`metric: {METRIC}`) vs pyiqa's loop: max |score difference| "
            f"(mean score {float(np.mean(ref)):.3f}); {workload}",
            measure("difference", diff, ""),
            rewards=["image_quality"],
        ),
    ]
    write_results(__file__, figs)


if __name__ == "__main__":
    main()
