"""imagebind_score benchmark: rewardzoo's batched call through the processor against Flow-Factory's own ImageBind
reward (``ImageBindRewardModel.__call__`` of the snapshot in ``../shared/clients``) on the same tiny model.

The model is ImageBind's own ``ImageBindModel`` built tiny and random (``rewardzoo.testing.tiny_imagebind_dir``);
both sides load the same weights. Workload: a batch of text-to-audio-video samples (prompt, a 16-frame video
240x426 as uint8 (T, C, H, W), 5 s of stereo 48 kHz audio), ``mode: all``. Baseline: Flow-Factory's call on that
batch (its preprocessing, its per-call BPE tokenizer load, one model forward). Contestant: ``imagebind_score``
through ``RewardProcessor`` on the same samples (the engine's conversion, which leaves uint8 frames as they are;
the reward converts and resizes only the 10 frames its clips use; one model forward). With a tiny model
the figures measure everything but the model's own compute, which is the same on both sides (one forward of
the same inputs); with the huge model that forward dominates and the ratio tends to 1. Also reported: the
largest score difference between the two.

Needs ImageBind's code (``rewardzoo[imagebind]``, and a pytorchvideo that imports for Flow-Factory's
``imagebind.data``: ``jj-pytorchvideo``, as ``scripts/test`` installs). Run: ``python
benchmarks/bench_imagebind.py [--quick]`` (about 1 minute on the shared 2-core CPU machine). Ratios > 1 mean
rewardzoo is faster.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FLOW_FACTORY = ROOT.parent / "shared" / "clients" / "flow_factory_src" / "src"

SAMPLES, FRAMES, HEIGHT, WIDTH, SECONDS, RATE = 8, 16, 240, 426, 5.0, 48000
PROMPTS = [
    "a dog barking in a park",
    "rain on a tin roof",
    "a violin solo in a hall",
    "waves crashing on rocks",
    "a crowd cheering at a stadium",
    "a train passing a crossing",
    "birds singing at dawn",
    "a car engine starting",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch

    from rewardzoo.core.processor import RewardProcessor
    from rewardzoo.rewards.video.imagebind import DEFAULT_WEIGHTS, ImageBindScore
    from rewardzoo.spec.sample import Sample
    from rewardzoo.testing import tiny_imagebind_dir

    sys.path.insert(0, str(FLOW_FACTORY))
    from flow_factory.rewards.imagebind_reward import ImageBindRewardModel

    repeats = 3 if args.quick else 5
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    videos = [torch.randint(0, 256, (FRAMES, 3, HEIGHT, WIDTH), dtype=torch.uint8, generator=g) for _ in PROMPTS]
    audio = [0.1 * torch.randn(2, int(SECONDS * RATE), generator=g) for _ in PROMPTS]
    samples = [
        Sample(prompt=p, video=v, audio=a.numpy(), audio_sample_rate=RATE) for p, v, a in zip(PROMPTS, videos, audio)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = str(tiny_imagebind_dir(tmp, seed=0))
        entry = {"name": "imagebind_score", "model_path": path, "device": "cpu", "batch_size": SAMPLES}
        proc = RewardProcessor([{**entry, "kwargs": {"mode": "all"}}])
        model = ImageBindScore(path, mode="all").model  # a second load of the same weights for Flow-Factory
    ref = object.__new__(ImageBindRewardModel)  # its __init__ downloads imagebind_huge
    ref.model, ref.mode, ref.device, ref.weights = model, "all", "cpu", dict(DEFAULT_WEIGHTS)

    def flow_factory():
        return ref(prompt=PROMPTS, audio=audio, video=videos, audio_sample_rate=[RATE] * SAMPLES).rewards.numpy()

    def rewardzoo():
        return proc(samples).rewards["imagebind_score"]

    diff = float(np.max(np.abs(rewardzoo() - flow_factory())))
    times, ratios = interleaved({"Flow-Factory": flow_factory, "rewardzoo": rewardzoo}, repeats)
    base, ours = times["Flow-Factory"], times["rewardzoo"]
    # Two statistics: the sides are each one's median time, the ratio the median of the per-repetition ratios
    # (drift cancels within a repetition). On a quiet machine they agree; they differ when the load changed
    # during the run, so the record keeps both.
    ratio, of_medians = 1.0 / ratios["rewardzoo"], base / ours
    print(
        f"imagebind_score, {SAMPLES} samples: Flow-Factory {base:.3f} s | rewardzoo {ours:.3f} s | {ratio:.2f}x "
        f"(median per-repetition ratio; ratio of the medians {of_medians:.2f}x); max |score difference| {diff:.2e}"
    )
    workload = (
        f"{SAMPLES} samples (prompt, {FRAMES} frames {HEIGHT}x{WIDTH} uint8, {SECONDS:g} s stereo {RATE // 1000} kHz "
        "audio), mode: all, tiny random ImageBind, CPU, 1 torch thread"
    )
    figs = [
        figure(
            "imagebind.all.flow_factory",
            f"`imagebind_score` through the processor (one call, one model forward) vs Flow-Factory's "
            f"`ImageBindRewardModel.__call__` on the same batch and weights; {workload}, median of {repeats} "
            "interleaved repetitions",
            measure("rewardzoo processor", SAMPLES / ours, "samples/s"),
            baseline=measure("Flow-Factory call", SAMPLES / base, "samples/s"),
            ratio=ratio,
            ratio_label="x the speed of Flow-Factory's call",
            rewards=["imagebind_score"],
            notes=(
                f"ratio: median of the {repeats} per-repetition ratios (Flow-Factory's time / rewardzoo's); "
                f"samples/s: each side's median time; the ratio of those medians is {of_medians:.3g}x"
            ),
        ),
        figure(
            "imagebind.all.agreement",
            f"`imagebind_score` vs Flow-Factory's reward: max |score difference|; {workload}",
            measure("difference", diff, ""),
            rewards=["imagebind_score"],
        ),
    ]
    write_results(__file__, figs)


if __name__ == "__main__":
    main()
