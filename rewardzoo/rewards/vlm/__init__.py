"""Vision-language judges: VQAScore, UnifiedReward (pointwise and pairwise), HPSv3, VideoAlign, a generic rubric judge.

Beside them ``prompts`` (the reference judges' templates) and ``pairings`` (which model, template and decoding each
judge's references run, and rewardzoo's defaults and presets: pure data for the cards). The VLM runtime they run on
(backbone, backends, endpoint, judging, reward-model heads) is the floor's :mod:`rewardzoo.rewards.models.vlm`.
Imports as every family does (see :mod:`rewardzoo.rewards`).
"""
