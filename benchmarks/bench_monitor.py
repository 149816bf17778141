"""Cost of watching rewards (issue 32): RewardMonitor.update per step, and group_diversity's batched embedding.

1. ``RewardMonitor.update`` on one step of 1,024 samples and 6 rewards (groups of 16, card score ranges, the
   trend window filled by earlier steps: every metric and alarm check runs), against the reward time it
   watches: ``clip_score`` with the tiny open_clip model (rewardzoo.testing) through the processor on the same
   1,024 images of 64x64 — a cheap reward, so the ratio is an upper bound. Goal: update < 5 ms.
2. ``group_diversity`` (DINO, a random-init ViT of 2 layers, width 192, at 224x224) on 4 groups of 16 images,
   one direct call, against calling the backbone once per image (same preprocessing, then the same
   distances in NumPy).

Each repetition times every side once, in rotating order (benchmarks/timing.py); ratios are medians over
repetitions. Run: python benchmarks/bench_monitor.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from types import SimpleNamespace

import numpy as np
from results_io import figure, measure, print_figures, write_results
from timing import interleaved

N, GROUP, REWARDS = 1024, 16, 6


def bench_update(repeats: int, tmp: str) -> list[dict]:
    import torch

    from rewardzoo import RewardMonitor, RewardProcessor, Sample
    from rewardzoo import testing as rzt

    rng = np.random.default_rng(0)
    names = [f"r{i}" for i in range(REWARDS)]
    facts = {n: {"score_range": (0.0, 1.0)} for n in names}
    groups = [f"p{i // GROUP}" for i in range(N)]

    def step_result(step: int) -> SimpleNamespace:
        rewards = {n: rng.uniform(0, 1, N).astype(np.float32) for n in names}
        total = np.sum([r.astype(np.float64) for r in rewards.values()], axis=0).astype(np.float32)
        return SimpleNamespace(rewards=rewards, total=total, group_ids=groups)

    monitor = RewardMonitor(settings={"window": 20}, facts=facts)
    for step in range(30):
        monitor.update(step_result(step), step)
    prepared = [step_result(s) for s in range(8)]
    counter = iter(range(30, 10**9))

    def update():
        step = next(counter)
        monitor.update(prepared[step % len(prepared)], step)

    clip_dir = rzt.tiny_open_clip_dir(f"{tmp}/tiny-open-clip", seed=0)
    torch.set_num_threads(2)
    proc = RewardProcessor(
        [
            {
                "name": "clip",
                "reward_model": "clip_score",
                "model_path": str(clip_dir),
                "device": "cpu",
                "batch_size": 256,
            }
        ]
    )
    images = [rng.integers(0, 256, (64, 64, 3), dtype=np.uint8) for _ in range(N)]
    samples = [Sample(image=im, prompt=f"a photo of thing {i % 64}", group_id=groups[i]) for i, im in enumerate(images)]
    # the reward is slow next to the update: time it a few times, the update many times per repetition
    reward_times, _ = interleaved({"reward": lambda: proc(samples)}, max(3, repeats // 5))
    per = 50
    update_times, _ = interleaved({"update": lambda: [update() for _ in range(per)]}, repeats)
    upd, rew = update_times["update"] / per, reward_times["reward"]
    cpu0 = time.process_time()
    for _ in range(per * 4):
        update()
    cpu = (time.process_time() - cpu0) / (per * 4)
    workload = f"{N:,} samples, {REWARDS} rewards, groups of {GROUP}"
    return [
        figure(
            "monitor.update.per_step",
            f"RewardMonitor.update per step ({workload}) vs clip_score (tiny "
            f"open_clip, 64x64 images) through the processor on the same {N:,} samples",
            measure("update", upd * 1e3, "ms"),
            baseline=measure("clip_score reward", rew * 1e3, "ms"),
            ratio=upd / rew,
            ratio_label="update / reward",
            goal="< 5 ms",
            notes=f"the update is timed 50 times per repetition (median per call); its CPU time per call "
            f"(process_time, less sensitive to a loaded machine) is {cpu * 1e3:.2f} ms",
        )
    ]


def bench_diversity(repeats: int, tmp: str) -> list[dict]:
    import torch
    import torch.nn.functional as F
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as TF

    from rewardzoo import load_reward
    from rewardzoo import testing as rzt

    torch.set_num_threads(2)
    path = rzt.tiny_dino_dirs(
        f"{tmp}/dino",
        seed=0,
        vit_config=dict(hidden_size=192, num_hidden_layers=2, num_attention_heads=3, intermediate_size=768),
    )["vit"]
    reward = load_reward({"name": "group_diversity", "model_path": path, "device": "cpu"})
    rng = np.random.default_rng(1)
    groups = 4
    images = [
        torch.from_numpy(rng.integers(0, 256, (3, 224, 224), dtype=np.uint8)).float() / 255
        for _ in range(groups * GROUP)
    ]
    gids = [i // GROUP for i in range(len(images))]
    model = reward.embedder.dino.model
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

    def per_image():
        feats = []
        with torch.inference_mode():
            for im in images:
                x = TF.resize(im[None], 224, interpolation=InterpolationMode.BILINEAR, antialias=False)
                out = model(pixel_values=(x - mean) / std, interpolate_pos_encoding=True).last_hidden_state[:, 0]
                feats.append(F.normalize(out.double(), dim=-1).numpy()[0])
        e = np.stack(feats)
        scores = np.zeros(len(images))
        for g in range(groups):
            idx = np.arange(g * GROUP, (g + 1) * GROUP)
            d = 1 - np.clip(e[idx] @ e[idx].T, -1, 1)
            scores[idx] = (d.sum(1) - np.diag(d)) / (GROUP - 1)
        return scores

    def ours():
        return reward(image=images, group_id=gids).rewards

    np.testing.assert_allclose(ours(), per_image(), rtol=1e-4, atol=1e-6)
    times, ratios = interleaved({"per_image": per_image, "ours": ours}, repeats)
    return [
        figure(
            "monitor.group_diversity.groups_of_16",
            f"group_diversity (DINO ViT 2x192, 224x224) on {groups} groups of {GROUP} images, one call, vs "
            "calling the backbone once per image",
            measure("group_diversity", times["ours"] * 1e3, "ms"),
            baseline=measure("backbone per image", times["per_image"] * 1e3, "ms"),
            ratio=1 / ratios["ours"],
            ratio_label="x faster",
            rewards=["group_diversity"],
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = bench_update(args.repeats, tmp) + bench_diversity(args.repeats, tmp)
    print_figures(figures)
    write_results(__file__, figures)


if __name__ == "__main__":
    main()
