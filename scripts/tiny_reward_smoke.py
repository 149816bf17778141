#!/usr/bin/env python
"""Tiny smoke check of SequenceRewardModel (seconds on a CPU).

1. scalar head + LoRA scope: a few Adam steps on float labels with a prompt indicator (prompt_lengths) over a
   right-padded, variable-length batch must lower the MSE loss;
2. binned head: cross-entropy steps on class ids, then inference gives logits (B, K) and expected bin values
   (B,), and sampled bin ids (B,) only when asked (reproducible with a seeded generator).

``--backbone palm`` runs the same checks on a tiny palm-rlhf-pytorch PaLM (needs palm-rlhf-pytorch).
Prints one line per check and a JSON summary last; exits 1 when a check fails.
    python scripts/tiny_reward_smoke.py --device auto [--backbone palm]
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from rewardzoo.errors import ConfigError
from rewardzoo.rewards.models.text.backbones import PaLMBackbone, TinyTransformer
from rewardzoo.rewards.text.sequence_reward import SequenceRewardModel
from rewardzoo.shared.device import resolve_device, valid_device


def batch(device: str, vocab: int, lengths: list[int], seed: int):
    """Random token ids right-padded with id 0 (padding is marked in the mask, never by a negative id)."""
    gen = torch.Generator().manual_seed(seed)
    n = max(lengths)
    ids = torch.zeros(len(lengths), n, dtype=torch.long)
    mask = torch.zeros(len(lengths), n, dtype=torch.bool)
    for i, length in enumerate(lengths):
        ids[i, :length] = torch.randint(1, vocab, (length,), generator=gen)
        mask[i, :length] = True
    return ids.to(device), mask.to(device)


def make_backbone(kind: str, vocab: int) -> torch.nn.Module:
    """A tiny backbone: the built-in transformer, or a palm-rlhf-pytorch PaLM (ConfigError when it is missing)."""
    if kind == "palm":
        return PaLMBackbone.create(num_tokens=vocab, dim=32, depth=2, heads=4, dim_head=8)
    return TinyTransformer(vocab_size=vocab, dim=32, depth=2, heads=4)


def train(model, steps: int, lr: float, **inputs) -> tuple[float, float]:
    model.train()
    opt = torch.optim.Adam(model.trainable_parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = model(**inputs).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        final = model(**inputs).loss.item()
    return losses[0], final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--backbone",
        choices=("tiny", "palm"),
        default="tiny",
        help="tiny: the built-in transformer; palm: a palm-rlhf-pytorch PaLM",
    )
    args = parser.parse_args(argv)
    if not valid_device(args.device):
        parser.error(f"unknown device '{args.device}'; use auto, cpu, cuda, cuda:N or mps")
    device = resolve_device(args.device)
    torch.manual_seed(args.seed)
    vocab, lengths = 64, [12, 7, 9, 4, 10, 6]
    try:
        backbone = make_backbone(args.backbone, vocab).to(device)
    except ConfigError as exc:
        parser.error(str(exc))
    ids, mask = batch(device, vocab, lengths, args.seed)
    prompt_lengths = torch.tensor([4, 3, 5, 2, 6, 1], device=device)
    checks: dict[str, bool] = {}

    scalar = SequenceRewardModel(backbone, lora_scope="reward", lora_r=4)
    labels = torch.linspace(-1.0, 1.0, len(lengths), device=device)
    before, after = train(
        scalar, args.steps, 1e-2, input_ids=ids, attention_mask=mask, prompt_lengths=prompt_lengths, labels=labels
    )
    checks["scalar_loss_decreases"] = after < before
    rewards = scalar.score(ids, mask, prompt_lengths=prompt_lengths).rewards
    checks["scalar_rewards_shape"] = tuple(rewards.shape) == (len(lengths),)
    print(f"scalar + LoRA: MSE {before:.4f} -> {after:.4f}; rewards {tuple(rewards.shape)}")

    bins = 5
    binned = SequenceRewardModel(backbone, num_bins=bins, bin_values=[1, 2, 3, 4, 5])
    classes = torch.tensor([0, 1, 2, 3, 4, 2], device=device)
    ce_before, ce_after = train(
        binned, args.steps, 1e-2, input_ids=ids, attention_mask=mask, prompt_lengths=prompt_lengths, labels=classes
    )
    checks["binned_loss_decreases"] = ce_after < ce_before
    out = binned.score(ids, mask, prompt_lengths=prompt_lengths)
    gen = lambda: torch.Generator(device=device).manual_seed(args.seed)  # noqa: E731
    sampled = binned.score(ids, mask, prompt_lengths=prompt_lengths, sample_bins=True, generator=gen()).bin_ids
    again = binned.score(ids, mask, prompt_lengths=prompt_lengths, sample_bins=True, generator=gen()).bin_ids
    checks["binned_logits_shape"] = tuple(out.logits.shape) == (len(lengths), bins)
    checks["binned_no_ids_unless_asked"] = out.bin_ids is None
    checks["binned_sampled_ids"] = (
        tuple(sampled.shape) == (len(lengths),)
        and sampled.dtype == torch.long
        and bool(((sampled >= 0) & (sampled < bins)).all())
    )
    checks["binned_sampling_reproducible"] = bool(torch.equal(sampled, again))
    checks["binned_rewards_in_bin_range"] = bool(((out.rewards >= 1) & (out.rewards <= 5)).all())
    checks["caller_backbone_untouched"] = not any("adapters" in name for name, _ in backbone.named_modules())
    print(
        f"binned: CE {ce_before:.4f} -> {ce_after:.4f}; logits {tuple(out.logits.shape)}; "
        f"sampled ids {sampled.tolist()}; expected values {[round(v, 3) for v in out.rewards.tolist()]}"
    )

    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    summary = {
        "device": device,
        "backbone": args.backbone,
        "scalar_loss": [before, after],
        "binned_loss": [ce_before, ce_after],
        "logits_shape": list(out.logits.shape),
        "sampled_ids": sampled.tolist(),
        "checks": checks,
        "ok": all(checks.values()),
    }
    print(json.dumps(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
