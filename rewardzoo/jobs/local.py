"""The local run of a score job: its chunks through one processor in this process, the records written."""

from __future__ import annotations

import sys

from ..errors import OutputWriteError, RewardZooError
from .description import ScoreJob
from .output import write_scores
from .partial import PartialFile, fingerprint, kept_note, partial_path
from .plan import ScoreRun, plan_job
from .records import output_rows, score_records


def run_local(job: ScoreJob) -> ScoreRun:
    """Plan ``job``, score its chunks (a progress line on a terminal unless ``quiet``) and write ``job.out``
    (JSONL, one line per input row, or Parquet for a ``.parquet`` path; rows as :mod:`~rewardzoo.jobs.records`
    says). An error about samples names their lines."""
    from ..core.processor import RewardProcessor

    plan = plan_job(job)
    rows, n = plan.rows, len(plan.rows.samples)
    partial = PartialFile(partial_path(plan.out), fingerprint(job.input, plan.specs, job.split), n, rows, plan.specs)
    kept = partial.resume() if job.resume else {}
    chunks = [c for c in plan.chunks if not all(i in kept for i in c)]
    processor = RewardProcessor(plan.specs)
    records: list = [kept.get(i) for i in range(n)]
    show = not job.quiet and sys.stderr.isatty()
    done = n - sum(len(c) for c in chunks)
    try:
        for chunk in chunks:
            partial.before_scoring(chunk)
            try:
                result = processor([rows.samples[i] for i in chunk])
            except RewardZooError as exc:
                if not exc.samples:
                    raise
                labels = [rows.label(i) for i in chunk]  # the chunk's samples, by position
                raise RewardZooError(exc.with_label(labels.__getitem__)) from exc
            scored = score_records(result)
            partial.add(chunk, scored, resumed=job.resume)
            for i, record in zip(chunk, scored):
                records[i] = record
            done += len(chunk)
            if show:
                print(f"\rscored {done}/{n} samples", end="", file=sys.stderr, flush=True)
        if show:
            print(file=sys.stderr)
        written = output_rows(rows, records, extras=job.extras)
        write_scores(plan.out, written, [s.name for s in plan.specs])
    except OutputWriteError as exc:
        raise kept_note(exc, partial, done) from None
    except RewardZooError as exc:
        raise kept_note(exc, partial, done) from exc
    finally:
        processor.close()
        partial.close()
    partial.finish()
    return ScoreRun(plan, written)
