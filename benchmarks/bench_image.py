"""Image reward benchmarks: side-by-side ratios measured in one run (medians of several runs after warm-up).

1. Preprocessing, 32 RGB images 512x512 -> (32, 3, 224, 224): open_clip's PIL transform pipeline vs
   rewardzoo's tensor-native path (from PIL, and from uint8 / float tensors), with the pixel and
   CLIPScore differences between the two.
2. clip_score vs torchmetrics' CLIPScore on the same transformers CLIP weights (ViT-B/32 sizes,
   random init) and the same 32 image-prompt pairs: images per second. Also the open_clip backend
   against plain open_clip usage (PIL transform + 77-position encode_text).
3. Peak memory (ru_maxrss of a fresh process) of a config with clip_score + laion_aesthetic on one
   CLIP backbone (shared) against the same two rewards with two separate backbone loads.

Weights are random (no downloads here); speed and memory do not depend on the values. Contestants run
round-robin (see :func:`interleaved`) with one torch thread, so that the ratios survive a shared machine.
Run: ``python benchmarks/bench_image.py`` (about 2.5 minutes on the shared 2-core machine;
``--quick`` skips the memory part, ``--only SECTION`` runs one part).
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
from PIL import Image
from results_io import figure, measure, write_results
from timing import interleaved

# ViT-B/32 sizes with a 768-d embedding, so the LAION aesthetic head (768 inputs) fits the same backbone.
B32_768 = {
    "embed_dim": 768,
    "vision_cfg": {"image_size": 224, "layers": 12, "width": 768, "patch_size": 32},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 512, "heads": 8, "layers": 12},
}
PREPROCESS = {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711]}
PROMPTS = [
    "a photo of a cat",
    "a red car parked on a rainy street at night",
    "an astronaut riding a horse",
    "a bowl of soup",
    "two dogs playing in the snow",
    "a watercolor painting of a lighthouse",
    "a close-up of a hummingbird",
    "a city skyline at dawn",
]


def interleaved_medians(fns: dict, runs: int) -> dict:
    return interleaved(fns, runs)[0]


def make_images(n: int, size: int = 512, seed: int = 0) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    return [
        Image.fromarray(rng.integers(0, 256, (size // 16, size // 16, 3), dtype=np.uint8)).resize(
            (size, size), Image.BICUBIC
        )
        for _ in range(n)
    ]


class TensorFeatures(torch.nn.Module):
    """torchmetrics 1.9 + transformers 5: make get_*_features return tensors (the upstream fix)."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config

    def get_image_features(self, *a, **k):
        out = self.model.get_image_features(*a, **k)
        return out if isinstance(out, torch.Tensor) else out.pooler_output

    def get_text_features(self, *a, **k):
        out = self.model.get_text_features(*a, **k)
        return out if isinstance(out, torch.Tensor) else out.pooler_output


