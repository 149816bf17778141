"""Submit / collect against a direct call: what a ticket costs per request.

One server (``rewardzoo serve`` on this machine, ``jpeg_compressibility``, no model) and one client. Each side sends
the same requests one after the other, each of 8 images 64x64: ``direct`` (``client.score``: one ``POST /v1/score``)
and ``submit`` (``client.submit(...).result()``: ``POST /v1/jobs``, a long poll ``GET /v1/jobs/{id}?wait=``, and the
ticket's ``DELETE`` after the result is set). Sides interleaved round-robin (``timing.interleaved``); the figure is
the added time per request (submit - direct, median over repetitions) and the ratio. Scores are checked equal first.
Goal: submit / collect adds <= 2 ms per request over a direct call.

Run: ``python benchmarks/bench_serve_jobs.py [--requests 40] [--repeats 7]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_serve import Server
from results_io import figure, measure, print_figures, write_results
from timing import interleaved_runs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from rewardzoo import Sample
    from rewardzoo.serve import RewardClient

    rng = np.random.default_rng(0)
    samples = [Sample(image=rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), prompt="a cat") for _ in range(8)]
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "jpeg.yaml"
        config.write_text("rewards:\n  - jpeg_compressibility\n")
        server = Server(config, "--max-wait-ms", "0")
        try:
            with RewardClient(server.url) as client:
                direct_scores = client.score(samples).total
                np.testing.assert_array_equal(client.submit(samples).result(timeout=60).total, direct_scores)

                def direct() -> None:
                    for _ in range(args.requests):
                        client.score(samples)

                def submit() -> None:
                    for _ in range(args.requests):
                        client.submit(samples).result(timeout=60)

                times = interleaved_runs({"direct": direct, "submit": submit}, args.repeats)
        finally:
            server.stop()
    per_request = {k: np.median(v) / args.requests * 1000 for k, v in times.items()}
    added = float(np.median([(s - d) / args.requests * 1000 for s, d in zip(times["submit"], times["direct"])]))
    ratio = float(np.median([s / d for s, d in zip(times["submit"], times["direct"])]))
    load = os.getloadavg()[0]
    title = "one request of 8 images 64x64 (jpeg_compressibility, no model) to a server on this machine"
    figures = [
        figure(
            "serve.jobs.added_per_request",
            f"{title}: submit / collect (POST /v1/jobs, long-poll GET, DELETE) vs a direct POST /v1/score",
            measure("submit / collect", per_request["submit"], "ms"),
            baseline=measure("direct call", per_request["direct"], "ms"),
            ratio=ratio,
            ratio_label="submit/direct",
            goal="<= 2 ms added per request",
            notes=f"added per request: {added:.2f} ms (median over repetitions of the paired difference); "
            f"1-minute load average {load:.1f} on {os.cpu_count()} cores",
        ),
    ]
    print_figures(figures)
    print(f"added per request: {added:.2f} ms")
    write_results(__file__, figures)


if __name__ == "__main__":
    main()
