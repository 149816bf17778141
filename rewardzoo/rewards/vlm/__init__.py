"""Vision-language judges: VQAScore, UnifiedReward (pointwise and pairwise), HPSv3, VideoAlign, a generic rubric judge.

Beside them, the Qwen-VL stack they alone use: ``backbone`` (the local Qwen-VL model, queries, batches),
``backend`` (local or OpenAI-compatible, chosen with ``backend:``), ``endpoint`` (the OpenAI-compatible client,
over :mod:`rewardzoo.transport.http`), ``reward_models`` (HPSv3 / VideoAlign checkpoints on the backbone) and
``judging`` (answers parsed into scores, failure policies). Imports as every reward does (see
:mod:`rewardzoo.rewards`).
"""
