"""GenEval end to end: one call on 16 images against the same reward called once per image.

The batched call runs the detector once per image size and every colour crop of the call through CLIP
in one batch; the loop (flow_grpo's server pattern without the server) pays one forward per image and
per crop. Both use the same reward instance and model, on 16 RGB images 512x512 with GenEval ``colors``
and ``counting`` metadata, at GenEval's detector resolution (shorter side 800).

Models: random-init Mask2Former (``--model tiny``: the test model, which measures batching and
post-processing, not a real checkpoint's compute; ``--model swin-s``: the architecture of
``facebook/mask2former-swin-small-coco-instance``, random weights, slow on a CPU), with a tiny open_clip
colour classifier. The class head is biased towards "dog" so that detections, and therefore colour crops,
exist.

Run: ``python benchmarks/bench_geneval.py [--quick] [--model tiny|swin-s]``. Ratios > 1: batched is faster.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

from results_io import figure, measure, write_results
from timing import interleaved

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_detector(path: Path, model: str) -> str:
    import torch
    from transformers import Mask2FormerConfig, Mask2FormerForUniversalSegmentation, SwinConfig

    from rewardzoo.rewards.image.geneval_rules import CLASS_NAMES

    if model == "tiny":
        swin = SwinConfig(
            embed_dim=16,
            depths=[1, 1, 1, 1],
            num_heads=[1, 1, 1, 1],
            window_size=4,
            drop_path_rate=0.0,
            out_features=["stage1", "stage2", "stage3", "stage4"],
        )
        cfg = Mask2FormerConfig(
            backbone_config=swin,
            feature_size=32,
            mask_feature_size=32,
            hidden_dim=32,
            encoder_feedforward_dim=64,
            encoder_layers=1,
            decoder_layers=2,
            num_attention_heads=2,
            dim_feedforward=64,
            num_queries=12,
            num_labels=80,
        )
    else:
        swin = SwinConfig(
            embed_dim=96,
            depths=[2, 2, 18, 2],
            num_heads=[3, 6, 12, 24],
            window_size=7,
            drop_path_rate=0.0,
            out_features=["stage1", "stage2", "stage3", "stage4"],
        )
        cfg = Mask2FormerConfig(backbone_config=swin, num_labels=80)
    torch.manual_seed(0)
    net = Mask2FormerForUniversalSegmentation(cfg).eval()
    with torch.no_grad():
        net.class_predictor.bias[CLASS_NAMES.index("dog")] += 8.0
    net.save_pretrained(path)
    return str(path)


def bench(n: int, repeats: int, model: str) -> dict:
    import numpy as np
    import torch

    from rewardzoo.rewards.image.geneval import GenEval
    from rewardzoo.testing import tiny_open_clip_dir

    with tempfile.TemporaryDirectory() as tmp:
        detector = build_detector(Path(tmp) / "m2f", model)
        clip = tiny_open_clip_dir(Path(tmp) / "clip")
        # the whole call stacked (the default on CUDA) vs one image per forward (the default elsewhere)
        reward = GenEval(detector, clip_model=str(clip), clip_pretrained=None, detector_batch=n)
        single = GenEval(detector, clip_model=str(clip), clip_pretrained=None, detector_batch=1)
    rng = np.random.default_rng(0)
    images = [torch.from_numpy(rng.integers(0, 256, (3, 512, 512), dtype=np.uint8)) for _ in range(n)]
    metadata = [
        json.dumps({"tag": "colors", "include": [{"class": "dog", "count": 1, "color": "red"}]})
        if i % 2 == 0
        else json.dumps(
            {"tag": "counting", "include": [{"class": "dog", "count": 2}], "exclude": [{"class": "dog", "count": 3}]}
        )
        for i in range(n)
    ]
    batched_out = reward(image=images, metadata=metadata)
    looped = [reward(image=[im], metadata=[m]).rewards[0] for im, m in zip(images, metadata)]
    same = list(batched_out.rewards) == looped == list(single(image=images, metadata=metadata).rewards)
    times, _ = interleaved(
        {
            "per-image loop": lambda: [reward(image=[im], metadata=[m]) for im, m in zip(images, metadata)],
            "batched": lambda: reward(image=images, metadata=metadata),
            "detector_batch 1": lambda: single(image=images, metadata=metadata),
        },
        repeats,
    )
    loop, batched, one = times["per-image loop"], times["batched"], times["detector_batch 1"]
    print(
        f"geneval ({model}), {n} images 512x512: loop {loop:.3f} s | batched {batched:.3f} s ({loop / batched:.2f}x) | "
        f"detector_batch 1 {one:.3f} s ({loop / one:.2f}x) | same scores: {same}"
    )
    label = "tiny random Mask2Former" if model == "tiny" else "random Mask2Former Swin-S (the published architecture)"
    key = model.replace("-", "_")
    workload = (
        f"geneval end to end on {n} RGB images 512x512 (detector at shorter side 800, colour crops through "
        f"a tiny CLIP), {label}, {torch.get_num_threads()} torch thread(s)"
    )
    notes = f"scores identical to the per-image calls: {same}"
    return [
        figure(
            f"geneval.end_to_end.{key}",
            f"{workload}: one call vs the same reward called per image, median of {repeats} interleaved runs",
            measure("rewardzoo batched", n / batched, "images/s"),
            baseline=measure("per-image calls", n / loop, "images/s"),
            ratio=loop / batched,
            ratio_label="x faster",
            rewards=["geneval"],
            notes=notes,
        ),
        figure(
            f"geneval.end_to_end.{key}_detector_batch_1",
            f"{workload}: one call with `detector_batch: 1` (one "
            "detector forward per image, CLIP crops still batched) vs the same reward called per image, median "
            f"of {repeats} interleaved runs",
            measure("rewardzoo detector_batch 1", n / one, "images/s"),
            baseline=measure("per-image calls", n / loop, "images/s"),
            ratio=loop / one,
            ratio_label="x faster",
            rewards=["geneval"],
            notes=notes,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--model", choices=("tiny", "swin-s"), default="tiny")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(args.threads)
    repeats = 3 if args.quick else 5
    if args.model == "swin-s":
        repeats = 1 if args.quick else 3
    write_results(
        __file__, bench(16, repeats, args.model), parts=[f"geneval.end_to_end.{args.model.replace('-', '_')}"]
    )


if __name__ == "__main__":
    main()
