"""The job layer, between the front ends (``cli``, ``serve``, ``ray``) and the engine.

- :mod:`~rewardzoo.jobs.description` — what a job is: :class:`ScoreJob` (``rewardzoo score``) and
  :class:`ServeJob` (``rewardzoo serve``), frozen dataclasses the front ends fill from their options;
- :mod:`~rewardzoo.jobs.inputs` — the rows of a JSONL manifest or a Parquet file with their labels ('line N',
  'row N');
- :mod:`~rewardzoo.jobs.plan` — a score job's planning: the config, the output checks, the rows, the dataset
  checks and the group-preserving chunks;
- :mod:`~rewardzoo.jobs.output` — the one output check and the one atomic writer (JSONL, Parquet, HTML);
- :mod:`~rewardzoo.jobs.partial` — a job's resumable records (``OUT.partial.jsonl``), fingerprinted;
- :mod:`~rewardzoo.jobs.local` — the local run: the planned chunks through one processor, the records written.

Importing the package is light (its names are imported on first use).

This package may import the core (errors, config, engine, processor, manifest, sample, registry, resources) and
``shared``; never ``cli``, ``serve``, ``ray``, ``report`` or ``integrations``, which import it.
"""

from __future__ import annotations

from ..shared.imports import lazy_getattr

_LAZY = {
    "ScoreJob": "rewardzoo.jobs.description", "ServeJob": "rewardzoo.jobs.description",
    "InputRows": "rewardzoo.jobs.inputs", "read_input": "rewardzoo.jobs.inputs",
    "Plan": "rewardzoo.jobs.plan", "ScoreRun": "rewardzoo.jobs.plan", "plan_job": "rewardzoo.jobs.plan",
    "check_datasets": "rewardzoo.jobs.plan", "group_preserving_chunks": "rewardzoo.jobs.plan",
    "run_local": "rewardzoo.jobs.local",
    "PartialFile": "rewardzoo.jobs.partial", "partial_path": "rewardzoo.jobs.partial",
    "check_output": "rewardzoo.jobs.output", "write_atomically": "rewardzoo.jobs.output",
    "write_jsonl": "rewardzoo.jobs.output", "write_scores_parquet": "rewardzoo.jobs.output",
    "write_text": "rewardzoo.jobs.output",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr("rewardzoo.jobs", _LAZY)
