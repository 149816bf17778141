"""utmos benchmark: clips batched by length against one clip at a time, on the same model.

The model is utmos-pytorch's ``UTMOSModel`` at its published size (wav2vec 2.0 base, random init: speed does
not depend on the weight values), saved with ``torch.save`` and loaded through ``model_path``. Workload: 8
clips of 3 s at 16 kHz in two lengths (4 x 3.0 s, 4 x 2.5 s), as a TTS batch of a few utterance lengths.
Baseline: utmos-pytorch's own ``UTMOSScoreTorch.score`` one clip at a time (batch size 1, as its authors
advise). Contestant: one ``utmos`` call (two batches of 4, one per length). Also reported: the largest
score difference.

Run: ``python benchmarks/bench_utmos.py [--quick]`` (about 1 minute on the shared 2-core CPU machine).
Ratios > 1 mean rewardzoo is faster.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
from results_io import figure, measure, write_results
from timing import interleaved

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LENGTHS = [48000] * 4 + [40000] * 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch
    from utmos_pytorch.utmos_torch import UTMOSModel, UTMOSScoreTorch

    from rewardzoo import load_reward

    repeats = 2 if args.quick else 3
    torch.set_num_threads(2)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    clips = [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in LENGTHS]
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "utmos_random.pt")
        torch.save(UTMOSModel().state_dict(), path)
        ref = UTMOSScoreTorch(ckpt_path=path)
        reward = load_reward({"name": "utmos", "model_path": path, "kwargs": {"max_batch": 8}})

    def one_at_a_time() -> list[float]:
        return [float(ref.score(torch.from_numpy(c))[0]) for c in clips]

    def ours() -> list[float]:
        return list(reward(audio=clips, audio_sample_rate=[16000] * len(clips)).rewards)

    base_scores, got = one_at_a_time(), ours()
    diff = float(np.max(np.abs(np.asarray(got) - np.asarray(base_scores))))
    times, _ = interleaved({"one clip at a time": one_at_a_time, "rewardzoo": ours}, repeats)
    base, mine = times["one clip at a time"], times["rewardzoo"]
    seconds = sum(LENGTHS) / 16000
    print(
        f"utmos, {len(clips)} clips: one at a time {base:.2f} s | batched by length {mine:.2f} s | "
        f"{base / mine:.2f}x; max |score difference| {diff:.2e}"
    )
    workload = (
        f"{len(clips)} clips (4 x 3.0 s, 4 x 2.5 s) at 16 kHz, utmos-pytorch UTMOSModel at its published size "
        "(random init), CPU, 2 torch threads"
    )
    figs = [
        figure(
            "utmos.batched_by_length",
            f"`utmos` (clips of one length batched) vs utmos-pytorch's `score` one clip at a time on the same "
            f"model; {workload}, median of {repeats} interleaved repetitions",
            measure("rewardzoo", seconds / mine, "audio s/s"),
            baseline=measure("one clip at a time", seconds / base, "audio s/s"),
            ratio=base / mine,
            ratio_label="x faster",
            rewards=["utmos"],
        ),
        figure(
            "utmos.agreement",
            f"`utmos` batched vs one clip at a time: max |score difference| (mean score "
            f"{float(np.mean(base_scores)):.3f}); {workload}",
            measure("difference", diff, ""),
            rewards=["utmos"],
        ),
    ]
    write_results(__file__, figs)


if __name__ == "__main__":
    main()
