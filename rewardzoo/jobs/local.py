"""The local run of a score job: its chunks through one processor in this process, the records written."""

from __future__ import annotations

import sys

from ..errors import RewardZooError
from .description import ScoreJob
from .output import write_jsonl
from .plan import ScoreRun, plan_job


def run_local(job: ScoreJob) -> ScoreRun:
    """Plan ``job``, score its chunks (a progress line on a terminal unless ``quiet``) and write ``job.out``
    (JSONL, one line per input row). An error about samples names their lines."""
    from ..core.processor import RewardProcessor

    plan = plan_job(job)
    rows = plan.rows
    processor = RewardProcessor(plan.specs)
    records: list = [None] * len(rows.samples)
    show = not job.quiet and sys.stderr.isatty()
    done = 0
    for chunk in plan.chunks:
        try:
            result = processor([rows.samples[i] for i in chunk])
        except RewardZooError as exc:
            if not exc.samples:
                raise
            raise RewardZooError(exc.with_label(lambda i, chunk=chunk: rows.label(chunk[i]))) from exc
        for i, record in zip(chunk, result.records()):
            records[i] = record
        done += len(chunk)
        if show:
            print(f"\rscored {done}/{len(rows.samples)} samples", end="", file=sys.stderr, flush=True)
    if show:
        print(file=sys.stderr)
    write_jsonl(plan.out, records)
    return ScoreRun(plan, records)
