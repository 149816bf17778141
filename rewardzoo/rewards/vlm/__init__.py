"""Vision-language judges: VQAScore, UnifiedReward (pointwise and pairwise), HPSv3, VideoAlign, a generic rubric judge."""
