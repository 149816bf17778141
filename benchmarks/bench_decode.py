"""The ``decode:`` stage: a batch of latents decoded once and shared by N pixel rewards, vs each reward decoding.

A random-init ``AutoencoderKL`` with SD3's latent layout (16 channels, 8x spatial; narrower blocks than SD3's VAE so
a CPU run takes seconds) decodes a batch of 16x32x32 latents (256x256 images). N model-free pixel rewards
(``jpeg_compressibility`` / ``jpeg_incompressibility`` at two JPEG qualities each), so the decode is most of the cost,
as it is beside a real model on the GPU with many rewards. Shared: one processor with the N rewards and the decode
stage (one decode per batch). Baseline "each decoding": N one-reward processors over the same loader and VAE, each
called with the latents (one decode per reward: what a trainer that calls rewards one by one, as Flow-Factory does,
pays without a shared stage). The scores are checked to be equal.

Run: ``python benchmarks/bench_decode.py [--quick] [--threads N]``. Ratio > 1: sharing is faster.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

from results_io import figure, measure, write_results
from timing import interleaved

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BATCH, CHANNELS, SIDE = 8, 16, 32
REWARDS = [
    {"name": "small_q80", "reward_model": "jpeg_compressibility"},
    {"name": "small_q50", "reward_model": "jpeg_compressibility", "kwargs": {"quality": 50}},
    {"name": "big_q80", "reward_model": "jpeg_incompressibility"},
    {"name": "big_q50", "reward_model": "jpeg_incompressibility", "kwargs": {"quality": 50}},
]


def vae_dir(root: Path) -> str:
    import torch
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    vae = AutoencoderKL(
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(32, 64, 128, 128),
        layers_per_block=1,
        latent_channels=CHANNELS,
        norm_num_groups=32,
        scaling_factor=1.5305,  # SD3's
        shift_factor=0.0609,
    )
    vae.save_pretrained(root)
    return str(root)


def bench(folder: str, repeats: int) -> dict:
    import numpy as np
    import torch

    from rewardzoo import Sample
    from rewardzoo.core.loader import RewardLoader
    from rewardzoo.core.processor import RewardProcessor

    decode = {"vae": folder, "device": "cpu", "batch_size": BATCH}
    loader = RewardLoader()
    shared = RewardProcessor(REWARDS, loader, decode=decode)
    each = [RewardProcessor([entry], loader, decode=decode) for entry in REWARDS]
    assert all(p.decoder is shared.decoder for p in each)  # one VAE: the baseline pays decodes, not loads
    latents = torch.randn(BATCH, CHANNELS, SIDE, SIDE, generator=torch.Generator().manual_seed(1))
    samples = [Sample(latent=x) for x in latents]
    one = shared(samples)
    for processor, entry in zip(each, REWARDS):
        np.testing.assert_array_equal(processor(samples).rewards[entry["name"]], one.rewards[entry["name"]])
    times, ratios = interleaved(
        {"each reward decoding": lambda: [p(samples) for p in each], "decode once, shared": lambda: shared(samples)},
        repeats,
    )
    base, mine = times["each reward decoding"], times["decode once, shared"]
    n = len(REWARDS)
    print(
        f"decode: {BATCH} latents {CHANNELS}x{SIDE}x{SIDE} -> {SIDE * 8}x{SIDE * 8}, {n} pixel rewards: each decoding "
        f"{base:.3f} s | shared {mine:.3f} s ({1 / ratios['decode once, shared']:.2f}x)"
    )
    return figure(
        "decode.shared",
        f"a batch of {BATCH} latents ({CHANNELS}x{SIDE}x{SIDE}, decoded to {SIDE * 8}x{SIDE * 8} by a random-init "
        f"SD3-layout AutoencoderKL on the CPU) scored by {n} model-free pixel rewards: one processor whose decode "
        f"stage decodes once for all of them vs {n} one-reward processors each decoding; "
        f"{torch.get_num_threads()} torch thread(s), median of {repeats} interleaved runs",
        measure("decode once, shared", BATCH / mine, "samples/s"),
        baseline=measure("each reward decoding", BATCH / base, "samples/s"),
        ratio=1 / ratios["decode once, shared"],
        ratio_label="x faster",
        notes=f"scores equal; {n} decodes vs 1 per batch (the ideal ratio is a little under {n}x: the rewards' own "
        "work is paid on both sides)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as root:
        write_results(__file__, [bench(vae_dir(Path(root)), 3 if args.quick else 5)])


if __name__ == "__main__":
    main()