def bench_preprocess(oc_dir: Path, runs: int) -> dict:
    import open_clip

    from rewardzoo.rewards.image.clip_score import ClipScore
    from rewardzoo.shared.image_ops import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, PreprocessConfig, preprocess_images

    images = make_images(32)
    u8 = torch.stack([torch.from_numpy(np.array(im)).permute(2, 0, 1) for im in images])
    f32 = u8.float() / 255
    cfg = PreprocessConfig(size=224)
    pil_tf = open_clip.image_transform(224, is_train=False, mean=OPENAI_CLIP_MEAN, std=OPENAI_CLIP_STD)
    from rewardzoo.core.fields import convert_field

    t = interleaved_medians(
        {
            "pil": lambda: torch.stack([pil_tf(im) for im in images]),
            "ours": lambda: preprocess_images(images, cfg),
            "u8": lambda: preprocess_images(u8, cfg),
            "f32": lambda: preprocess_images(list(f32), cfg),
            # what the processor does for PIL/path samples of the image rewards (uint8 images), then ours
            "proc": lambda: preprocess_images(
                [convert_field("image", im, None, ClipScore.inputs) for im in images], cfg
            ),
        },
        runs,
    )
    t_pil, t_ours, t_u8, t_f32, t_proc = t["pil"], t["ours"], t["u8"], t["f32"], t["proc"]
    ref = torch.stack([pil_tf(im) for im in images])
    ours = preprocess_images(images, cfg)
    diff = (ours - ref).abs()
    # score difference: the same clip_score model fed the PIL-pipeline pixels vs ours
    reward = ClipScore(model_path=str(oc_dir))
    bb = reward.backbone
    txt = bb.encode_text(["A photo depicts " + PROMPTS[i % len(PROMPTS)] for i in range(32)])
    s_ours = 2.5 * (bb.encode_image(ours) * txt).sum(-1).clamp(min=0)
    s_pil = 2.5 * (bb.encode_image(ref) * txt).sum(-1).clamp(min=0)
    cos_ours, cos_pil = (bb.encode_image(ours) * txt).sum(-1), (bb.encode_image(ref) * txt).sum(-1)
    return {
        "pil_ms": 1e3 * t_pil,
        "tensor_from_pil_ms": 1e3 * t_ours,
        "tensor_from_uint8_ms": 1e3 * t_u8,
        "tensor_from_float_ms": 1e3 * t_f32,
        "processor_path_ms": 1e3 * t_proc,
        "speedup_from_pil": t_pil / t_ours,
        "speedup_processor_path": t_pil / t_proc,
        "speedup_from_uint8": t_pil / t_u8,
        "speedup_from_float": t_pil / t_f32,
        "max_abs_pixel_diff": float(diff.max()),
        "mean_abs_pixel_diff": float(diff.mean()),
        "max_abs_clip_score_diff": float((s_ours - s_pil).abs().max()),
        "max_abs_cosine_diff": float((cos_ours - cos_pil).abs().max()),
    }


def bench_throughput(hf_dir: Path, oc_dir: Path, runs: int, n: int = 32) -> dict:
    import open_clip
    from torchmetrics.multimodal.clip_score import CLIPScore
    from transformers import CLIPModel, CLIPProcessor

    from rewardzoo.rewards.image.clip_score import ClipScore

    images = make_images(n, seed=1)
    prompts = [PROMPTS[i % len(PROMPTS)] + f" number {i}" for i in range(n)]
    u8 = [torch.from_numpy(np.array(im)).permute(2, 0, 1) for im in images]
    model = CLIPModel.from_pretrained(hf_dir).eval()
    processor = CLIPProcessor.from_pretrained(hf_dir)
    wrapped = TensorFeatures(model)
    metric = CLIPScore(model_name_or_path=lambda: (wrapped, processor))

    def tm():
        metric.reset()
        with torch.no_grad():
            metric.update(u8, prompts)
        return metric.compute()

    ours = ClipScore(model_path=str(hf_dir), prefix="")
    # the same weights in bfloat16 (a config option, `dtype: bfloat16`): speed and score drift vs float32
    ours_bf16 = ClipScore(model_path=str(hf_dir), prefix="", dtype="bfloat16")
    t = interleaved_medians(
        {
            "tm": tm,
            "ours": lambda: ours(image=images, prompt=prompts),
            "bf16": lambda: ours_bf16(image=images, prompt=prompts),
        },
        runs,
    )
    t_tm, t_ours_pil, t_bf16 = t["tm"], t["ours"], t["bf16"]
    bf16_diff = float(
        (
            torch.as_tensor(ours_bf16(image=images, prompt=prompts).rewards)
            - torch.as_tensor(ours(image=images, prompt=prompts).rewards)
        )
        .abs()
        .max()
    )
    ours_bf16 = None  # free the bf16 copy before the next section
    # per-sample agreement on these weights (torchmetrics' 100*cos vs our cosine)
    from torchmetrics.functional.multimodal.clip_score import _clip_score_update

    with torch.no_grad():
        per, _ = _clip_score_update(u8, prompts, wrapped, processor)
    cos_diff = float((ours(image=u8, prompt=prompts).extras["cosine"] - per / 100).abs().max())

    # open_clip backend: our path vs plain open_clip (PIL transform, 77-position encode_text)
    oc = ClipScore(model_path=str(oc_dir))
    ref_model, _, ref_pre = open_clip.create_model_and_transforms(f"local-dir:{oc_dir}")
    ref_model.eval()
    tok = open_clip.get_tokenizer(f"local-dir:{oc_dir}")
    captions = ["A photo depicts " + p for p in prompts]

    def plain_open_clip():
        with torch.no_grad():
            img = ref_model.encode_image(torch.stack([ref_pre(im) for im in images]), normalize=True)
            txt = ref_model.encode_text(tok(captions), normalize=True)
        return 2.5 * (img * txt).sum(-1).clamp(min=0)

    tokens = tok(captions)

    def text77():
        with torch.no_grad():
            return ref_model.encode_text(tokens)

    t = interleaved_medians(
        {
            "plain": plain_open_clip,
            "ours": lambda: oc(image=images, prompt=prompts),
            "text77": text77,
            "textL": lambda: oc.backbone._encode_unique_text(captions),
        },
        runs,
    )
    t_plain, t_oc, t_text77, t_textL = t["plain"], t["ours"], t["text77"], t["textL"]
    return {
        "pairs": n,
        "torchmetrics_img_per_s": n / t_tm,
        "clip_score_hf_img_per_s": n / t_ours_pil,
        "ratio_vs_torchmetrics": t_tm / t_ours_pil,
        "max_abs_cosine_diff_vs_torchmetrics": cos_diff,
        "clip_score_hf_bf16_img_per_s": n / t_bf16,
        "ratio_bf16_vs_torchmetrics_fp32": t_tm / t_bf16,
        "max_abs_clip_score_diff_bf16_vs_fp32": bf16_diff,
        "plain_open_clip_img_per_s": n / t_plain,
        "clip_score_open_clip_img_per_s": n / t_oc,
        "ratio_vs_plain_open_clip": t_plain / t_oc,
        "open_clip_text77_ms": 1e3 * t_text77,
        "open_clip_textL_ms": 1e3 * t_textL,
        "text_ratio": t_text77 / t_textL,
    }


