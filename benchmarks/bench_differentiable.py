"""Differentiable-reward benchmarks (``rewardzoo.differentiable``, the ReFL / DRaFT / AlignProp path).

1. Speed: ``clip_score`` forward + backward to the pixels (float (8, 3, 512, 512) in [0, 1], requiring
   grad; preprocessing in float) against the ordinary no-grad call on the same float images, on a
   ViT-B/32-sized random-init open_clip model (speed does not depend on the weight values); also
   forward + backward with gradient checkpointing. Interleaved medians, one torch thread.
2. Memory: peak RSS of forward + backward above the RSS before it (Linux ``VmHWM`` after resetting it
   through ``/proc/self/clear_refs``; glibc's mmap threshold fixed so that freed tensors leave RSS), each
   in a fresh process after one warm-up step, with and without gradient
   checkpointing of the vision tower: 8 images 512x512 and 32 images 224x224 on the same ViT-B/32 tower.
3. Parity: differentiable vs no-grad score of each differentiable reward on the same float images
   (max and mean |difference|); the no-grad path rounds to 8 bits before resizing, the
   differentiable one does not. ``clip_score`` on the ViT-B/32-sized model (8 images 512x512), the
   others on the tiny test models of ``rewardzoo.testing`` (8 images 256x256; videos 4 x 4 frames).

Run: ``python benchmarks/bench_differentiable.py`` (about 2 minutes on the shared 2-core machine;
``--only speed|memory|parity`` runs one part).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch
from results_io import figure, measure, write_results
from timing import interleaved

# ViT-B/32 sizes with a 768-d embedding (as bench_image.py), so the LAION aesthetic head fits too.
B32_768 = {
    "embed_dim": 768,
    "vision_cfg": {"image_size": 224, "layers": 12, "width": 768, "patch_size": 32},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 512, "heads": 8, "layers": 12},
}
PROMPTS = [
    "a red cube on a wooden table",
    "a photo of a dog in the snow",
    "two cats sleeping on a sofa",
    "a watercolour of a lighthouse",
    "an astronaut riding a horse",
    "a bowl of ramen, studio light",
    "a city street at night in the rain",
    "a portrait of an old man",
]


def smooth_images(n: int, size: int, seed: int, frames: int | None = None) -> torch.Tensor:
    """Random low-resolution pictures upsampled (photo-like smoothness), float in [0, 1]."""
    g = torch.Generator().manual_seed(seed)
    shape = (n * (frames or 1), 3, 16, 16)
    low = torch.rand(shape, generator=g)
    out = torch.nn.functional.interpolate(low, size=(size, size), mode="bicubic", align_corners=False).clamp(0, 1)
    return out if frames is None else out.reshape(n, frames, 3, size, size)


def bench_speed(oc_dir: Path, runs: int) -> dict:
    import rewardzoo

    entry = {"name": "clip_score", "model_path": str(oc_dir), "device": "cpu", "kwargs": {"prefix": ""}}
    f = rewardzoo.differentiable({"rewards": [entry]})
    fc = rewardzoo.differentiable({"rewards": [entry]}, gradient_checkpointing=True)
    reward = f.rewards["clip_score"]
    pixels = smooth_images(8, 512, seed=0)
    images = list(pixels.unbind(0))

    def nograd():
        return reward(image=images, prompt=PROMPTS)

    def fwd_bwd(fn):
        def run():
            x = pixels.clone().requires_grad_(True)
            fn(x, PROMPTS).sum().backward()
            return x.grad

        return run

    med, ratios = interleaved({"nograd": nograd, "grad": fwd_bwd(f), "ckpt": fwd_bwd(fc)}, runs)
    return {
        "nograd_ms": med["nograd"] * 1e3,
        "fwd_bwd_ms": med["grad"] * 1e3,
        "ckpt_fwd_bwd_ms": med["ckpt"] * 1e3,
        "ratio": ratios["grad"],
        "ckpt_ratio": ratios["ckpt"],
    }


MEMORY_CHILD = r"""
import json, os, sys
import torch
torch.set_num_threads(1)
import rewardzoo
oc_dir, n, size, ckpt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
f = rewardzoo.differentiable({"rewards": [{"name": "clip_score", "model_path": oc_dir, "device": "cpu",
                                           "kwargs": {"prefix": ""}}]}, gradient_checkpointing=ckpt)
