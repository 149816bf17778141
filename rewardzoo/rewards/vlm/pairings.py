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

# ------------------------------------------------------------------------------------------ unified_reward_2
_UR2 = ("UnifiedReward ff6f520 (inference_qwen/UnifiedReward-2.0-inference/point_score_ACS_image_generation.py, "
        "vllm_server.sh, vllm_qwen/vllm_request.py)")
_UR2_PREF_GRPO = ("Pref-GRPO 3e787f6 (fastvideo/rewards/dispatcher.py `unifiedreward`, "
                  "fastvideo/rewards/unifiedreward.py, vllm_utils/vllm_server_UnifiedReward.sh, "
                  "vllm_utils/vllm_request.py)")
_UR2_REQUEST = ("request `{\"do_sample\": False, \"max_tokens\": 4096}`: vLLM does not read `do_sample`, so the "
                "server's default sampling (the checkpoint's generation config)")
_UR2_SERVED = "JPEG quality 95 data URL, no resize; the vLLM server's Qwen3-VL processing"

UNIFIED_REWARD_2 = (
    Pairing("reference", _UR2, "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b (Qwen3-VL)", "unified_reward_2",
            _UR2_REQUEST + "; prints the text (no parse)", _UR2_SERVED),
    Pairing("reference", _UR2_PREF_GRPO, "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b (Qwen3-VL)", "unified_reward_2",
            _UR2_REQUEST + "; the three numbers by `(\\w+) Score \\(1-5\\):`, a missing one the batch mean, "
            "weighted per dimension", _UR2_SERVED),
    Pairing("default", "rewardzoo", "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b (Qwen3-VL)", "unified_reward_2",
            "greedy, max_new_tokens 512; Pref-GRPO's parse, a missing dimension unparseable; weights 1, 1, 1 / 5",
            "no resize; the processor's pixel bounds (endpoint: PNG, or JPEG 95 with `image_format: jpeg`)",
            reference=_UR2_PREF_GRPO),
)

# ------------------------------------------------------------------------------------------ tifa_vqa
_SOFT_TIFA = "GenEval2 a6e82d2 (evaluation.py `soft_tifa`)"

TIFA_VQA = (
    Pairing("reference", _SOFT_TIFA, "Qwen/Qwen3-VL-8B-Instruct", "geneval2",
            "`generate(max_new_tokens=1, do_sample=False, output_scores=True)` per question: softmax of the first "
            "step's scores, summed over the answer variants' first tokens; mean (AM) or geometric mean (GM)",
            "the image file through the processor's chat template; its default pixel bounds, `dtype=\"auto\"`"),
    Pairing("default", "rewardzoo", "Qwen/Qwen3-VL-8B-Instruct", "geneval2",
            "one left-padded forward pass over a call's (image, question) pairs: softmax at the first answer "
            "position, summed over the variants' first tokens; `aggregate: mean` (AM) or `geometric` (GM)",
            "image as given; the processor's pixel bounds", reference=_SOFT_TIFA),
)

#: Reward name -> its rows (reference rows first).
PAIRINGS: dict[str, tuple[Pairing, ...]] = {
    "unified_reward": UNIFIED_REWARD,
    "vlm_judge": VLM_JUDGE,
    "video_vlm_judge": VIDEO_VLM_JUDGE,
    "unified_reward_2": UNIFIED_REWARD_2,
    "tifa_vqa": TIFA_VQA,
}


def model_id(cell: str) -> str:
    """The model id of a model cell (what precedes a parenthesised note)."""
    return cell.split(" (", 1)[0]


__all__ = ["PAIRINGS", "Pairing", "USER_GIVEN", "model_id"]