MEMORY_CHILD = r"""
import json, os, resource, sys, weakref
import numpy as np, torch
from PIL import Image
import rewardzoo.rewards.models.clip as clip
from rewardzoo import RewardProcessor, Sample
oc_dir, head, mode = sys.argv[1], sys.argv[2], sys.argv[3]
from rewardzoo.core.loader import RewardLoader
loader = RewardLoader()
a = loader.load({"name": "clip_score", "model_path": oc_dir, "device": "cpu"})
if mode == "separate":
    clip._CACHE = weakref.WeakValueDictionary()  # forget the first load: the second reward loads its own copy
b = loader.load({"name": "laion_aesthetic", "model_path": head, "device": "cpu", "kwargs": {"clip_model": oc_dir}})
proc = RewardProcessor([{"name": "clip_score", "model_path": oc_dir, "device": "cpu"},
                        {"name": "laion_aesthetic", "model_path": head, "device": "cpu",
                         "kwargs": {"clip_model": oc_dir}}], loader=loader)
rng = np.random.default_rng(0)
imgs = [Image.fromarray(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)) for _ in range(8)]
proc([Sample(image=im, prompt="a cat") for im in imgs])
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
params = {id(p): p.numel() * p.element_size() for r in (a, b) for p in r.backbone.model.parameters()}
print(json.dumps({"shared": a.backbone is b.backbone, "rss_after_mb": int(status["VmRSS"].split()[0]) / 1024,
                  "peak_rss_mb": int(status["VmHWM"].split()[0]) / 1024,
                  "clip_parameter_mb": sum(params.values()) / 2**20}))
"""


