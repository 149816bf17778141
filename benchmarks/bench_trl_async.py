"""TRL's reward phase with ``trl_reward_funcs(..., concurrent=True)`` against today's plain functions.

Three rewards in one config: a served reward (``rewardzoo serve`` on this machine, a reward that sleeps
300 ms per call, one request per batch), a local tiny ``clip_score`` (random-init open_clip) and the
``ocr`` verifier (RapidOCR's shipped weights, CPU, one ONNX thread). Workload: ``--samples`` rendered
224x224 text images with their prompts, as one TRL batch (``--samples`` completions).

The reward phase is TRL's own: ``GRPOTrainer._calculate_rewards`` of a real trainer (a tiny GPT-2 policy),
which calls plain functions one after another and gathers coroutine functions on its event-loop thread
(``asyncio.gather`` + ``run_coroutine_threadsafe``). Sides, interleaved: concurrent functions, plain
functions, and each reward alone (plain): max / sum of those is what full overlap would give (the goal of
0.5 needs the two slowest rewards to cost about the same). Both trainers' rewards are checked equal first.

Run: python benchmarks/bench_trl_async.py [--repeats 5] [--samples 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import yaml
from bench_serve import Server
from bench_verifiers import rendered
from results_io import figure, measure, write_results
from timing import interleaved_runs

SERVER_DELAY_MS = 300.0


def _config(server_url: str, clip_dir: Path) -> dict:
    return {
        "rewards": [
            {
                "name": "served",
                "reward_model": "remote",
                "batch_size": 64,
                "kwargs": {"url": server_url, "rewards": ["slow"]},
            },
            {
                "name": "clip",
                "reward_model": "clip_score",
                "model_path": str(clip_dir),
                "device": "cpu",
                "batch_size": 64,
            },
            {"name": "ocr", "reward_model": "ocr", "device": "cpu", "batch_size": 64, "kwargs": {"threads": 1}},
        ]
    }


def _trainer(policy: str, funcs: list, out: Path):
    import datasets
    import trl
    from transformers import AutoModelForCausalLM

    from rewardzoo.testing import word_tokenizer

    tokenizer = word_tokenizer()
    tokenizer.padding_side = "left"
    args = trl.GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        bf16=False,
        disable_tqdm=True,
    )
    return trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(policy),
        reward_funcs=funcs,
        args=args,
        train_dataset=datasets.Dataset.from_dict({"prompt": ["a", "b"]}),
        processing_class=tokenizer,
    )


def bench_reward_phase(repeats: int, n: int) -> list[dict]:
    import torch

    from rewardzoo import testing as rzt
    from rewardzoo.core.loader import RewardLoader
    from rewardzoo.integrations import trl_reward_funcs

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "slow.yaml").write_text(
            yaml.safe_dump(
                {
                    "rewards": [
                        {
                            "name": "slow",
                            "reward_model": "serve_rewards:FixedCostPerCall",
                            "batch_size": 64,
                            "kwargs": {"call_ms": SERVER_DELAY_MS},
                        }
                    ]
                }
            )
        )
        server = Server(root / "slow.yaml")
        try:
            config = _config(server.url, rzt.tiny_open_clip_dir(root / "clip", seed=0))
            policy = rzt.tiny_text_models(root / "text")["gpt2_policy"]
            loader = RewardLoader()  # one model of each reward, shared by every side
            plain, _ = trl_reward_funcs(config, loader=loader)
            concurrent, _ = trl_reward_funcs(config, loader=loader, concurrent=True)
            trainers = {
                "concurrent": _trainer(policy, concurrent, root / "c"),
                "sequential": _trainer(policy, plain, root / "s"),
            }
            trainers.update({f"{f.__name__} alone": _trainer(policy, [f], root / f.__name__) for f in plain})
            images, prompts = rendered(n, 224)
            inputs = [{"prompt": p, "image": img} for p, img in zip(prompts, images)]
            completions = [" ok"] * n

            def phase(trainer):
                return trainer._calculate_rewards(inputs, prompts, completions, [[0]] * n)

            torch.testing.assert_close(phase(trainers["concurrent"]), phase(trainers["sequential"]), equal_nan=True)
            times = interleaved_runs({k: (lambda t=t: phase(t)) for k, t in trainers.items()}, repeats)
        finally:
            server.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = statistics.median(c / s for c, s in zip(times["concurrent"], times["sequential"]))
    alone = {k: v for k, v in med.items() if k.endswith("alone")}
    slowest = max(alone, key=alone.get)
    to_slowest = statistics.median(c / s for c, s in zip(times["concurrent"], times[slowest]))
    bound = statistics.median(max(rep) / sum(rep) for rep in zip(*(times[k] for k in alone)))
    for k, v in med.items():
        print(f"   {k:16s} {v * 1e3:8.1f} ms")
    print(
        f"   concurrent / sequential {ratio:.3f} (max / sum of the rewards alone {bound:.3f}); "
        f"concurrent / slowest alone ({slowest}) {to_slowest:.3f}"
    )
    workload = (
        f"{n} rendered 224x224 text images: a served reward sleeping {SERVER_DELAY_MS:.0f} ms per call, "
        "a tiny `clip_score`, `ocr` (CPU, 1 thread)"
    )
    alone_ms = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in alone.items())
    notes = f"median of {repeats} paired per-repetition ratios; {alone_ms}"
    return [
        figure(
            "integrations.trl_async.concurrent_vs_sequential",
            f"TRL reward phase (`GRPOTrainer._calculate_rewards`), `trl_reward_funcs(concurrent=True)` vs "
            f"plain functions; {workload}",
            measure("concurrent", med["concurrent"] * 1e3, "ms"),
            baseline=measure("sequential", med["sequential"] * 1e3, "ms"),
            ratio=ratio,
            ratio_label="concurrent / sequential",
            goal="<= 0.5",
            notes=f"{notes}; max / sum of the rewards alone, per repetition (what full overlap would give) {bound:.2f}",
        ),
        figure(
            "integrations.trl_async.concurrent_vs_slowest",
            f"TRL reward phase with concurrent functions vs its slowest reward alone ({slowest.split()[0]}); "
            f"{workload}",
            measure("concurrent, all three", med["concurrent"] * 1e3, "ms"),
            baseline=measure(f"{slowest}", med[slowest] * 1e3, "ms"),
            ratio=to_slowest,
            ratio_label="all three / slowest alone",
            goal="<= 1.1",
            notes=notes,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--samples", type=int, default=4)
    args = parser.parse_args()
    write_results(__file__, bench_reward_phase(args.repeats, args.samples))


if __name__ == "__main__":
    sys.exit(main())
