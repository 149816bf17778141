"""One-shot CUDA check that rewards on their own devices overlap inside one processor call, for a session lent a GPU.

Two rewards whose call keeps its device busy for about ``--ms`` milliseconds (``torch.cuda._sleep``, calibrated
first), each recording its wall-clock interval and the CUDA stream it ran on:

- with two or more GPUs: entries on ``cuda:0`` and ``cuda:1``, both ``async_reward: true`` (each on its device's
  side stream, on a thread of its own);
- with one GPU: an ``async_reward: true`` entry on ``cuda:0`` (the device's side stream) and a synchronous one on
  ``cuda:0`` (the caller's current stream): two streams on one GPU.

Checks: the two calls' intervals overlap, they ran on different streams, the scores equal those of the entries
scored one after the other (``score_specs(..., overlap=False)``), and the overlapped call takes clearly less
than the one-by-one call (ratio printed, interleaved runs). Prints one JSON object; exits 1 when a check fails.
Without CUDA (or torch) it prints ``{"skipped": ...}`` and exits 0. ``--cpu-dry-run`` runs the same steps on the
CPU with sleeps instead of kernels (it exercises this script, it checks no GPU).

Run: python scripts/gpu_check_overlap.py [--ms 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rewardzoo.rewards.base import Inputs, PointwiseReward

#: (tag, start, end, stream id) of every call of :class:`Busy`.
CALLS: list[tuple[str, float, float, int]] = []
_LOCK = threading.Lock()


class Busy(PointwiseReward):
    """Keeps its device busy for ``cycles`` GPU cycles (or sleeps ``seconds`` on the CPU); score = its ``value``."""

    inputs = Inputs(("prompt",))

    def __init__(
        self,
        model_path=None,
        device="cpu",
        dtype="float32",
        cycles: int = 0,
        seconds: float = 0.0,
        value: float = 1.0,
        tag: str = "",
    ):
        super().__init__(model_path, device, dtype)
        self.cycles, self.seconds, self.value, self.tag = cycles, seconds, value, tag

    def __call__(self, prompt, **_):
        start = time.perf_counter()
        stream_id = 0
        if str(self.device).startswith("cuda"):
            import torch

            stream = torch.cuda.current_stream(torch.device(self.device))
            stream_id = stream.cuda_stream
            with torch.cuda.device(torch.device(self.device)):
                torch.cuda._sleep(self.cycles)
                out = torch.full((len(prompt),), self.value, device=self.device)
            stream.synchronize()
        else:
            time.sleep(self.seconds)
            out = [self.value] * len(prompt)
        with _LOCK:
            CALLS.append((self.tag, start, time.perf_counter(), stream_id))
        return out


def calibrate(ms: float) -> int:
    """GPU cycles of ``torch.cuda._sleep`` that take about ``ms`` milliseconds on cuda:0."""
    import torch

    cycles = 10_000_000
    for _ in range(3):
        torch.cuda.synchronize()
        start = time.perf_counter()
        torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
        took = (time.perf_counter() - start) * 1e3
        cycles = int(cycles * ms / max(took, 1e-3))
    return cycles


def one_by_one(proc, samples):
    from rewardzoo.core.engine import ConversionCache, ScoreTable, score_specs

    table = ScoreTable(proc.specs, samples, proc.advantage)
    score_specs(proc.specs, proc.rewards, table, ConversionCache(samples), overlap=False)
    return table.result()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ms", type=float, default=200.0, help="milliseconds each reward call keeps its device busy")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu-dry-run", action="store_true", help="run the steps on the CPU (checks no GPU)")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    cuda = torch is not None and torch.cuda.is_available()
    if not cuda and not args.cpu_dry_run:
        print(json.dumps({"skipped": "no CUDA device (torch sees none): nothing to check here"}))
        return 0
    import numpy as np

    import rewardzoo

    out: dict = {"torch": torch.__version__ if torch is not None else None}
    busy = f"{__name__}:Busy"
    if cuda:
        count = torch.cuda.device_count()
        out["devices"] = [torch.cuda.get_device_name(i) for i in range(count)]
        cost = {"cycles": calibrate(args.ms)}
        a_dev, b_dev, b_async = ("cuda:0", "cuda:1", True) if count >= 2 else ("cuda:0", "cuda:0", False)
    else:
        cost = {"seconds": args.ms / 1e3}
        a_dev, b_dev, b_async = "cpu", "cpu", False
    out["mode"] = (
        f"{a_dev} + {b_dev}, both async_reward"
        if b_async
        else f"{a_dev} side stream (async_reward) + {b_dev} current stream (synchronous entry)"
        if cuda
        else "cpu (async_reward, own thread) + cpu (synchronous entry, caller's thread)"
    )
    proc = rewardzoo.RewardProcessor(
        [
            {
                "name": "a",
                "reward_model": busy,
                "device": a_dev,
                "async_reward": True,
                "kwargs": {**cost, "value": 1.0, "tag": "a"},
            },
            {
                "name": "b",
                "reward_model": busy,
                "device": b_dev,
                "async_reward": b_async,
                "kwargs": {**cost, "value": 2.0, "tag": "b"},
            },
        ]
    )
    samples = [rewardzoo.Sample(prompt=f"p{i}") for i in range(4)]
    proc(samples)  # warm-up: streams created, kernels loaded
    CALLS.clear()
    overlapped = proc(samples)
    (a,), (b,) = ([c for c in CALLS if c[0] == t] for t in ("a", "b"))
    out["call_ms"] = {c[0]: round((c[2] - c[1]) * 1e3, 2) for c in (a, b)}
    out["b_starts_after_a_ms"] = round((b[1] - a[1]) * 1e3, 2)
    out["intervals_overlap"] = a[1] < b[2] and b[1] < a[2]
    out["different_streams"] = a[3] != b[3] if cuda else None
    in_turn = one_by_one(proc, samples)
    out["scores_identical"] = all(np.array_equal(overlapped.rewards[n], in_turn.rewards[n]) for n in ("a", "b"))
    times: dict[str, list[float]] = {"one by one": [], "overlapped": []}
    for r in range(args.repeats):
        for key in ["one by one", "overlapped"] if r % 2 == 0 else ["overlapped", "one by one"]:
            start = time.perf_counter()
            proc(samples) if key == "overlapped" else one_by_one(proc, samples)
            times[key].append(time.perf_counter() - start)
    out["one_by_one_ms"] = round(statistics.median(times["one by one"]) * 1e3, 2)
    out["overlapped_ms"] = round(statistics.median(times["overlapped"]) * 1e3, 2)
    out["ratio"] = round(statistics.median(o / s for o, s in zip(times["overlapped"], times["one by one"])), 3)
    ok = out["intervals_overlap"] and out["scores_identical"] and out["ratio"] < 0.8
    if cuda:
        ok &= bool(out["different_streams"])
    else:
        out["note"] = "CPU dry run: the script's steps, no GPU checked"
    out["ok"] = bool(ok)
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
