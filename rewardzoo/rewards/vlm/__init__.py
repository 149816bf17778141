"""Vision-language judges: VQAScore, UnifiedReward (pointwise and pairwise), HPSv3, VideoAlign, a generic rubric judge.

Beside them, the VLM stack they alone use: ``backbone`` (the local Qwen-VL / LLaVA-OneVision model, queries,
batches), ``llava_checkpoint`` (original LLaVA-NeXT checkpoints mapped onto transformers' LLaVA-OneVision on
load), ``backend`` (local or OpenAI-compatible, chosen with ``backend:``), ``endpoint`` (the OpenAI-compatible
client, over :mod:`rewardzoo.transport.http`), ``reward_models`` (HPSv3 / VideoAlign checkpoints on the
backbone), ``judging`` (answers parsed into scores, failure policies) and ``pairings`` (which model, template
and decoding each judge's references run, and rewardzoo's defaults and presets: pure data for the cards).
Imports as every reward does (see :mod:`rewardzoo.rewards`).
"""
