"""Which model, template, decoding, image bounds and frame sampling each judge's reference runs together, and
what rewardzoo's default and presets run (pure data; no torch).

``scripts/build_docs.py`` renders each reward's rows into the ``## Reference pairing`` table of its model card;
``tests/vlm/test_vlm_pairings.py`` checks that every ``default`` / ``preset:`` row reproduces a ``reference``
row (the same model and the same template) and that the reward class really runs what its rows say. Imports
nothing of rewardzoo.

One block per reward in :data:`PAIRINGS`, reference rows first.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pairing:
    """One way of running a judge: as a reference runs it (``setting="reference"``), as rewardzoo runs it by
    default (``"default"``), or under a preset (``"preset: NAME"``).

    ``template`` is the template key the reward's options name (or, on a reference row, the key of the
    rewardzoo template that holds the reference's text); ``reference``: on default / preset rows, the
    ``source`` of the reference row they reproduce (None on reference rows; ``"-"`` where no reference
    pairing exists, as for rubric judges with user-given models and templates)."""

    setting: str
    source: str
    model: str
    template: str
    decoding: str
    image_bounds: str
    frames: str = "-"
    reference: str | None = None

    @property
    def preset(self) -> str | None:
        """The preset's name on a ``preset: NAME`` row, else None."""
        return self.setting.partition("preset: ")[2] or None


#: What a model or template cell says when the user must give it (rubric judges).
USER_GIVEN = "user-given (required)"

# ------------------------------------------------------------------------------------------ unified_reward
_UR_QWEN = "UnifiedReward ff6f520 (inference_qwen/image_generation/qwen_point_score_image_generation.py)"
_UR_FLOW_GRPO = ("flow_grpo ac4c86e (flow_grpo/rewards.py `unifiedreward_score_sglang`; README: SGLang "
                 "`--chat-template chatml-llava`)")

UNIFIED_REWARD = (
    Pairing("reference", _UR_QWEN, "CodeGoat24/UnifiedReward-qwen-7b", "qwen_release",
            "`model.generate(max_new_tokens=512)` with the checkpoint's generation config",
            "no resize; qwen-vl-utils `process_vision_info` (3,136 to 12,845,056 pixels), then the processor"),
    Pairing("reference", _UR_FLOW_GRPO, "CodeGoat24/UnifiedReward-7b-v1.5 (LLaVA-OneVision)", "flow_grpo",
            "`temperature=0` (greedy), no `max_tokens` (the server's limit)",
            "resize to 512x512 (PIL bicubic), PNG; the server's LLaVA-OneVision `anyres_max_9` tiling"),
    Pairing("default", "rewardzoo", "CodeGoat24/UnifiedReward-qwen-7b", "qwen_release",
            "greedy, max_new_tokens 512", "no resize; the processor's pixel bounds", reference=_UR_QWEN),
    Pairing("preset: flow_grpo", "rewardzoo", "CodeGoat24/UnifiedReward-7b-v1.5 (LLaVA-OneVision)", "flow_grpo",
            "greedy, max_new_tokens 512", "resize to 512x512 (PIL bicubic); LLaVA-OneVision `anyres_max_9` tiling "
            "(transformers' processor)", reference=_UR_FLOW_GRPO),
)

# ------------------------------------------------------------------------------------------ vlm_judge, video_vlm_judge
_FLOW_FACTORY = "Flow-Factory a0b2bc5 (src/flow_factory/rewards/vllm_evaluate.py `VLMEvaluateRewardModel`)"
_JUDGE_DECODING = ("`parse: yes_no`: one forward pass, P(yes) over the vocabulary (`mode: absolute`) or "
                   "P(yes) / (P(yes) + P(no)) (`mode: relative`); `parse: {regex: ...}`: greedy, max_new_tokens 256")

VLM_JUDGE = (
    Pairing("reference", _FLOW_FACTORY, "Qwen3-VL (the served name it asks for by default)",
            "`EVALUATE_PROMPT` (a fixed quality question, no caption)",
            "1 token, `temperature=0.0`, `top_logprobs` 20: P(Yes) / (P(Yes) + P(No))",
            "image as given, JPEG (PIL's default quality)"),
    Pairing("default", "rewardzoo", USER_GIVEN, USER_GIVEN, _JUDGE_DECODING,
            "image as given; the processor's pixel bounds (endpoint: PNG)", reference="-"),
)

