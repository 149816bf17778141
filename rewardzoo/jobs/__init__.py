"""A scoring job, between the front doors (``cli``, ``serve``, ``ray``, ``report``) and the core.

- ``description`` — :class:`ScoreJob` / :class:`ServeJob`, what a job is; ``manifest`` — the JSONL manifest
  reader; ``inputs`` — a manifest's or Parquet file's rows with their labels ('line N', 'row N');
- ``plan`` — the config, output and dataset checks and the group-preserving chunks; ``output`` — the one output
  check and atomic writer; ``partial`` — a job's fingerprinted resumable records;
  ``records`` — a job's records (scores and extras) and output rows (joined to the input by ``id``);
  ``local`` — the local run; ``compare_reference`` — rewardzoo against a reference; ``demo`` — the demo's
  generated media, shared by the front doors; ``fetch`` — ``rewardzoo fetch``: the weight files a config loads,
  downloaded, verified and locked.

May import :mod:`rewardzoo.monitor`, :mod:`rewardzoo.core` and every layer below; never a front door. Importing
the package is light (its names are imported on first use).
"""

from __future__ import annotations

from ..shared.imports import lazy_getattr

_LAZY = {
    "ScoreJob": "rewardzoo.jobs.description",
    "ServeJob": "rewardzoo.jobs.description",
    "InputRows": "rewardzoo.jobs.inputs",
    "read_input": "rewardzoo.jobs.inputs",
    "Plan": "rewardzoo.jobs.plan",
    "ScoreRun": "rewardzoo.jobs.plan",
    "plan_job": "rewardzoo.jobs.plan",
    "check_datasets": "rewardzoo.jobs.plan",
    "group_preserving_chunks": "rewardzoo.jobs.plan",
    "run_local": "rewardzoo.jobs.local",
    "PartialFile": "rewardzoo.jobs.partial",
    "partial_path": "rewardzoo.jobs.partial",
    "check_output": "rewardzoo.jobs.output",
    "write_atomically": "rewardzoo.jobs.output",
    "write_jsonl": "rewardzoo.jobs.output",
    "write_scores_parquet": "rewardzoo.jobs.output",
    "write_scores": "rewardzoo.jobs.output",
    "score_records": "rewardzoo.jobs.records",
    "output_rows": "rewardzoo.jobs.records",
    "write_text": "rewardzoo.jobs.output",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr("rewardzoo.jobs", _LAZY)