prompts = ["a photo of a thing number %d" % i for i in range(n)]
g = torch.Generator().manual_seed(0)
def step():
    x = torch.rand(n, 3, size, size, generator=g).requires_grad_(True)
    f(x, prompts).sum().backward()
step()  # warm-up (text embeddings, allocator)
def status():
    return dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # reset the peak RSS (VmHWM) to the current RSS
before = int(status()["VmRSS"].split()[0]) / 1024
step()
peak = int(status()["VmHWM"].split()[0]) / 1024
print(json.dumps({"rss_before_mb": before, "peak_mb": peak, "peak_above_mb": peak - before}))
"""


#: a fixed glibc mmap threshold: large tensors are mmapped and returned to the OS when freed, so RSS follows
#: the live memory (with the default dynamic threshold, memory freed by the warm-up stays in RSS)
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072"}


def bench_memory(oc_dir: Path) -> dict:
    out = {}
    for n, size in ((8, 512), (32, 224)):
        for ckpt in (False, True):
            res = subprocess.run(
                [sys.executable, "-c", MEMORY_CHILD, str(oc_dir), str(n), str(size), str(int(ckpt))],
                check=True,
                capture_output=True,
                text=True,
                env={**os.environ, "OMP_NUM_THREADS": "1", **MALLOC_ENV},
            )
            out[f"{n}x{size}_{'ckpt' if ckpt else 'plain'}"] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def _diff(f, name: str, pixels: torch.Tensor, fields: dict, call: dict) -> dict:
    reward = f.rewards[name]
    with torch.no_grad():
        ours = f(pixels, **fields).double()
    key = "video" if pixels.ndim == 5 else "image"
    ref = torch.as_tensor(np.asarray(reward(**{key: list(pixels.unbind(0))}, **call).rewards, dtype=np.float64))
    d = (ours - ref).abs()
    return {"max": float(d.max()), "mean": float(d.mean()), "score_mean": float(ref.abs().mean())}


def bench_parity(tmp: Path, oc_dir: Path) -> dict:
    import rewardzoo
    from rewardzoo import testing as rzt

    tiny = rzt.tiny_open_clip_dir(tmp / "tiny-oc", seed=0)
    hf = rzt.tiny_hf_clip_dir(tmp / "tiny-hf", seed=1)
    hps, _ = rzt.hps_checkpoint(tmp / "hps" / "HPS_v2.1_compressed.pt", seed=123)
    head = rzt.aesthetic_head_file(tmp / "head.pth", seed=7)
    images = smooth_images(8, 256, seed=3)
    videos = smooth_images(4, 256, seed=4, frames=4)
    conds = [[c] for c in smooth_images(8, 256, seed=5).unbind(0)]
    p8, p4 = PROMPTS, PROMPTS[:4]
    cpu = {"device": "cpu"}
    cases = {
        "clip_score": (
            {"model_path": str(oc_dir), "kwargs": {"prefix": ""}},
            smooth_images(8, 512, seed=0),
            {"prompts": p8},
            {"prompt": p8},
        ),
        "pickscore": ({"model_path": str(hf)}, images, {"prompts": p8}, {"prompt": p8}),
        "hpsv2": (
            {"model_path": str(hps), "kwargs": {"clip_model": str(tiny)}},
            images,
            {"prompts": p8},
            {"prompt": p8},
        ),
        "laion_aesthetic": ({"model_path": str(head), "kwargs": {"clip_model": str(tiny)}}, images, {}, {}),
        "clip_image_similarity": (
            {"model_path": str(tiny)},
            images,
            {"condition_images": conds},
            {"condition_images": conds},
        ),
        "video_clip_score": (
            {"model_path": str(tiny), "kwargs": {"prefix": "", "num_frames": 4}},
            videos,
            {"prompts": p4},
            {"prompt": p4},
        ),
        "video_aesthetic": (
            {"model_path": str(head), "kwargs": {"clip_model": str(tiny), "num_frames": 4}},
            videos,
            {},
            {},
        ),
    }
    out = {}
    for name, (entry, pixels, fields, call) in cases.items():
        f = rewardzoo.differentiable({"rewards": [{"name": name, **cpu, **entry}]})
        out[name] = _diff(f, name, pixels, fields, call)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", choices=("speed", "memory", "parity"), help="run one section")
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        from rewardzoo.testing import tiny_open_clip_dir

        oc_dir = tiny_open_clip_dir(tmp / "b32-768", seed=0, model_cfg=B32_768)
        if args.only in (None, "speed"):
            results["speed"] = bench_speed(oc_dir, args.runs)
            print(json.dumps({"speed": results["speed"]}, indent=1), flush=True)
        if args.only in (None, "memory"):
            results["memory"] = bench_memory(oc_dir)
            print(json.dumps({"memory": results["memory"]}, indent=1), flush=True)
        if args.only in (None, "parity"):
            results["parity"] = bench_parity(tmp, oc_dir)
            print(json.dumps({"parity": results["parity"]}, indent=1), flush=True)
    parts = [f"differentiable.{p}" for p in ("speed", "memory", "parity") if args.only in (None, p)]
    write_results(__file__, figures(results), parts=parts)


def figures(results: dict) -> list[dict]:
    out = []
    if "speed" in results:
        s = results["speed"]
        work = (
            "8 float images 512x512 requiring grad + 8 prompts, ViT-B/32-sized random-init open_clip model, "
            "1 torch thread, median of interleaved runs"
        )
        base = measure("no-grad call", s["nograd_ms"], "ms")
        out.append(
            figure(
                "differentiable.speed.fwd_bwd_vs_nograd",
                f"`clip_score` differentiable forward + backward to the pixels vs the no-grad call; {work}",
                measure("forward + backward", s["fwd_bwd_ms"], "ms"),
                baseline=base,
                ratio=s["ratio"],
                ratio_label="x the no-grad time",
                rewards=["clip_score"],
            )
        )
        out.append(
            figure(
                "differentiable.speed.ckpt_fwd_bwd_vs_nograd",
                f"`clip_score` forward + backward with gradient checkpointing vs the no-grad call; {work}",
                measure("forward + backward, checkpointed", s["ckpt_fwd_bwd_ms"], "ms"),
                baseline=base,
                ratio=s["ckpt_ratio"],
                ratio_label="x the no-grad time",
                rewards=["clip_score"],
            )
        )
    if "memory" in results:
        m = results["memory"]
        for key, what in (("8x512", "8 images 512x512"), ("32x224", "32 images 224x224")):
            plain, ckpt = m[f"{key}_plain"]["peak_above_mb"], m[f"{key}_ckpt"]["peak_above_mb"]
            out.append(
                figure(
                    f"differentiable.memory.peak_{key}",
                    f"`clip_score` forward + backward, peak RSS above the RSS before it: gradient checkpointing of the "
                    f"vision tower vs none; {what}, ViT-B/32-sized random-init open_clip model, fresh process each",
                    measure("checkpointed", ckpt, "MB"),
                    baseline=measure("no checkpointing", plain, "MB"),
                    ratio=plain / ckpt if ckpt > 0 else None,
                    ratio_label="x less",
                    rewards=["clip_score"],
                )
            )
    if "parity" in results:
        for name, d in results["parity"].items():
            where = (
                "8 images 512x512, ViT-B/32-sized random-init model"
                if name == "clip_score"
                else ("4 videos of 4 frames 256x256" if name.startswith("video") else "8 images 256x256")
                + ", tiny random-init test model"
            )
            for stat in ("max", "mean"):
                out.append(
                    figure(
                        f"differentiable.parity.{name}.{stat}",
                        f"`{name}` differentiable vs no-grad score on the same float images: {stat} |difference| "
                        f"(mean |score| {d['score_mean']:.3g}); {where}",
                        measure("difference", d[stat], ""),
                        rewards=[name],
                    )
                )
    return out


if __name__ == "__main__":
    main()
