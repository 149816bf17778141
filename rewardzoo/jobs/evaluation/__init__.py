"""``rewardzoo evaluate``: how well rewards agree with human judgements on a preference or rating set.

- ``sets`` — :class:`EvalSet`, a benchmark read into members (the samples scored) and its human judgements;
- ``formats`` — the generic JSONL formats ``pairs``, ``rankings``, ``ratings``; ``layouts`` — the published
  layouts of Pick-a-Pic v2, HPDv2 test and VideoGen-RewardBench; ``genai`` — GenAI-Bench (image, video);
  ``edit`` — GenAI-Bench-Edit and EditReward-Bench (a source image, an instruction, two edits);
- ``metrics`` — a set's scores to each benchmark's metric, interval and per-category rows
  (:mod:`rewardzoo.shared.agreement` holds the statistics); ``run`` — the job: the members written as a
  manifest and scored through the score job (:func:`~rewardzoo.jobs.local.run_local` or the Ray engine).

Part of the job layer (see :mod:`rewardzoo.jobs`): may import :mod:`rewardzoo.core` and every layer below.
"""
