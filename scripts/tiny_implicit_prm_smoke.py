#!/usr/bin/env python
"""Tiny smoke check of ImplicitPRM (seconds on a CPU).

1. dense rewards ``beta * (log pi - log pi_ref)`` have shape (B, n - 1) on a right-padded, variable-length batch,
   are zero on padding and prompt tokens, and start at zero (the reference is a frozen copy);
2. backward of the PRIME loss reaches the trainable model only (no gradient on the reference);
3. a few steps with label 1 raise the outcome reward; with label 0 (from the same start) they lower it.

``--backbone palm`` runs the same checks on a tiny palm-rlhf-pytorch PaLM (needs palm-rlhf-pytorch).
Prints one line per check and a JSON summary last; exits 1 when a check fails.
    python scripts/tiny_implicit_prm_smoke.py --device auto [--backbone palm]
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from rewardzoo.errors import ConfigError
from rewardzoo.rewards.models.text.backbones import PaLMBackbone, TinyTransformer
from rewardzoo.rewards.text.implicit_prm import ImplicitPRM
from rewardzoo.shared.device import resolve_device, valid_device


def make_backbone(kind: str, vocab: int) -> torch.nn.Module:
    """A tiny causal backbone: the built-in transformer, or a palm-rlhf-pytorch PaLM (ConfigError when missing)."""
    if kind == "palm":
        return PaLMBackbone.create(num_tokens=vocab, dim=32, depth=2, heads=4, dim_head=8)
    return TinyTransformer(vocab_size=vocab, dim=32, depth=2, heads=4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--beta", type=float, default=0.5)
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
    vocab, lengths, prompt_lengths = 64, [10, 6, 8, 5], [3, 2, 4, 1]
    gen = torch.Generator().manual_seed(args.seed)
    n = max(lengths)
    ids = torch.zeros(len(lengths), n, dtype=torch.long)
    mask = torch.zeros(len(lengths), n, dtype=torch.bool)
    response = torch.zeros_like(mask)
    for i, (length, plen) in enumerate(zip(lengths, prompt_lengths)):
        ids[i, :length] = torch.randint(1, vocab, (length,), generator=gen)
        mask[i, :length] = True
        response[i, plen:length] = True
    ids, mask, response = ids.to(device), mask.to(device), response.to(device)
    checks: dict[str, bool] = {}

    def fresh() -> ImplicitPRM:
        torch.manual_seed(args.seed)
        return ImplicitPRM(make_backbone(args.backbone, vocab), beta=args.beta).to(device)

    try:
        prm = fresh().train()
    except ConfigError as exc:
        parser.error(str(exc))
    out = prm(ids, mask, response, labels=torch.ones(len(lengths), device=device))
    checks["dense_shape"] = tuple(out.process_rewards.shape) == (len(lengths), n - 1)
    checks["starts_at_zero"] = bool((out.process_rewards == 0).all())
    out.loss.backward()
    checks["grad_reaches_model"] = any(
        p.grad is not None and bool(p.grad.abs().sum() > 0) for p in prm.model.parameters()
    )
    checks["no_grad_on_reference"] = all(p.grad is None and not p.requires_grad for p in prm.ref_model.parameters())
    print(f"dense rewards {tuple(out.process_rewards.shape)} for input {tuple(ids.shape)}; loss {out.loss.item():.4f}")

    outcomes = {}
    for label in (1.0, 0.0):
        prm = fresh().train()
        opt = torch.optim.SGD(prm.trainable_parameters(), lr=0.1)
        y = torch.full((len(lengths),), label, device=device)
        with torch.no_grad():
            start = prm.outcome_reward(ids, mask, response)
        for _ in range(args.steps):
            opt.zero_grad()
            prm.loss(ids, y, mask, response).backward()
            opt.step()
        with torch.no_grad():
            out = prm(ids, mask, response)
        outcomes[label] = (start.tolist(), out.outcome_rewards.tolist())
        moved = out.outcome_rewards > start if label == 1.0 else out.outcome_rewards < start
        checks[f"label_{int(label)}_moves_outcome"] = bool(moved.all())
        checks[f"label_{int(label)}_masked_positions_zero"] = bool((out.process_rewards[~out.mask] == 0).all())
        print(
            f"label {int(label)}: outcome {[round(v, 4) for v in start.tolist()]} -> "
            f"{[round(v, 4) for v in out.outcome_rewards.tolist()]}"
        )

    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    summary = {
        "device": device,
        "backbone": args.backbone,
        "dense_shape": [len(lengths), n - 1],
        "outcome_label_1": outcomes[1.0],
        "outcome_label_0": outcomes[0.0],
        "checks": checks,
        "ok": all(checks.values()),
    }
    print(json.dumps(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
