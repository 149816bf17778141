"""What merging the LoRA and the head's precision change in ``videoalign`` scores, on the tiny build.

VideoAlign's reference keeps the LoRA unmerged under PEFT and runs the head in the model dtype (bfloat16);
rewardzoo merges the LoRA into the weights by default (``merge_lora: true``) and runs the head in float32.
On the tiny random VideoAlign release of :func:`rewardzoo.testing.tiny_videoalign_release` (Qwen2-VL of
width 32, LoRA r 4 / alpha 8 on every language-model Linear, non-zero LoRA weights), ``--videos`` random
videos of mixed sizes and frame counts are scored with the backbone in float32 and in bfloat16, and printed:
the largest absolute difference of the Overall score and of the three dimensions between

- merged and unmerged LoRA (head in float32),
- the head in float32 and in bfloat16 (LoRA unmerged),
- rewardzoo's default (merged, float32 head) and the reference's arithmetic (unmerged, head in bfloat16),

next to the spread (standard deviation) of the Overall scores over the videos. Attention is sdpa on both
sides (flash-attention, the reference's, needs a GPU). The numbers are a property of the tiny weights:
they show the size of rounding differences, not what the 2-B release gives.

    python scripts/videoalign_precision.py [--videos 8]
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np
from PIL import Image

from rewardzoo.rewards.vlm.videoalign import DIMENSIONS, VideoAlign
from rewardzoo.testing import tiny_videoalign_release

MIN_PIXELS, MAX_PIXELS, SOURCE_FPS = 56 * 56, 8 * 28 * 28, 4.0
WORDS = ["a cat on a mat", "a photo of a dog", "two cats", "a red car", "a dog on a mat", "waves on a beach"]


def videos(n: int, seed: int = 0) -> tuple[list[list[Image.Image]], list[str]]:
    rng = np.random.default_rng(seed)
    out = []
    for _i in range(n):
        t, h, w = int(rng.integers(5, 13)), int(rng.integers(56, 200)), int(rng.integers(56, 200))
        out.append([Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for _ in range(t)])
    return out, [WORDS[i % len(WORDS)] for i in range(n)]


def scores(reward: VideoAlign, clips, prompts) -> np.ndarray:
    out = reward(video=clips, prompt=prompts)
    return np.column_stack([np.asarray(out.rewards)] + [np.asarray(out.extras[d]) for d in DIMENSIONS])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=8)
    args = parser.parse_args()
    released, *_ = tiny_videoalign_release(tempfile.mkdtemp(), max_pixels=MAX_PIXELS)
    clips, prompts = videos(args.videos)
    print(f"{args.videos} random videos on the tiny VideoAlign build; largest |difference| (Overall; VQ, MQ, TA)")
    print(
        "| backbone | merged vs unmerged LoRA | head float32 vs bfloat16 | default vs reference arithmetic "
        "| spread of Overall (std) |"
    )
    print("|---|---|---|---|---|")
    for dtype in ("float32", "bfloat16"):

        def run(**kw):
            return scores(
                VideoAlign(model_path=str(released), source_fps=SOURCE_FPS, min_pixels=MIN_PIXELS, dtype=dtype, **kw),
                clips,
                prompts,
            )

        merged, unmerged = run(), run(merge_lora=False)
        unmerged_bf16_head = run(merge_lora=False, head_dtype="bfloat16")

        def diff(a, b):
            d = np.abs(a - b).max(axis=0)
            return f"{d[0]:.2e} ({', '.join(f'{x:.1e}' for x in d[1:])})"

        print(
            f"| {dtype} | {diff(merged, unmerged)} | {diff(unmerged, unmerged_bf16_head)} "
            f"| {diff(merged, unmerged_bf16_head)} | {merged[:, 0].std():.3f} |"
        )


if __name__ == "__main__":
    main()
