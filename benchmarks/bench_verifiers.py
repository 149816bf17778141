"""Verifier reward benchmarks: ocr through the processor against flow_grpo's per-image engine loop, and
the first call of ocr and nsfw_safety in a fresh process.

- ocr: 32 rendered 512x512 images (Pillow's scalable font, a few sizes, rotations and colours) scored
  through a ``RewardProcessor`` (batch_size 32: one reward call) against a loop calling
  ``RapidOCR(**settings)(image, use_cls=False)`` once per image and applying the formula (flow_grpo's
  pattern, with the same engine, weights and detector settings: the reward's defaults, PaddleOCR 2.x's).
  Median of interleaved runs.
- first call: a fresh Python process that imports rewardzoo, builds the reward and scores one 512x512
  image, against one that builds the package's own engine (``RapidOCR()`` / ``nudenet.NudeDetector()``)
  and scores the same image; median of 3 processes each.

Run: ``python benchmarks/bench_verifiers.py [--quick]``. Ratios > 1 mean rewardzoo is faster.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
from results_io import figure, measure, write_results
from timing import interleaved

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORDS = [
    "Hello World",
    "OPEN 24 HOURS",
    "rewardzoo",
    "Fresh Coffee",
    "Grand Opening",
    "Sale 50%",
    "Welcome Home",
    "Good Morning",
]


def rendered(n: int, size: int = 512):
    """``n`` images with one phrase each and their prompts."""
    from PIL import Image, ImageDraw, ImageFont

    images, prompts = [], []
    for i in range(n):
        text = WORDS[i % len(WORDS)]
        background = (255, 255, 255) if i % 2 == 0 else (20, 30, 50)
        ink = (0, 0, 0) if i % 2 == 0 else (250, 240, 200)
        img = Image.new("RGB", (size, size), background)
        draw = ImageDraw.Draw(img)
        font = ImageFont.load_default(size=32 + 6 * (i % 5))
        left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
        draw.text(((size - (right - left)) / 2 - left, (size - (bottom - top)) / 2 - top), text, font=font, fill=ink)
        images.append(img.rotate((i % 5) - 2, resample=Image.Resampling.BICUBIC, fillcolor=background))
        prompts.append(f'a sign that says "{text}"')
    return images, prompts


def bench_ocr(n: int, repeats: int) -> dict:
    from rapidocr_onnxruntime import RapidOCR

    from rewardzoo import build_processors
    from rewardzoo.rewards.image.ocr import DetectorSettings
    from rewardzoo.rewards.image.text_match import match_score, quoted_target
    from rewardzoo.spec.sample import Sample

    images, prompts = rendered(n)
    samples = [Sample(image=img, prompt=p) for img, p in zip(images, prompts)]
    train, _ = build_processors({"rewards": [{"name": "ocr", "device": "cpu", "batch_size": n}]})
    engine = RapidOCR(**DetectorSettings().rapidocr_kwargs())  # the reward's default detector settings

    def per_image_loop() -> list[float]:
        scores = []
        for img, prompt in zip(images, prompts):
            result, _ = engine(np.asarray(img), use_cls=False)
            text = "".join(t for _box, t, s in result if s > 0) if result else ""
            scores.append(match_score(text, quoted_target(prompt)))
        return scores

    ours = train(samples).rewards["ocr"]
    assert np.allclose(ours, per_image_loop()), "the processor and the per-image loop disagree"
    times, ratios = interleaved({"per-image loop": per_image_loop, "processor": lambda: train(samples)}, repeats)
    loop, proc = times["per-image loop"], times["processor"]
    ratio = 1 / ratios["processor"]
    print(f"ocr, {n} images 512x512: per-image loop {loop:.2f} s | processor {proc:.2f} s | {ratio:.2f}x")
    return figure(
        "verifiers.ocr.processor",
        f"`ocr` on {n} rendered 512x512 images through the processor (one call) vs "
        "`RapidOCR(**settings)(image, use_cls=False)` once per image plus the formula (flow_grpo's pattern), "
        f"same PP-OCRv4 weights and detector settings, ONNX Runtime default threads, median of {repeats} interleaved runs",
        measure("rewardzoo processor", n / proc, "images/s"),
        baseline=measure("per-image engine loop", n / loop, "images/s"),
        ratio=ratio,
        ratio_label="x faster",
        goal=">= 1.5x",
        rewards=["ocr", "video_ocr"],
        notes="identical scores on both sides (checked); detection one image per call on the CPU",
    )


def bench_det_stacking(n: int, repeats: int) -> dict:
    """The detector on stacks of 8 images vs one image per call (the CPU default), same reward otherwise."""
    from rewardzoo.rewards.image.ocr import OCR

    images, prompts = rendered(n)
    single, stacked = OCR(det_batch_size=1), OCR(det_batch_size=8)
    assert single(image=images, prompt=prompts).rewards == stacked(image=images, prompt=prompts).rewards
    times, ratios = interleaved(
        {
            "one image per call": lambda: single(image=images, prompt=prompts),
            "stacks of 8": lambda: stacked(image=images, prompt=prompts),
        },
        repeats,
    )
    one, eight = times["one image per call"], times["stacks of 8"]
    ratio = 1 / ratios["stacks of 8"]
    print(f"ocr detector stacking, {n} images: 1 per call {one:.2f} s | 8 per call {eight:.2f} s | {ratio:.2f}x")
    return figure(
        "verifiers.ocr.det_stacking",
        f"`ocr` on {n} rendered 512x512 images: the PP-OCRv4 detector on stacks "
        "of 8 images (512x512 each: PaddleOCR's det_limit_side_len 960, limit type max) vs one image per "
        "call, on the CPU, ONNX Runtime default threads, median "
        f"of {repeats} interleaved runs",
        measure("det_batch_size 8", n / eight, "images/s"),
        baseline=measure("det_batch_size 1", n / one, "images/s"),
        ratio=ratio,
        ratio_label="x the speed of one image per call",
        rewards=["ocr"],
        notes="why det_batch_size defaults to 1 on the CPU",
    )


FIRST_CALL = {
    "ocr": (
        "from rewardzoo import load_reward\n"
        "r = load_reward({'name': 'ocr', 'device': 'cpu'})\n"
        "r(image=[img], prompt=['a sign that says \"Hello World\"'])\n",
        "import numpy as np\nfrom rapidocr_onnxruntime import RapidOCR\nRapidOCR()(np.asarray(img), use_cls=False)\n",
    ),
    "nsfw_safety": (
        "from rewardzoo import load_reward\n"
        "r = load_reward({'name': 'nsfw_safety', 'device': 'cpu'})\n"
        "r(image=[img])\n",
        "from nudenet import NudeDetector\nNudeDetector().detect(path)\n",
    ),
}


def first_call_seconds(body: str, image_path: str) -> float:
    """Seconds from process start-up to the end of ``body`` (an image is opened first, outside the clock)."""
    code = (
        "import time\nfrom PIL import Image\n"
        f"path = {image_path!r}\nimg = Image.open(path).convert('RGB')\nimg.load()\n"
        "t0 = time.perf_counter()\n" + body + "print(time.perf_counter() - t0)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def bench_first_call(processes: int) -> list[dict]:
    images, _ = rendered(1)
    figs = []
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "sign.png")
        images[0].save(path)
        for name, (ours_body, ref_body) in FIRST_CALL.items():
            ours, ref = [], []
            for _ in range(processes):  # alternate so drifting load hits both sides
                ref.append(first_call_seconds(ref_body, path))
                ours.append(first_call_seconds(ours_body, path))
            o, r = statistics.median(ours), statistics.median(ref)
            label = "RapidOCR()" if name == "ocr" else "nudenet.NudeDetector()"
            print(f"{name} first call: {label} {r:.2f} s | rewardzoo {o:.2f} s")
            figs.append(
                figure(
                    f"verifiers.{name}.first_call",
                    f"`{name}` first call in a fresh process (imports, "
                    f"model load, one 512x512 image) vs {label} doing the same; median of {processes} "
                    "processes",
                    measure("rewardzoo", o, "s"),
                    baseline=measure(label, r, "s"),
                    ratio=r / o,
                    ratio_label="x faster",
                    rewards=[name] + (["video_ocr"] if name == "ocr" else []),
                )
            )
    return figs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    repeats = 3 if args.quick else 5
    figs = [bench_ocr(32, repeats), bench_det_stacking(32, 3)] + bench_first_call(3)
    write_results(__file__, figs)


if __name__ == "__main__":
    main()