def bench_memory(oc_dir: Path, head: Path) -> dict:
    out = {}
    for mode in ("shared", "separate"):
        res = subprocess.run(
            [sys.executable, "-c", MEMORY_CHILD, str(oc_dir), str(head), mode],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        out[mode] = json.loads(res.stdout.strip().splitlines()[-1])
    for key in ("peak_rss_mb", "rss_after_mb", "clip_parameter_mb"):
        out[f"{key}_ratio_separate_over_shared"] = out["separate"][key] / out["shared"][key]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1 avoids spin-waits on a shared machine)"
    )
    ap.add_argument("--quick", action="store_true", help="3 runs, skip the memory benchmark")
    ap.add_argument("--only", choices=("preprocess", "throughput", "memory"), help="run one section")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    runs = 3 if args.quick else args.runs
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        oc_dir, hf_dir = tmp / "b32-768", tmp / "openai-clip-b32"
        from transformers import CLIPConfig, CLIPImageProcessor

        from rewardzoo.testing import aesthetic_head_file, tiny_hf_clip_dir, tiny_open_clip_dir

        # full-size random-init models (speed does not depend on the weight values)
        tiny_open_clip_dir(oc_dir, seed=0, model_cfg=B32_768, preprocess_cfg=PREPROCESS)
        # transformers CLIPModel with the ViT-B/32 default sizes + an offline tokenizer and processor
        tiny_hf_clip_dir(hf_dir, seed=0, config=CLIPConfig(), image_processor=CLIPImageProcessor())
        head = aesthetic_head_file(tmp / "sac+logos+ava1-l14-linearMSE.pth", input_size=768)
        results = {"torch_threads": args.threads, "runs": runs}
        if args.only in (None, "preprocess"):
            results["preprocess_32x512"] = bench_preprocess(oc_dir, runs)
            print(json.dumps({"preprocess_32x512": results["preprocess_32x512"]}, indent=1), flush=True)
        if args.only in (None, "throughput"):
            results["clip_score_throughput"] = bench_throughput(hf_dir, oc_dir, 3)
            print(json.dumps({"clip_score_throughput": results["clip_score_throughput"]}, indent=1), flush=True)
        if args.only == "memory" or (args.only is None and not args.quick):
            results["memory_clip_score_plus_aesthetic"] = bench_memory(oc_dir, head)
            print(json.dumps({"memory": results["memory_clip_score_plus_aesthetic"]}, indent=1), flush=True)
    parts = [
        f"image.{p}"
        for p in ("preprocess", "throughput", "memory")
        if p == args.only or (args.only is None and not (p == "memory" and args.quick))
    ]
    write_results(__file__, figures(results), parts=parts)


CROP_REWARDS = ["clip_score", "clip_image_similarity", "laion_aesthetic", "pickscore"]  # shared CLIP preprocessing


