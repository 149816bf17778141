"""One-shot CUDA check of residency (``offload: cpu|drop``), for a session that is lent a GPU (prepared, not run).

Builds a random-init GPT-2 classifier of ~1 GB float32 (no download) and scores it as ``sequence_reward`` on
``cuda``:

1. ``torch.cuda.memory_allocated`` before load, awake, asleep with ``cpu`` and with ``drop``;
2. ``cpu`` wake time against the reward's bytes / the pinned host-to-device bandwidth measured in the same run
   (goal <= 1.3x); ``drop`` wake time against a cold load (goal <= 0.3x);
3. scores awake equal scores after each wake, bit for bit.

Writes ``benchmarks/results/gpu_check_residency.json`` (the machine and GPU named); exits 1 when a check fails.
Run: python scripts/gpu_check_residency.py
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [{"prompt": "the cat sat", "completion": "on the mat and the dog ran"} for _ in range(8)]


def _timed(fn) -> float:
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def _bandwidth(nbytes: int) -> float:
    """Pinned host-to-device bytes per second, best of 3."""
    import torch

    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    return nbytes / min(_timed(lambda: host.to("cuda", non_blocking=True)) for _ in range(3))


def main() -> int:
    import torch
    from transformers import GPT2ForSequenceClassification

    from rewardzoo import RewardLoader, RewardProcessor
    from rewardzoo.testing.text import gpt2_config, word_tokenizer

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 1
    out: dict = {
        "machine": f"{platform.system()} {platform.machine()}, {torch.cuda.get_device_name(0)}",
        "torch": torch.__version__,
    }
    with tempfile.TemporaryDirectory() as root:
        torch.manual_seed(0)
        path = Path(root) / "rm"
        GPT2ForSequenceClassification(gpt2_config(n_embd=2048, n_layer=20, n_head=16, num_labels=1)).save_pretrained(
            path
        )
        word_tokenizer().save_pretrained(path)
        entry = {"name": "rm", "reward_model": "sequence_reward", "model_path": str(path), "device": "cuda"}
        out["allocated_before_load"] = torch.cuda.memory_allocated()
        cold = [_timed(lambda: RewardProcessor([entry], RewardLoader()).close()) for _ in range(2)][-1]
        checks = {}
        for mode in ("cpu", "drop"):
            proc = RewardProcessor([{**entry, "offload": mode}], RewardLoader())
            with proc.awake():
                expected = proc(SAMPLES).rewards["rm"]
                nbytes = proc.loader.residency.weight_bytes(proc.rewards["rm"])
                out["allocated_awake"] = torch.cuda.memory_allocated()
            out[f"allocated_asleep_{mode}"] = torch.cuda.memory_allocated()
            wake = min(_timed(lambda p=proc: (p.sleep(), p.wake())[1]) for _ in range(3))
            checks[f"{mode}_scores_equal"] = proc(SAMPLES).rewards["rm"].tobytes() == expected.tobytes()
            out[f"{mode}_wake_s"] = wake
            proc.close()
        out["weight_bytes"] = nbytes
        out["pinned_h2d_bytes_per_s"] = _bandwidth(nbytes)
        out["cold_load_s"] = cold
        out["cpu_wake_over_bandwidth"] = out["cpu_wake_s"] / (nbytes / out["pinned_h2d_bytes_per_s"])
        out["drop_wake_over_cold_load"] = out["drop_wake_s"] / cold
        checks["cpu_wake_le_1.3x_bandwidth"] = out["cpu_wake_over_bandwidth"] <= 1.3
        checks["drop_wake_le_0.3x_cold"] = out["drop_wake_over_cold_load"] <= 0.3
        checks["asleep_frees_the_weights"] = all(
            out["allocated_awake"] - out[f"allocated_asleep_{m}"] >= 0.9 * nbytes for m in ("cpu", "drop")
        )
    out["checks"] = checks
    out["date"] = time.strftime("%Y-%m-%d")
    (ROOT / "benchmarks" / "results" / "gpu_check_residency.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
