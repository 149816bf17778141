"""Cost of the groupwise wrappers relative to their base alone (issue 6).

For groups of 4, 16 and 64 (128 images of 256x256 in all), the base `jpeg_incompressibility` is
scored through the processor on its own (batch_size = group size, so it makes the same number of
calls) and, in the same run, `pairwise_winrate` with the Bradley-Terry judge over that base (hard
and soft mode), plus `group_rank` / `group_normalized`. Both sides see the same PIL images and the
same conversions. Each repetition times every side once (after a warm-up), in rotating order; the
ratio is the median over repetitions of wrapper / base alone. Goal for pairwise_winrate at n = 16:
<= 1.2x. A second table gives the wrappers' own time per group over a base that costs nothing, so
the ratio can be judged for any base (a CLIP model costs far more per image than a JPEG encode).

Run: python benchmarks/bench_group.py [--repeats 15] [--size 256] [--total 128]
"""

from __future__ import annotations

import argparse

import numpy as np
from PIL import Image
from results_io import figure, measure, write_results
from timing import interleaved


def make_images(total: int, size: int) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    smooth = np.linspace(0, 1, size)[None, :, None] * np.ones((size, 1, 3))
    return [
        Image.fromarray(
            (np.clip(smooth + rng.normal(size=(size, size, 3)) * (0.02 + 0.2 * i / total), 0, 1) * 255).astype(np.uint8)
        )
        for i in range(total)
    ]


def bench_size(images, n: int, repeats: int) -> dict:
    from rewardzoo import RewardProcessor, Sample

    total = len(images)
    samples = [Sample(image=img, group_id=i // n) for i, img in enumerate(images)]
    base = "jpeg_incompressibility"
    procs = {
        "base": RewardProcessor([{"name": "s", "reward_model": base, "batch_size": n}]),
        "winrate_hard": RewardProcessor([{"name": "s", "reward_model": "pairwise_winrate", "kwargs": {"base": base}}]),
        "winrate_soft": RewardProcessor(
            [{"name": "s", "reward_model": "pairwise_winrate", "kwargs": {"base": base, "mode": "soft"}}]
        ),
        "rank": RewardProcessor([{"name": "s", "reward_model": "group_rank", "kwargs": {"base": base}}]),
        "normalized": RewardProcessor([{"name": "s", "reward_model": "group_normalized", "kwargs": {"base": base}}]),
    }
    times, ratios = interleaved({k: (lambda p=p: p(samples)) for k, p in procs.items()}, repeats)
    return {"n": n, "groups": total // n, "times": times, "ratios": ratios}


def bench_overhead(n: int, repeats: int = 2000) -> dict:
    """The wrappers' own time per group of n over a base that costs nothing (direct calls, min of 5)."""
    import json
    import timeit

    from rewardzoo import load_reward
    from rewardzoo.registry import register
    from rewardzoo.rewards.base import Inputs, PointwiseReward

    @register("bench_group_free")
    class Free(PointwiseReward):
        inputs = Inputs(("metadata",))

        def __call__(self, metadata, **_):
            return [1.0] * len(metadata)

    meta = [json.dumps({"score": i}) for i in range(n)]
    out = {}
    for key, name, kw in (
        ("winrate_hard", "pairwise_winrate", {}),
        ("winrate_soft", "pairwise_winrate", {"mode": "soft"}),
        ("rank", "group_rank", {}),
        ("normalized", "group_normalized", {}),
    ):
        wrapper = load_reward({"name": name, "device": "cpu"}, base="bench_group_free", **kw)  # built by the loader
        t_w = min(timeit.repeat(lambda: wrapper(metadata=meta, group_id=[0] * n), number=repeats, repeat=5))
        t_b = min(timeit.repeat(lambda: wrapper.base(metadata=meta), number=repeats, repeat=5))
        out[key] = (t_w - t_b) / repeats
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--total", type=int, default=128)
    args = parser.parse_args()
    images = make_images(args.total, args.size)
    rows = [bench_size(images, n, args.repeats) for n in (4, 16, 64)]
    keys = ("winrate_hard", "winrate_soft", "rank", "normalized")
    print(
        f"base: jpeg_incompressibility, {args.total} images {args.size}x{args.size}, processor path, "
        f"{args.repeats} paired repetitions; ratio = median of (wrapper / base alone) per repetition"
    )
    print(
        "| n | groups | base alone | pairwise_winrate BT hard | ratio | BT soft | ratio | group_rank | ratio "
        "| group_normalized | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t, q = r["times"], r["ratios"]
        cells = [f"{t[k] * 1e3:.1f} ms | {q[k]:.3f}" for k in keys]
        print(f"| {r['n']} | {r['groups']} | {t['base'] * 1e3:.1f} ms | " + " | ".join(cells) + " |")
    print()
    print("wrappers' own time per group (direct call minus base call, base costs nothing):")
    print("| n | pairwise_winrate hard | soft | group_rank | group_normalized |")
    print("|---|---|---|---|---|")
    overheads = {}
    for n in (4, 16, 64):
        o = overheads[n] = bench_overhead(n)
        print(f"| {n} | " + " | ".join(f"{o[k] * 1e6:.0f} us" for k in keys) + " |")
    write_results(__file__, figures(rows, overheads, args))


WRAPPERS = {
    "winrate_hard": ("pairwise_winrate", "`pairwise_winrate` (Bradley-Terry, hard)"),
    "winrate_soft": ("pairwise_winrate", "`pairwise_winrate` (Bradley-Terry, soft)"),
    "rank": ("group_rank", "`group_rank`"),
    "normalized": ("group_normalized", "`group_normalized`"),
}


def figures(rows: list[dict], overheads: dict[int, dict], args) -> list[dict]:
    out = []
    for key, (reward, what) in WRAPPERS.items():
        for r in rows:
            t, q, n = r["times"], r["ratios"], r["n"]
            out.append(
                figure(
                    f"group.processor.{key}.n{n}",
                    f"{what} over `jpeg_incompressibility` vs the base alone (same number of calls), groups of {n}, "
                    f"{args.total} images {args.size}x{args.size}, through the processor",
                    measure(reward, t[key] * 1e3, "ms"),
                    baseline=measure("base alone", t["base"] * 1e3, "ms"),
                    ratio=q[key],
                    ratio_label="wrapper / base",
                    rewards=[reward],
                    goal="<= 1.2" if key == "winrate_hard" and n == 16 else None,
                    notes=f"median of {args.repeats} paired per-repetition ratios",
                )
            )
    for key, (reward, what) in WRAPPERS.items():
        for n, o in overheads.items():
            out.append(
                figure(
                    f"group.own_time.{key}.n{n}",
                    f"{what}: the wrapper's own time per group of {n} (direct call minus the base call, a base that "
                    f"costs nothing)",
                    measure("per group", o[key] * 1e6, "us"),
                    rewards=[reward],
                )
            )
    return out


if __name__ == "__main__":
    main()
