"""Trainer adapters: each adapter's call against calling the processor directly on the same batch (goal
<= 1.05x), and the JPEG scores of half-precision images against ddpo-pytorch's own quantisation.

Workloads: 32 images 256x256 as a float (B, 3, H, W) tensor for the image adapters (JPEG rewards, as
the trainers' quick-start configs use); 32 prompt/completion pairs for TRL (a tiny GPT-2 classifier
through ``sequence_reward``). The direct side builds the same ``Sample`` list itself, as a user would.

Run: python benchmarks/bench_integrations.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from results_io import figure, measure, write_results
from timing import interleaved

CLIENTS = Path(__file__).resolve().parents[2] / "shared" / "clients"
JPEG = ["jpeg_compressibility", "jpeg_incompressibility"]
CONFIG = {"rewards": [{"name": "jpeg_incompressibility"}, {"name": "jpeg_compressibility", "weight": 0.5}]}


def _images(n: int = 32, size: int = 256, seed: int = 0):
    import torch

    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, size, size, generator=gen)


def bench_image_adapters(repeats: int) -> list[dict]:
    from rewardzoo import RewardProcessor, Sample
    from rewardzoo.integrations import ddpo_reward_fn, flow_grpo_reward_fn

    images = _images()
    prompts = [f"prompt {i % 8}" for i in range(len(images))]
    meta = [{} for _ in prompts]
    proc = RewardProcessor(CONFIG["rewards"])
    ddpo = ddpo_reward_fn(CONFIG)
    flow_grpo = flow_grpo_reward_fn(CONFIG)
    sides = {
        "direct": lambda: proc(
            [Sample(image=t, prompt=p, metadata=m) for t, p, m in zip(images.unbind(0), prompts, meta)]
        ),
        "ddpo": lambda: ddpo(images, prompts, meta),
        "flow_grpo": lambda: flow_grpo(images, prompts, meta, only_strict=True),
    }
    medians, ratios = interleaved(sides, repeats)
    out = []
    for name in sides:
        if name == "direct":
            continue
        print(
            f"   {name:12s} {medians[name] * 1e3:8.1f} ms   direct {medians['direct'] * 1e3:8.1f} ms   "
            f"ratio {ratios[name]:.3f}"
        )
        out.append(
            figure(
                f"integrations.overhead.{name}",
                f"`{name}` adapter vs the processor called directly on the same batch (Samples built "
                "by the caller); 32 images 256x256 as a float tensor, both JPEG rewards",
                measure(f"{name} adapter", medians[name] * 1e3, "ms"),
                baseline=measure("processor, direct", medians["direct"] * 1e3, "ms"),
                ratio=ratios[name],
                ratio_label="adapter / direct",
                goal="<= 1.05",
                rewards=JPEG,
                notes=f"median of {repeats} paired per-repetition ratios",
            )
        )
    return out


def bench_flow_factory(repeats: int) -> list[dict]:
    """Flow-Factory's own loader builds the adapter; it is called as Flow-Factory calls it (a list of
    (3, H, W) tensors). Flow-Factory holds one model object per reward, so one reward is compared with a
    one-reward processor."""
    sys.path.insert(0, str(CLIENTS / "flow_factory_src" / "src"))
    try:
        from accelerate import Accelerator
        from flow_factory.hparams import RewardArguments
        from flow_factory.rewards import load_reward_model
    except ImportError as exc:
        print(f"   flow_factory: skipped ({exc})")
        return []
    from rewardzoo import RewardProcessor, Sample

    images = _images()
    frames = list(images.unbind(0))
    prompts = [f"prompt {i % 8}" for i in range(len(frames))]
    entry = {
        "name": "jpeg",
        "reward_model": "rewardzoo.integrations.flow_factory.RewardZooPointwise",
        "rewardzoo": "jpeg_incompressibility",
        "device": "cpu",
        "dtype": "float32",
        "batch_size": 16,
    }
    adapter = load_reward_model(RewardArguments.from_dict(entry), Accelerator(cpu=True))
    proc = RewardProcessor([{"name": "jpeg", "reward_model": "jpeg_incompressibility", "batch_size": 16}])
    medians, ratios = interleaved(
        {
            "direct": lambda: proc([Sample(image=t, prompt=p) for t, p in zip(frames, prompts)]),
            "flow_factory": lambda: adapter(prompt=prompts, image=frames),
        },
        repeats,
    )
    print(
        f"   flow_factory {medians['flow_factory'] * 1e3:8.1f} ms   direct {medians['direct'] * 1e3:8.1f} ms   "
        f"ratio {ratios['flow_factory']:.3f}"
    )
    return [
        figure(
            "integrations.overhead.flow_factory",
            "`flow_factory` adapter (built by Flow-Factory's `load_reward_model`) vs a one-reward processor "
            "called directly; 32 images 256x256 as a list of (3, H, W) float tensors, `jpeg_incompressibility`",
            measure("flow_factory adapter", medians["flow_factory"] * 1e3, "ms"),
            baseline=measure("processor, direct", medians["direct"] * 1e3, "ms"),
            ratio=ratios["flow_factory"],
            ratio_label="adapter / direct",
            goal="<= 1.05",
            rewards=["jpeg_incompressibility"],
            notes=f"median of {repeats} paired per-repetition ratios",
        )
    ]


def bench_trl(repeats: int) -> list[dict]:
    import torch

    from rewardzoo import RewardProcessor, Sample
    from rewardzoo.integrations import trl_reward_funcs
    from rewardzoo.testing import tiny_text_models, word_tokenizer

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        paths = tiny_text_models(Path(tmp))
        spec = {"name": "rm", "reward_model": "sequence_reward", "model_path": paths["gpt2_cls"], "device": "cpu"}
        tokenizer = word_tokenizer()
        funcs, _ = trl_reward_funcs({"rewards": [spec]}, tokenizer=tokenizer)
        proc = RewardProcessor([spec])
        rng = np.random.default_rng(0)
        words = "the cat sat on mat dog ran fast slow good bad".split()
        prompts = [" ".join(rng.choice(words, 6)) for _ in range(32)]
        completions = [" " + " ".join(rng.choice(words, 10)) for _ in range(32)]
        sides = {
            "direct": lambda: proc([Sample(prompt=p, completion=c) for p, c in zip(prompts, completions)]),
            "trl": lambda: funcs[0](prompts=prompts, completions=completions, completion_ids=[[0]] * 32),
        }
        medians, ratios = interleaved(sides, repeats)
    print(
        f"   trl          {medians['trl'] * 1e3:8.1f} ms   direct {medians['direct'] * 1e3:8.1f} ms   "
        f"ratio {ratios['trl']:.3f}"
    )
    return [
        figure(
            "integrations.overhead.trl",
            "`trl` reward function vs the processor called directly; 32 prompt/completion pairs of 6 + 10 "
            "words, a tiny GPT-2 classifier through `sequence_reward`, 1 torch thread",
            measure("trl adapter", medians["trl"] * 1e3, "ms"),
            baseline=measure("processor, direct", medians["direct"] * 1e3, "ms"),
            ratio=ratios["trl"],
            ratio_label="adapter / direct",
            goal="<= 1.05",
            rewards=["sequence_reward"],
            notes=f"median of {repeats} paired per-repetition ratios",
        )
    ]


def bench_half_precision() -> list[dict]:
    """JPEG kB of fp16/bf16 images: rewardzoo (quantised from float32) vs ddpo-pytorch (in the image dtype)."""
    import torch

    sys.path.insert(0, str(CLIENTS / "ddpo_pytorch_src"))
    try:
        from ddpo_pytorch.rewards import jpeg_incompressibility
    except ImportError as exc:
        print(f"   half precision: skipped ({exc})")
        return []
    from rewardzoo.integrations import ddpo_reward_fn

    ours = ddpo_reward_fn({"rewards": ["jpeg_incompressibility"]})
    theirs = jpeg_incompressibility()
    out = []
    for dtype in (torch.float16, torch.bfloat16):
        images = _images(64, 256, seed=1).to(dtype)
        levels = (
            (images * 255).round().clamp(0, 255).to(torch.uint8).int()
            - (images.float() * 255).round().clamp(0, 255).to(torch.uint8).int()
        ).abs()
        a, _ = ours(images, [""] * 64, [{}] * 64)
        b, _ = theirs(images, [""] * 64, [{}] * 64)
        rel = np.abs(a - b) / b
        name = str(dtype).split(".")[-1]
        print(
            f"   {name}: max pixel level difference {levels.max().item()}, pixels that differ "
            f"{levels.ne(0).float().mean().item():.2%}, JPEG kB max rel. difference {rel.max():.2e}"
        )
        out.append(
            figure(
                f"integrations.ddpo.{name}_pixels",
                f"{name} images (64 of 256x256): 8-bit pixels that differ between rewardzoo's "
                "quantisation (float32 `round(x * 255)`) and ddpo-pytorch's (in the image dtype)",
                measure("pixels that differ", 100 * levels.ne(0).float().mean().item(), "%"),
                rewards=JPEG,
                notes=f"at most {levels.max().item()} levels apart",
            )
        )
        out.append(
            figure(
                f"integrations.ddpo.{name}_kb",
                f"{name} images (64 of 256x256): max relative difference of the JPEG size (kB) against "
                "ddpo-pytorch's `jpeg_incompressibility` on the same tensors",
                measure("max relative difference", float(rel.max()), ""),
                rewards=JPEG,
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    figures = (
        bench_image_adapters(args.repeats)
        + bench_flow_factory(args.repeats)
        + bench_trl(args.repeats)
        + bench_half_precision()
    )
    write_results(__file__, figures)


if __name__ == "__main__":
    main()
