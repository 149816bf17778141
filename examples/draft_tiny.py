"""DRaFT-K / ReFL in miniature: fine-tune a tiny generator on the gradient of a differentiable reward.

A small seeded conv-net "sampler" maps fixed noise to images in a few refinement steps; as in DRaFT-K,
only the last ``K`` steps keep their graph (the earlier ones run without gradients), the reward is
``rewardzoo.differentiable(...)`` on the final pixels (float, in [0, 1], on the same device), and the
loss is ``-reward.mean()``. The reward is ``clip_score`` on a tiny random CLIP written by
``rewardzoo.testing.tiny_open_clip_dir`` (offline, seconds on a CPU), so the numbers only show the
mechanics: the reward rises as the generator follows its gradient, while the reward model stays frozen.

Run: ``python examples/draft_tiny.py [--steps 40] [--seed 0] [--k 1]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch import nn

import rewardzoo
from rewardzoo.testing import tiny_open_clip_dir

PROMPTS = ["a red cube", "a photo of a dog", "two cats on a sofa", "a blue sky"]


class TinySampler(nn.Module):
    """Noise (B, 3, 64, 64) -> images in [0, 1] through ``steps`` residual refinement steps."""

    def __init__(self, steps: int = 4, width: int = 16) -> None:
        super().__init__()
        self.steps = steps
        self.net = nn.Sequential(nn.Conv2d(4, width, 3, padding=1), nn.SiLU(), nn.Conv2d(width, 3, 3, padding=1))

    def step(self, x: torch.Tensor, t: int) -> torch.Tensor:
        tt = torch.full_like(x[:, :1], t / self.steps)
        return x + 0.5 * torch.tanh(self.net(torch.cat([x, tt], dim=1)))

    def forward(self, noise: torch.Tensor, k: int) -> torch.Tensor:
        x = noise
        with torch.no_grad():  # DRaFT-K: no graph through the first steps
            for t in range(self.steps - k):
                x = self.step(x, t)
        for t in range(self.steps - k, self.steps):
            x = self.step(x, t)
        return torch.sigmoid(x)


def main(steps: int = 40, seed: int = 0, k: int = 1, lr: float = 3e-3, quiet: bool = False) -> dict:
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        clip_dir = tiny_open_clip_dir(os.path.join(tmp, "tiny-clip"), seed=seed)
        reward = rewardzoo.differentiable(
            {
                "rewards": [
                    {"name": "clip_score", "model_path": str(clip_dir), "device": "cpu", "kwargs": {"prefix": ""}}
                ]
            }
        )
        sampler = TinySampler()
        opt = torch.optim.Adam(sampler.parameters(), lr=lr)
        noise = torch.randn(len(PROMPTS), 3, 64, 64, generator=torch.Generator().manual_seed(seed))
        history = []
        for step in range(steps):
            pixels = sampler(noise, k)
            scores = reward(pixels, PROMPTS)
            loss = -scores.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            history.append(float(scores.detach().mean()))
            if not quiet and (step % 10 == 0 or step == steps - 1):
                print(f"step {step:3d}  mean clip_score {history[-1]:.4f}")
        frozen = all(p.grad is None for r in reward.rewards.values() for p in r.backbone.model.parameters())
    result = {"first": history[0], "last": history[-1], "history": history, "reward_frozen": frozen}
    if not quiet:
        print(f"reward {result['first']:.4f} -> {result['last']:.4f} in {steps} steps (reward model frozen: {frozen})")
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=int, default=1, help="DRaFT-K: steps that keep their graph")
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()
    main(args.steps, args.seed, args.k, args.lr)
