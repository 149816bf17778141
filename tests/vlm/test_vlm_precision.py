"""``dtype: auto`` is the precision each judge's reference runs in (issue 40, item 7). The table is written from
the references, not from the cards; the loader's resolution must give it on CUDA, and float32 on the CPU."""

from __future__ import annotations

import pytest

from rewardzoo.catalog.registry import lookup
from rewardzoo.core.loader import dtype_for
from rewardzoo.spec.config import RewardSpec

#: reward -> (dtype on CUDA, where the reference sets it).
REFERENCE_PRECISION = {
    "unified_reward_2": (
        "bfloat16",
        "Pref-GRPO 3e787f6 vllm_utils/vllm_server_UnifiedReward.sh: vllm serve, "
        "--dtype auto (the checkpoint's bfloat16)",
    ),
    "video_unified_reward_2": ("bfloat16", "Pref-GRPO 3e787f6 vllm_utils/vllm_server_UnifiedReward.sh (as above)"),
    "tifa_vqa": ("bfloat16", "GenEval2 a6e82d2 evaluation.py 19-25: dtype='auto' on Qwen3-VL-8B-Instruct (bfloat16)"),
    "videoscore2": (
        "float32",
        "VideoScore2 e6abe26 vs2_inference.py: from_pretrained without a dtype, then .to('cuda')",
    ),
}


@pytest.mark.parametrize("name", sorted(REFERENCE_PRECISION))
def test_dtype_auto_resolves_to_the_references_precision(name):
    want, _source = REFERENCE_PRECISION[name]
    spec = RewardSpec(name=name, reward_model=name)
    assert spec.dtype == "auto"
    card = lookup(spec.reward_model)
    assert dtype_for(spec, "cuda:0", card) == want
    assert dtype_for(spec, "cpu", card) == "float32"