VIDEO_VLM_JUDGE = (
    Pairing("default", "rewardzoo", USER_GIVEN, USER_GIVEN, _JUDGE_DECODING,
            "frames as given; the processor's pixel bounds (endpoint: PNG, one image part per frame)",
            "8 frames at `round(linspace(0, T - 1, 8))`, declared at fps 2.0", reference="-"),
)

# ------------------------------------------------------------------------------------------ hpsv3, videoalign
_HPSV3 = ("HPSv3 72b7eba (hpsv3/inference.py `HPSv3RewardInferencer`; the text: dataset/data_collator_qwen.py "
          "`INSTRUCTION` + `prompt_with_special_token`)")
_HPSV3_BOUNDS = "qwen-vl-utils smart resize to min = max = 256 * 28 * 28 pixels (PIL bicubic), then the processor"

HPSV3 = (
    Pairing("reference", _HPSV3, "MizzenAI/HPSv3 (HPSv3.safetensors on Qwen/Qwen2-VL-7B-Instruct)", "hpsv3",
            "no generation: one forward pass, `mu` of the ranknet head (float32) at `<|Reward|>`, positions "
            "`0 .. L-1`", _HPSV3_BOUNDS),
    Pairing("default", "rewardzoo", "MizzenAI/HPSv3 (HPSv3.safetensors on Qwen/Qwen2-VL-7B-Instruct)", "hpsv3",
            "no generation: one forward pass, `mu` of the head (float32) at `<|Reward|>`, positions `0 .. L-1`; "
            "sdpa", _HPSV3_BOUNDS, reference=_HPSV3),
)

_VIDEOALIGN = ("VideoAlign 1140ffd (inference.py `VideoVLMRewardInference`; the text: prompt_template.py "
               "`DETAILED_PROMPT_WITH_SPECIAL_TOKEN`)")
_VIDEOALIGN_BOUNDS = ("frames resized by qwen-vl-utils to 100,352 .. `max_frame_pixels` (200,704) pixels, "
                      "torchvision bicubic with antialias")

VIDEOALIGN = (
    Pairing("reference", _VIDEOALIGN, "KwaiVGI/VideoReward (checkpoint-<step>/model.pth on Qwen/Qwen2-VL-2B-Instruct)",
            "detailed_special",
            "no generation: one forward pass in bf16, LoRA unmerged (PEFT), `rm_head` in bf16 at the three "
            "reward tokens, flash-attention 2; `(x - mean) / std` per dimension, summed",
            _VIDEOALIGN_BOUNDS,
            "qwen-vl-utils: `fps` 2 of the file's frame rate (even count, 4 .. 768), `round(linspace)` indices"),
    Pairing("default", "rewardzoo", "KwaiVGI/VideoReward (checkpoint-<step>/model.pth on Qwen/Qwen2-VL-2B-Instruct)",
            "detailed_special",
            "no generation: one forward pass (bf16 on CUDA), LoRA merged (`merge_lora: false`: unmerged under "
            "PEFT), head in float32 (`head_dtype`), sdpa; `(x - mean) / std` per dimension, summed",
            _VIDEOALIGN_BOUNDS,
            "qwen-vl-utils' rule: `fps` 2 of `source_fps` (required: decoded frames carry no rate), "
            "`round(linspace)` indices", reference=_VIDEOALIGN),
)

#: Reward name -> its rows (reference rows first).
PAIRINGS: dict[str, tuple[Pairing, ...]] = {
    "unified_reward": UNIFIED_REWARD,
    "vlm_judge": VLM_JUDGE,
    "video_vlm_judge": VIDEO_VLM_JUDGE,
    "hpsv3": HPSV3,
    "videoalign": VIDEOALIGN,
}


def model_id(cell: str) -> str:
    """The model id of a model cell (what precedes a parenthesised note)."""
    return cell.split(" (", 1)[0]


__all__ = ["PAIRINGS", "Pairing", "USER_GIVEN", "model_id"]
