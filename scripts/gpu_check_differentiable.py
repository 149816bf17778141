"""One-shot CUDA check of the differentiable reward path, for a session that is lent a GPU.

Builds a random-init CLIP at real size (open_clip ViT-L-14 config, no download), then on ``cuda``:

1. gradients from ``clip_score`` to the pixels under ``torch.autocast("cuda", dtype=torch.bfloat16)`` are
   finite and non-zero, and the score is within a stated tolerance of the float32 one;
2. peak CUDA memory of forward+backward on 8 images 512x512, with and without gradient checkpointing;
3. parity of the differentiable score with the no-grad score in float32.

Prints one JSON object; exits 1 when a check fails. Run: python scripts/gpu_check_differentiable.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    import open_clip
    import torch

    import rewardzoo
    from rewardzoo.testing import tiny_open_clip_dir

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 1
    out: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        clip_dir = tiny_open_clip_dir(Path(tmp) / "vit-l-14", seed=0, model_cfg=open_clip.get_model_config("ViT-L-14"))
        config = {"rewards": [{"name": "clip_score", "model_path": str(clip_dir), "device": "cuda"}]}
        gen = torch.Generator(device="cuda").manual_seed(0)
        pixels = torch.rand(8, 3, 512, 512, device="cuda", generator=gen)
        prompts = [f"a photo of thing {i}" for i in range(8)]
        ok = True
        for checkpointing in (False, True):
            f = rewardzoo.differentiable(config, gradient_checkpointing=checkpointing)
            x = pixels.clone().requires_grad_(True)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                total = f(x, prompts)
            total.sum().backward()
            torch.cuda.synchronize()
            key = "checkpointing" if checkpointing else "plain"
            out[f"{key}_seconds"] = time.perf_counter() - start
            out[f"{key}_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
            grad_ok = bool(torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0)
            out[f"{key}_grad_ok"] = grad_ok
            ok &= grad_ok
        f32 = rewardzoo.differentiable(config)
        with torch.no_grad():
            exact = f32(pixels, prompts)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                half = f32(pixels, prompts)
        nograd = rewardzoo.RewardProcessor(config["rewards"])(
            [rewardzoo.Sample(image=p, prompt=t) for p, t in zip(pixels, prompts)]
        ).rewards["clip_score"]
        out["bf16_max_abs_diff"] = float((half.float() - exact).abs().max())
        out["parity_max_abs_diff"] = float((exact.cpu() - torch.as_tensor(nograd)).abs().max())
        ok &= out["bf16_max_abs_diff"] < 0.05 and out["parity_max_abs_diff"] < 2.5e-3
    out["ok"] = ok
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
