"""dina_lrm against DiNa-LRM's reference call, on a tiny SD3-shaped model and on SD3.5-Medium's real 12-block trunk.

The reference (HKUST-C4G/diffusion-rm af485b4, README's inference loop) encodes each prompt and calls
``DRMInferencer.reward`` per latent, its LoRA unmerged under PEFT; it is re-stepped here from diffusers, transformers
and PEFT exactly as ``tests/latent`` does (``_Reference``; diffusion-rm is not installable here). rewardzoo's
``dina_lrm`` encodes the call's distinct prompts once, scores same-sized latents in one forward, LoRA merged.

- ``tiny``: the reward's call on 8 latents (4 prompts, each twice) vs the reference loop, tiny random-init pipeline
  (``rewardzoo.testing.tiny_sd3_dir``), float32, 1 torch thread, interleaved medians;
- ``real`` (run under the heavy lock: ~6 GB): SD3.5-Medium's transformer shape (width 1536, 24 heads, dual attention,
  RMS q/k norms) with random weights, its first 12 blocks written as a bfloat16 safetensors file, loaded by
  rewardzoo's trunk loader with a random rank-64 LoRA merged (what a load costs), then one trunk + head forward for
  a 256 px latent (32 x 32) against the same weights under PEFT (the reference's arithmetic), bfloat16, 2 torch
  threads, 3 interleaved runs. Text conditioning is random at T5-XXL's width: the text encoders (T5-XXL is 19 GB in
  float32) do not fit this machine, and both sides would pay the same for them.

Run: ``python benchmarks/bench_dina_lrm.py [--part tiny|real] [--quick]``. Ratios > 1 favour rewardzoo.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from results_io import figure, measure, write_results
from timing import interleaved, quiet_transformers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

N = 8
SD35_MEDIUM = {  # stabilityai/stable-diffusion-3.5-medium transformer/config.json
    "sample_size": 128,
    "patch_size": 2,
    "in_channels": 16,
    "num_layers": 24,
    "attention_head_dim": 64,
    "num_attention_heads": 24,
    "joint_attention_dim": 4096,
    "caption_projection_dim": 1536,
    "pooled_projection_dim": 2048,
    "out_channels": 16,
    "pos_embed_max_size": 384,
    "dual_attention_layers": list(range(13)),
    "qk_norm": "rms_norm",
}
TRUNK, TAPS = 12, (4, 8, 12)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_tiny(root: Path, repeats: int) -> dict:
    import numpy as np
    import torch

    import rewardzoo
    from rewardzoo.testing.latent import tiny_dina_lrm_dir, tiny_sd3_dir
    from tests.latent.test_latent_dina_lrm import _Reference

    base = tiny_sd3_dir(root / "sd3", seed=0)
    ckpt = tiny_dina_lrm_dir(root / "dina", base, seed=1)
    reward = rewardzoo.load_reward({"name": "dina_lrm", "model_path": str(ckpt), "dtype": "float32"})
    with torch.no_grad():
        reference = _Reference(base, ckpt)
    g = torch.Generator().manual_seed(0)
    latents = [torch.randn(16, 16, 16, generator=g) for _ in range(N)]
    prompts = [f"a {c} cat sitting on the wooden floor" for c in ("red", "blue", "green", "dog")] * 2

    def reference_loop():
        with torch.no_grad():
            return reference.reward(prompts, latents, u=0.4, seed=0)  # per latent: its prompt encoded, one forward

    def ours():
        return reward(prompt=prompts, latent=latents).extras["raw"]

    diff = float(np.max(np.abs(reference_loop().numpy() - ours().numpy())))
    times, ratios = interleaved({"reference loop": reference_loop, "rewardzoo": ours}, repeats)
    ratio = 1.0 / ratios["rewardzoo"]
    print(
        f"tiny: reference {times['reference loop'] * 1e3:.1f} ms | rewardzoo {times['rewardzoo'] * 1e3:.1f} ms "
        f"| {ratio:.2f}x (max |raw difference| {diff:.1e})"
    )
    return figure(
        "dina_lrm.tiny",
        f"`dina_lrm` on {N} latents 16x16x16 (4 prompts, each twice), tiny random-init SD3-shaped pipeline, CPU, "
        f"float32, 1 torch thread: one call (distinct prompts encoded once, one forward, LoRA merged) vs the "
        f"reference's loop (per latent: its prompt encoded, DRMInferencer.reward, LoRA under PEFT), median of "
        f"{repeats} interleaved runs (median per-run ratio); max |raw difference| {diff:.1e}",
        measure("rewardzoo", times["rewardzoo"] * 1e3, "ms"),
        baseline=measure("reference loop", times["reference loop"] * 1e3, "ms"),
        ratio=ratio,
        ratio_label="x faster",
        rewards=["dina_lrm"],
        notes="a tiny model measures per-call overhead, prompt deduplication and batching, not SD3.5's cost; "
        "a shared, noisy machine",
    )


def write_real_pipeline(folder: Path) -> Path:
    """An SD3.5-Medium-shaped ``transformer/`` (config of 24 blocks; weights of the embedders and first 12 blocks,
    random, bfloat16) and the SD3 scheduler."""
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel
    from safetensors.torch import save_file

    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    try:  # 13 blocks so that block 12 (context_pre_only) is the one dropped; blocks 0-11 are SD3.5-M's
        model = SD3Transformer2DModel(**{**SD35_MEDIUM, "num_layers": TRUNK + 1})
    finally:
        torch.set_default_dtype(torch.float32)
    keep = ("pos_embed.", "time_text_embed.", "context_embedder.")
    state = {
        k: v.contiguous()
        for k, v in model.state_dict().items()
        if k.startswith(keep) or (k.startswith("transformer_blocks.") and int(k.split(".")[1]) < TRUNK)
    }
    del model
    out = folder / "transformer"
    out.mkdir(parents=True)
    save_file(state, str(out / "diffusion_pytorch_model.safetensors"))
    (out / "config.json").write_text(json.dumps({"_class_name": "SD3Transformer2DModel", **SD35_MEDIUM}))
    FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0).save_pretrained(folder / "scheduler")
    del state
    gc.collect()
    return out


def bench_real(root: Path, repeats: int) -> list[dict]:
    import torch
    from peft import LoraConfig, get_peft_model

    from rewardzoo.rewards.latent.dina_head import DiNaRewardHead
    from rewardzoo.rewards.models.sd3 import load_sd3_trunk
    from rewardzoo.testing.latent import DINA_LORA_TARGETS

    dtype = torch.bfloat16
    t0 = time.perf_counter()
    transformer = write_real_pipeline(root / "sd35m")
    print(f"real: wrote the 12-block trunk in {time.perf_counter() - t0:.1f} s")
    base = load_sd3_trunk(transformer, TRUNK, device="cpu", dtype=dtype)  # the reference's base weights
    peft_model = get_peft_model(
        base, LoraConfig(r=64, lora_alpha=128, init_lora_weights="gaussian", target_modules=DINA_LORA_TARGETS)
    )
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.01)
    peft_model.save_pretrained(str(root / "lora"))
    from rewardzoo.rewards.models.sd3 import read_peft_adapter

    lora, scaling = read_peft_adapter(root / "lora")
    gc.collect()
    before, t0 = rss_mb(), time.perf_counter()
    ours = load_sd3_trunk(transformer, TRUNK, device="cpu", dtype=dtype, lora=lora, lora_scaling=scaling)
    load_s, load_mb = time.perf_counter() - t0, rss_mb() - before
    weights_mb = sum(p.numel() * p.element_size() for p in ours.parameters()) / 2**20
    print(f"real: trunk load + LoRA merge {load_s:.1f} s, RSS +{load_mb:.0f} MB for {weights_mb:.0f} MB of weights")
    torch.manual_seed(1)
    head = DiNaRewardHead(1536, len(TAPS), len(TAPS)).to(dtype).eval()
    x = torch.randn(1, 16, 32, 32, dtype=dtype)
    text, pooled = torch.randn(1, 77 + 256, 4096, dtype=dtype), torch.randn(1, 2048, dtype=dtype)
    t = torch.tensor([400.0])

    def score(trunk, latent):
        with torch.no_grad():
            temb, vis, txt = trunk(latent, text, pooled, t, TAPS, TAPS)
            return float(head(vis, txt, temb)[0, 0])

    small = torch.randn(1, 16, 8, 8, dtype=dtype)
    score(ours, small), score(peft_model, small)  # first-call overheads
    ref_score, our_score = score(peft_model, x), score(ours, x)
    times, ratios = interleaved(
        {"reference": lambda: score(peft_model, x), "rewardzoo": lambda: score(ours, x)}, repeats, warmup=0
    )
    ref_s, our_s, ratio = times["reference"], times["rewardzoo"], 1.0 / ratios["rewardzoo"]
    print(
        f"real: forward reference {ref_s:.1f} s | rewardzoo {our_s:.1f} s | {ratio:.2f}x | raw {ref_score:.4f} "
        f"vs {our_score:.4f}"
    )
    common = "SD3.5-Medium's 12-block trunk (random weights, bfloat16) + DiNa-LRM head, CPU, 2 torch threads"
    return [
        figure(
            "dina_lrm.real.forward",
            f"`dina_lrm` trunk + head forward, one 256 px latent (16x32x32, 256 image + 333 text tokens), {common}: "
            "LoRA (rank 64) merged at load vs the same weights with the LoRA under PEFT (the reference's), median of "
            f"{repeats} interleaved runs (median per-run ratio); raw {ref_score:.4f} (reference) vs {our_score:.4f} "
            "(bfloat16 rounding)",
            measure("rewardzoo", our_s, "s"),
            baseline=measure("reference (PEFT)", ref_s, "s"),
            ratio=ratio,
            ratio_label="x faster",
            rewards=["dina_lrm"],
            notes="text conditioning random at T5-XXL's width (the text encoders do not fit this machine); "
            "a 512 px latent costs ~4x the tokens; a shared, noisy machine",
        ),
        figure(
            "dina_lrm.real.load",
            f"`dina_lrm` trunk load (12 of 24 blocks read from a bfloat16 safetensors file, rank-64 LoRA merged in "
            f"float32), {common}: RSS added {load_mb:.0f} MB for {weights_mb:.0f} MB of weights",
            measure("rewardzoo", load_s, "s"),
            rewards=["dina_lrm"],
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("tiny", "real"), action="append", help="default: tiny")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    parts = args.part or ["tiny"]
    import torch

    quiet_transformers()
    figs = []
    with tempfile.TemporaryDirectory() as tmp:
        if "tiny" in parts:
            torch.set_num_threads(1)
            figs.append(bench_tiny(Path(tmp), 3 if args.quick else 5))
        if "real" in parts:
            torch.set_num_threads(2)
            figs += bench_real(Path(tmp), 2 if args.quick else 3)
    write_results(__file__, figs, parts=[f"dina_lrm.{p}" for p in parts])


if __name__ == "__main__":
    main()