def figures(results: dict) -> list[dict]:
    out = []
    threads, runs = results["torch_threads"], results["runs"]
    if "preprocess_32x512" in results:
        p = results["preprocess_32x512"]
        work = f"32 RGB images 512x512 -> 224x224, {threads} torch thread(s), median of {runs} interleaved runs"
        pil = measure("open_clip PIL pipeline", p["pil_ms"], "ms")
        for key, source, ms, speedup, goal, rewards in (
            (
                "from_pil",
                "rewardzoo tensor path from the same PIL images",
                "tensor_from_pil_ms",
                "speedup_from_pil",
                None,
                CROP_REWARDS,
            ),
            (
                "processor_path",
                "through the processor (PIL -> uint8 tensor, then the tensor path)",
                "processor_path_ms",
                "speedup_processor_path",
                ">= 3x",
                CROP_REWARDS,
            ),
            (
                "from_uint8",
                "rewardzoo tensor path from a uint8 (N, 3, H, W) tensor",
                "tensor_from_uint8_ms",
                "speedup_from_uint8",
                None,
                ["clip_score"],
            ),
            (
                "from_float",
                "rewardzoo tensor path from float tensors in [0, 1] (quantised at full resolution)",
                "tensor_from_float_ms",
                "speedup_from_float",
                None,
                ["clip_score"],
            ),
        ):
            out.append(
                figure(
                    f"image.preprocess.{key}",
                    f"CLIP preprocessing, {source}; {work}",
                    measure("rewardzoo", p[ms], "ms"),
                    baseline=pil,
                    ratio=p[speedup],
                    ratio_label="x faster",
                    goal=goal,
                    rewards=rewards,
                )
            )
        for key, what in (
            ("max_abs_pixel_diff", "max |pixel difference| to the open_clip PIL pipeline, after normalisation"),
            ("mean_abs_pixel_diff", "mean |pixel difference| to the open_clip PIL pipeline, after normalisation"),
            (
                "max_abs_clip_score_diff",
                "max |CLIPScore difference|, the same model fed the PIL-pipeline pixels vs rewardzoo's",
            ),
            (
                "max_abs_cosine_diff",
                "max |cosine difference|, the same model fed the PIL-pipeline pixels vs rewardzoo's",
            ),
        ):
            out.append(
                figure(
                    f"image.preprocess.{key}",
                    f"CLIP preprocessing accuracy: {what}; 32 images 512x512, "
                    "ViT-B/32-sized random-init open_clip model",
                    measure("difference", p[key], ""),
                    rewards=["clip_score"],
                )
            )
    if "clip_score_throughput" in results:
        t = results["clip_score_throughput"]
        n = t["pairs"]
        work = f"{n} images 512x512 + {n} distinct prompts, ViT-B/32 sizes, random init, {threads} torch thread(s)"
        tm = measure("torchmetrics CLIPScore fp32", t["torchmetrics_img_per_s"], "img/s")
        out += [
            figure(
                "image.throughput.vs_torchmetrics",
                f"`clip_score` (transformers weights, fp32) vs torchmetrics CLIPScore on the same weights; {work}",
                measure("clip_score fp32", t["clip_score_hf_img_per_s"], "img/s"),
                baseline=tm,
                ratio=t["ratio_vs_torchmetrics"],
                ratio_label="x faster",
                goal=">= 1.5x",
                rewards=["clip_score"],
                notes="at equal precision on CPU both sides spend most of the time in the same image tower",
            ),
            figure(
                "image.throughput.cosine_diff_vs_torchmetrics",
                f"`clip_score` vs torchmetrics CLIPScore: max |cosine difference| per sample; {work}",
                measure("difference", t["max_abs_cosine_diff_vs_torchmetrics"], ""),
                rewards=["clip_score"],
            ),
            figure(
                "image.throughput.bf16_vs_torchmetrics",
                f"`clip_score` with `dtype: bfloat16` vs torchmetrics CLIPScore fp32; {work}",
                measure("clip_score bf16", t["clip_score_hf_bf16_img_per_s"], "img/s"),
                baseline=tm,
                ratio=t["ratio_bf16_vs_torchmetrics_fp32"],
                ratio_label="x faster",
                rewards=["clip_score"],
            ),
            figure(
                "image.throughput.bf16_score_diff",
                f"`clip_score` in bfloat16 vs float32: max |score change|; {work}",
                measure("difference", t["max_abs_clip_score_diff_bf16_vs_fp32"], ""),
                rewards=["clip_score"],
            ),
            figure(
                "image.throughput.vs_plain_open_clip",
                f"`clip_score` (open_clip backend) vs plain open_clip (PIL transform + 77-position "
                f"`encode_text`); {work}",
                measure("clip_score", t["clip_score_open_clip_img_per_s"], "img/s"),
                baseline=measure("plain open_clip", t["plain_open_clip_img_per_s"], "img/s"),
                ratio=t["ratio_vs_plain_open_clip"],
                ratio_label="x faster",
                rewards=["clip_score"],
            ),
            figure(
                "image.throughput.text_tower",
                f"open_clip text tower on {n} captions: the longest prompt's length vs 77 positions (same embeddings)",
                measure("longest-prompt length", t["open_clip_textL_ms"], "ms"),
                baseline=measure("77 positions", t["open_clip_text77_ms"], "ms"),
                ratio=t["text_ratio"],
                ratio_label="x faster",
                rewards=["clip_score", "hpsv2"],
            ),
        ]
    if "memory_clip_score_plus_aesthetic" in results:
        m = results["memory_clip_score_plus_aesthetic"]
        for key, what in (
            ("peak_rss_mb", "peak RSS"),
            ("rss_after_mb", "RSS after scoring"),
            ("clip_parameter_mb", "CLIP parameter memory"),
        ):
            out.append(
                figure(
                    f"image.memory.{key.removesuffix('_mb')}",
                    f"{what} of a fresh process with `clip_score` + `laion_aesthetic` (ViT-B/32-sized backbone with a "
                    "768-d embedding, 8 images 512x512 scored): one shared backbone vs two separate loads",
                    measure("one shared backbone", m["shared"][key], "MB"),
                    baseline=measure("two separate loads", m["separate"][key], "MB"),
                    ratio=m[f"{key}_ratio_separate_over_shared"],
                    ratio_label="x less",
                    rewards=["clip_score", "laion_aesthetic"],
                )
            )
    return out


if __name__ == "__main__":
    main()
