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
_UR_FLOW_GRPO = (
    "flow_grpo ac4c86e (flow_grpo/rewards.py `unifiedreward_score_sglang`; README: SGLang "
    "`--chat-template chatml-llava`)"
)

UNIFIED_REWARD = (
    Pairing(
        "reference",
        _UR_QWEN,
        "CodeGoat24/UnifiedReward-qwen-7b",
        "qwen_release",
        "`model.generate(max_new_tokens=512)` with the checkpoint's generation config",
        "no resize; qwen-vl-utils `process_vision_info` (3,136 to 12,845,056 pixels), then the processor",
    ),
    Pairing(
        "reference",
        _UR_FLOW_GRPO,
        "CodeGoat24/UnifiedReward-7b-v1.5 (LLaVA-OneVision)",
        "flow_grpo",
        "`temperature=0` (greedy), no `max_tokens` (the server's limit)",
        "resize to 512x512 (PIL bicubic), PNG; the server's LLaVA-OneVision `anyres_max_9` tiling",
    ),
    Pairing(
        "default",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-qwen-7b",
        "qwen_release",
        "greedy, max_new_tokens 512",
        "no resize; the processor's pixel bounds",
        reference=_UR_QWEN,
    ),
    Pairing(
        "preset: flow_grpo",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-7b-v1.5 (LLaVA-OneVision)",
        "flow_grpo",
        "greedy, max_new_tokens 512",
        "resize to 512x512 (PIL bicubic); LLaVA-OneVision `anyres_max_9` tiling (transformers' processor)",
        reference=_UR_FLOW_GRPO,
    ),
)

# ------------------------------------------------------------------------------------------ vlm_judge, video_vlm_judge
_FLOW_FACTORY = "Flow-Factory a0b2bc5 (src/flow_factory/rewards/vllm_evaluate.py `VLMEvaluateRewardModel`)"
_JUDGE_DECODING = (
    "`parse: yes_no`: one forward pass, P(yes) over the vocabulary (`mode: absolute`) or "
    "P(yes) / (P(yes) + P(no)) (`mode: relative`); `parse: {regex: ...}`: greedy, max_new_tokens 256"
)

VLM_JUDGE = (
    Pairing(
        "reference",
        _FLOW_FACTORY,
        "Qwen3-VL (the served name it asks for by default)",
        "`EVALUATE_PROMPT` (a fixed quality question, no caption)",
        "1 token, `temperature=0.0`, `top_logprobs` 20: P(Yes) / (P(Yes) + P(No))",
        "image as given, JPEG (PIL's default quality)",
    ),
    Pairing(
        "default",
        "rewardzoo",
        USER_GIVEN,
        USER_GIVEN,
        _JUDGE_DECODING,
        "image as given; the processor's pixel bounds (endpoint: PNG)",
        reference="-",
    ),
)

VIDEO_VLM_JUDGE = (
    Pairing(
        "default",
        "rewardzoo",
        USER_GIVEN,
        USER_GIVEN,
        _JUDGE_DECODING,
        "frames as given; the processor's pixel bounds (endpoint: PNG, one image part per frame)",
        "8 frames at `round(linspace(0, T - 1, 8))`, declared at fps 2.0",
        reference="-",
    ),
)

# ------------------------------------------------------------------------------------ unified_reward_think
_THINK_NOW = (
    "Pref-GRPO 3e787f6 (vllm_utils/vllm_server_UnifiedReward_Think.sh, fastvideo/rewards/templates.py, "
    "vllm_utils/vllm_request.py; model and template since 1dc528e, request since c9b70d0)"
)
_THINK_QWEN_7B = (
    "Pref-GRPO 6d405e8 (fastvideo/train_flux_pref_grpo.py, vllm_utils/vllm_request.py; videos a1ca93c "
    "fastvideo/train_wan_2_1_pref_grpo.py; served until 7246966)"
)
_THINK_SERVED = (
    "JPEG quality 95 data URLs, no resize; the vLLM server's processing (its default pixel bounds for the model)"
)
_THINK_SAMPLED = (
    "`decoding: reference`: the endpoint sends Pref-GRPO's fields as they are; locally, sampled with "
    "the settings vLLM gives that request (the checkpoint's generation config, else temperature 1, "
    "top_p 1, top_k off)"
)
_THINK_FLOOR = (
    "videos (template `{}`): 8 frames at `np.linspace(0, T - 1, 8, dtype=int)` (floored), each sent "
    "as an image, video 1's then video 2's"
)

UNIFIED_REWARD_THINK = (
    Pairing(
        "reference",
        _THINK_NOW,
        "CodeGoat24/UnifiedReward-Think-qwen3vl-8b (Qwen3-VL; vLLM >= 0.11)",
        "pref_grpo",
        'request `{"do_sample": False, "max_tokens": 4096}`: `do_sample` is no '
        "chat-completions field and vLLM ignores it, so the server's default sampling applies (the "
        "checkpoint's generation config, else temperature 1)",
        _THINK_SERVED,
        _THINK_FLOOR.format("pref_grpo_video") + " (OpenCV seeks)",
    ),
    Pairing(
        "reference",
        _THINK_QWEN_7B,
        "CodeGoat24/UnifiedReward-Think-qwen-7b (Qwen2.5-VL)",
        "pref_grpo_qwen_7b",
        'request `{"max_tokens": 2048}` (`do_sample` commented out): the server\'s default sampling',
        _THINK_SERVED,
        _THINK_FLOOR.format("pref_grpo_qwen_7b_video") + " (OpenCV seeks)",
    ),
    Pairing(
        "default",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-Think-qwen3vl-8b (Qwen3-VL)",
        "pref_grpo",
        "greedy (`temperature: 0` on the endpoint, `do_sample=False` locally), max_new_tokens 4096",
        "endpoint: JPEG quality 95 data URLs; local: the processor's pixel bounds (`min_pixels` / `max_pixels`)",
        "videos (template `pref_grpo_video`): 8 frames at `round(linspace(0, T - 1, 8))` (the video layer), "
        "each sent as an image",
        reference=_THINK_NOW,
    ),
    Pairing(
        "preset: pref_grpo",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-Think-qwen3vl-8b (Qwen3-VL)",
        "pref_grpo",
        _THINK_SAMPLED + ", max_tokens 4096 with `do_sample: false`",
        "as the default",
        _THINK_FLOOR.format("pref_grpo_video") + " (from every decoded frame)",
        reference=_THINK_NOW,
    ),
    Pairing(
        "preset: pref_grpo_qwen_7b",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-Think-qwen-7b (Qwen2.5-VL)",
        "pref_grpo_qwen_7b",
        _THINK_SAMPLED + ", max_tokens 2048",
        "as the default",
        _THINK_FLOOR.format("pref_grpo_qwen_7b_video") + " (from every decoded frame)",
        reference=_THINK_QWEN_7B,
    ),
)

# --------------------------------------------------------------------------------- vqascore, video_vqascore
_T2V = "t2v_metrics 6ecb74f (t2v_metrics/models/vqascore_models/qwen2vl_model.py, `qwen2.5-vl-7b`)"
_T2V_SCORES = (
    "`generate(max_new_tokens=1, do_sample=False, temperature=1.0, output_scores=True)` per pair: "
    "softmax of `scores` (the logits after the checkpoint's generation-config processors, e.g. "
    "`repetition_penalty`) at the answer's first token"
)
_RAW = "one batched forward pass: softmax of the raw logits at the answer's first token (no processors)"
_PROCESSED = (
    "softmax of `generate`'s `scores` (the checkpoint's generation-config processors; left padding is "
    "ignored by them), one batched call"
)

VQASCORE = (
    Pairing(
        "reference",
        _T2V,
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "t2v_metrics",
        _T2V_SCORES,
        "qwen-vl-utils `fetch_image`: 3,136 to 12,845,056 pixels (4 to 16384 tokens of 28x28), PIL bicubic, "
        "then the processor with `do_resize=False`",
    ),
    Pairing(
        "default",
        "rewardzoo",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "t2v_metrics",
        _RAW,
        "the processor's resize with `max_pixels` 12,845,056 (min: the processor's)",
        reference=_T2V,
    ),
    Pairing(
        "preset: t2v_metrics",
        "rewardzoo",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "t2v_metrics",
        _PROCESSED,
        "qwen-vl-utils' resize (PIL bicubic, 3,136 to 12,845,056 pixels), then the processor with `do_resize=False`",
        reference=_T2V,
    ),
)

_T2V_VIDEO = "t2v_metrics 6ecb74f (qwen2vl_model.py `load_images`, a video file)"
VIDEO_VQASCORE = (
    Pairing(
        "reference",
        _T2V_VIDEO,
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "t2v_metrics",
        _T2V_SCORES,
        "qwen-vl-utils `fetch_video`: at most 151,200 pixels per frame (`max_pixels: 360*420`), at least "
        "100,352, torchvision bicubic with antialias",
        "read by time: `fps: 8` (duration x 8 frames, even, 4 to 768), one video",
    ),
    Pairing(
        "default",
        "rewardzoo",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "t2v_metrics",
        _RAW,
        "the processor's resize with `max_pixels` 151,200 per frame (min: the processor's)",
        "by count: 8 frames at `round(linspace(0, T - 1, 8))`, declared at 8 fps, one video",
        reference=_T2V_VIDEO,
    ),
    Pairing(
        "preset: t2v_metrics",
        "rewardzoo",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "t2v_metrics",
        _PROCESSED,
        "as the default",
        "as the default (by count, not by time)",
        reference=_T2V_VIDEO,
    ),
)

# ------------------------------------------------------------------------------------------ hpsv3, videoalign
_HPSV3 = (
    "HPSv3 72b7eba (hpsv3/inference.py `HPSv3RewardInferencer`; the text: dataset/data_collator_qwen.py "
    "`INSTRUCTION` + `prompt_with_special_token`)"
)
_HPSV3_BOUNDS = "qwen-vl-utils smart resize to min = max = 256 * 28 * 28 pixels (PIL bicubic), then the processor"

HPSV3 = (
    Pairing(
        "reference",
        _HPSV3,
        "MizzenAI/HPSv3 (HPSv3.safetensors on Qwen/Qwen2-VL-7B-Instruct)",
        "hpsv3",
        "no generation: one forward pass, `mu` of the ranknet head (float32) at `<|Reward|>`, positions `0 .. L-1`",
        _HPSV3_BOUNDS,
    ),
    Pairing(
        "default",
        "rewardzoo",
        "MizzenAI/HPSv3 (HPSv3.safetensors on Qwen/Qwen2-VL-7B-Instruct)",
        "hpsv3",
        "no generation: one forward pass, `mu` of the head (float32) at `<|Reward|>`, positions `0 .. L-1`; sdpa",
        _HPSV3_BOUNDS,
        reference=_HPSV3,
    ),
)

_VIDEOALIGN = (
    "VideoAlign 1140ffd (inference.py `VideoVLMRewardInference`; the text: prompt_template.py "
    "`DETAILED_PROMPT_WITH_SPECIAL_TOKEN`)"
)
_VIDEOALIGN_BOUNDS = (
    "frames resized by qwen-vl-utils to 100,352 .. `max_frame_pixels` (200,704) pixels, "
    "torchvision bicubic with antialias"
)

VIDEOALIGN = (
    Pairing(
        "reference",
        _VIDEOALIGN,
        "KwaiVGI/VideoReward (checkpoint-<step>/model.pth on Qwen/Qwen2-VL-2B-Instruct)",
        "detailed_special",
        "no generation: one forward pass in bf16, LoRA unmerged (PEFT), `rm_head` in bf16 at the three "
        "reward tokens, flash-attention 2; `(x - mean) / std` per dimension, summed",
        _VIDEOALIGN_BOUNDS,
        "qwen-vl-utils: `fps` 2 of the file's frame rate (even count, 4 .. 768), `round(linspace)` indices",
    ),
    Pairing(
        "default",
        "rewardzoo",
        "KwaiVGI/VideoReward (checkpoint-<step>/model.pth on Qwen/Qwen2-VL-2B-Instruct)",
        "detailed_special",
        "no generation: one forward pass (bf16 on CUDA), LoRA merged (`merge_lora: false`: unmerged under "
        "PEFT), head in float32 (`head_dtype`), sdpa; `(x - mean) / std` per dimension, summed",
        _VIDEOALIGN_BOUNDS,
        "qwen-vl-utils' rule: `fps` 2 of `source_fps` (required: decoded frames carry no rate), "
        "`round(linspace)` indices",
        reference=_VIDEOALIGN,
    ),
)

# ------------------------------------------------------------------------------------------ unified_reward_2
_UR2 = (
    "UnifiedReward ff6f520 (inference_qwen/UnifiedReward-2.0-inference/point_score_ACS_image_generation.py, "
    "vllm_server.sh, vllm_qwen/vllm_request.py)"
)
_UR2_PREF_GRPO = (
    "Pref-GRPO 3e787f6 (fastvideo/rewards/dispatcher.py `unifiedreward`, "
    "fastvideo/rewards/unifiedreward.py, vllm_utils/vllm_server_UnifiedReward.sh, "
    "vllm_utils/vllm_request.py)"
)
_UR2_REQUEST = (
    'request `{"do_sample": False, "max_tokens": 4096}`: vLLM does not read `do_sample`, so the '
    "server's default sampling (the checkpoint's generation config)"
)
_UR2_SERVED = "JPEG quality 95 data URL, no resize; the vLLM server's Qwen3-VL processing"

UNIFIED_REWARD_2 = (
    Pairing(
        "reference",
        _UR2,
        "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b (Qwen3-VL)",
        "unified_reward_2",
        _UR2_REQUEST + "; prints the text (no parse)",
        _UR2_SERVED,
    ),
    Pairing(
        "reference",
        _UR2_PREF_GRPO,
        "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b (Qwen3-VL)",
        "unified_reward_2",
        _UR2_REQUEST + "; the three numbers by `(\\w+) Score \\(1-5\\):`, a missing one the batch mean, "
        "weighted per dimension",
        _UR2_SERVED,
    ),
    Pairing(
        "default",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b (Qwen3-VL)",
        "unified_reward_2",
        "greedy, max_new_tokens 512; Pref-GRPO's parse, a missing dimension unparseable; weights 1, 1, 1 / 5",
        "no resize; the processor's pixel bounds (endpoint: PNG, or JPEG 95 with `image_format: jpeg`)",
        reference=_UR2_PREF_GRPO,
    ),
    Pairing(
        "preset: pref_grpo",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b (Qwen3-VL)",
        "unified_reward_2",
        "greedy, max_new_tokens 512 (the endpoint: the request you configure); Pref-GRPO's parse, a missing "
        "dimension the call's mean, numbers above 5 kept; streams alignment / coherence / style, each normalised "
        "in its group (unbiased std + 1e-8) and weighted",
        "no resize; the processor's pixel bounds (endpoint: PNG, or JPEG 95 with `image_format: jpeg`)",
        reference=_UR2_PREF_GRPO,
    ),
)

# ------------------------------------------------------------------------------------------ video_unified_reward_2
_UR2_VIDEO = (
    "UnifiedReward ff6f520 (inference_qwen/UnifiedReward-2.0-inference/point_score_APS_video_generation.py, "
    "vllm_server.sh, vllm_qwen/vllm_request.py)"
)
_UR2_STRIDE = "16 at `int(i * T / 16)` (cv2, sequential read), each an image before the text"

VIDEO_UNIFIED_REWARD_2 = (
    Pairing(
        "reference",
        _UR2_VIDEO,
        "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b (Qwen3-VL)",
        "unified_reward_2_video",
        _UR2_REQUEST + "; prints the text (no parse)",
        "each frame a JPEG file (cv2), sent as a JPEG quality 95 data URL, no resize; the vLLM server's "
        "Qwen3-VL processing",
        _UR2_STRIDE,
    ),
    Pairing(
        "default",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-2.0-qwen3vl-8b (Qwen3-VL)",
        "unified_reward_2_video",
        "greedy, max_new_tokens 512; Pref-GRPO's image parse over Alignment / Physics / Style, a missing "
        "dimension unparseable; weights 1, 1, 1 / 5",
        "no resize; the processor's pixel bounds (endpoint: PNG, or JPEG 95 with `image_format: jpeg`)",
        "16 at `int(i * T / 16)` (every frame decoded, the judge picks), each an image before the text; "
        "fewer than 16: an input error",
        reference=_UR2_VIDEO,
    ),
)

# ------------------------------------------------------------------------------------------ tifa_vqa
_SOFT_TIFA = "GenEval2 a6e82d2 (evaluation.py `soft_tifa`)"

TIFA_VQA = (
    Pairing(
        "reference",
        _SOFT_TIFA,
        "Qwen/Qwen3-VL-8B-Instruct",
        "geneval2",
        "`generate(max_new_tokens=1, do_sample=False, output_scores=True)` per question: softmax of the first "
        "step's scores, summed over the answer variants' first tokens; mean (AM) or geometric mean (GM)",
        'the image file through the processor\'s chat template; its default pixel bounds, `dtype="auto"`',
    ),
    Pairing(
        "default",
        "rewardzoo",
        "Qwen/Qwen3-VL-8B-Instruct",
        "geneval2",
        "one left-padded forward pass over a call's (image, question) pairs: softmax at the first answer "
        "position, summed over the variants' first tokens; `aggregate: mean` (AM) or `geometric` (GM)",
        "image as given; the processor's pixel bounds",
        reference=_SOFT_TIFA,
    ),
)

# ------------------------------------------------------------------------------------------ edit_reward
_EDIT_REWARD = (
    "EditReward edb027e (EditReward/inference_edit.py `EditRewardInferencer`, config/EditReward-Qwen2.5-7B-VL.yaml)"
)

EDIT_REWARD = (
    Pairing(
        "reference",
        _EDIT_REWARD,
        "Qwen/Qwen2.5-VL-7B-Instruct (base; the EditReward checkpoint as model_path)",
        "edit_reward",
        "no generation: one forward per dimension, mu at `<|Reward|>`, heads averaged",
        "source and edited: qwen-vl-utils smart resize, min = max = 256 * 28 * 28 pixels (PIL bicubic)",
    ),
    Pairing(
        "default",
        "rewardzoo",
        "Qwen/Qwen2.5-VL-7B-Instruct (base; the EditReward checkpoint as model_path)",
        "edit_reward",
        "no generation: both dimensions in one forward, mu at `<|Reward|>`, heads averaged",
        "source and edited: smart resize, min = max = 256 * 28 * 28 pixels (PIL bicubic)",
        reference=_EDIT_REWARD,
    ),
)

# ------------------------------------------------------------------------------------------ edit_score
_EDITSCORE = "EditScore 6e0f1b9 (editscore/__init__.py `EditScore.evaluate`, README usage; mllm_tools/qwen25vl.py)"
_OMNIGEN2_RL = "EditScore 6e0f1b9 (examples/OmniGen2-RL/reward_server/reward_server.py, `EditScore.batch_evaluate`)"
_EDITSCORE_SAMPLING = "sampling: temperature 0.7, top_p 0.9, top_k 20, seed 42, max 512 tokens, 1 pass"
_EDITSCORE_BOUNDS = "as given; qwen-vl-utils `process_vision_info` defaults (3,136 to 12,845,056 pixels)"

EDIT_SCORE = (
    Pairing(
        "reference",
        _EDITSCORE,
        "EditScore/EditScore-7B (LoRA on Qwen/Qwen2.5-VL-7B-Instruct)",
        "editscore",
        _EDITSCORE_SAMPLING + "; SC on [source, edit], PQ on [edit]",
        _EDITSCORE_BOUNDS,
    ),
    Pairing(
        "reference",
        _OMNIGEN2_RL,
        "EditScore/EditScore-7B (LoRA on Qwen/Qwen2.5-VL-7B-Instruct)",
        "editscore",
        _EDITSCORE_SAMPLING + " (vLLM); PQ on [source, edit]; reward overall / 10",
        _EDITSCORE_BOUNDS,
    ),
    Pairing(
        "default",
        "rewardzoo",
        "EditScore/EditScore-7B (LoRA: serve it, or a merged checkpoint locally)",
        "editscore",
        "greedy, max_new_tokens 512; SC on [source, edit], PQ on [edit]",
        "as given; the processor's pixel bounds (endpoint: PNG)",
        reference=_EDITSCORE,
    ),
    Pairing(
        "preset: omnigen2_rl",
        "rewardzoo",
        "EditScore/EditScore-7B (LoRA: serve it, or a merged checkpoint locally)",
        "editscore",
        "greedy, max_new_tokens 512; PQ on [source, edit]; overall / 10",
        "as given; the processor's pixel bounds (endpoint: PNG)",
        reference=_OMNIGEN2_RL,
    ),
)

# ------------------------------------------------------------------------------------------ unified_reward_edit
_URE_POINT = (
    "UnifiedReward ff6f520 (UnifiedReward-Edit/edit_pointwise_instruction_following.py, "
    "edit_pointwise_quality.py, vllm_server.sh)"
)
_URE_PAIR = "UnifiedReward ff6f520 (UnifiedReward-Edit/edit_paiwise_score.py, vllm_server.sh)"
_URE_PREF_GRPO_POINT = (
    "Pref-GRPO 3e787f6 (fastvideo/rewards/unifiedreward_edit_pointwise.py, dispatcher.py, "
    "vllm_utils/vllm_server_UnifiedReward_Edit.sh)"
)
_URE_PREF_GRPO_PAIR = (
    "Pref-GRPO 3e787f6 (fastvideo/rewards/unifiedreward_edit_pairwise.py, templates.py, "
    "vllm_utils/vllm_server_UnifiedReward_Edit.sh)"
)
_URE_PREF_GRPO_REQUEST = (
    'vllm_utils/vllm_request.py\'s request `{"do_sample": False, "max_tokens": 4096}` (served as `UnifiedReward`): '
    "vLLM does not read `do_sample`, so the server's default sampling (the checkpoint's generation config)"
)
#: What rewardzoo's rows run: greedy locally; through an endpoint, the request its options configure.
_URE_OURS = "greedy, max_new_tokens 4096 (not the release's: vLLM samples there, see the reference row)"
_URE_REQUEST = (
    'request `{"do_sample": False, "max_tokens": 4096}` (vLLM, served as `UnifiedReward`): vLLM does '
    "not read `do_sample`, so the server's default sampling (the checkpoint's generation config)"
)
_URE_BOUNDS = "as given, JPEG quality 95; the server's processor"

UNIFIED_REWARD_EDIT = (
    Pairing(
        "reference",
        _URE_POINT,
        "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b",
        "unified_reward_edit",
        _URE_REQUEST,
        _URE_BOUNDS,
    ),
    Pairing(
        "reference",
        _URE_PREF_GRPO_POINT,
        "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b",
        "unified_reward_edit",
        _URE_PREF_GRPO_REQUEST + "; `score` read as JSON (else [0, 0]), each of the four numbers normalised in "
        "its group, two rewards of two dimensions each",
        _URE_BOUNDS,
    ),
    Pairing(
        "default",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b",
        "unified_reward_edit",
        _URE_OURS + "; EditScore's sqrt(SC * PQ)",
        "as given; endpoint: JPEG quality 95",
        reference=_URE_POINT,
    ),
    Pairing(
        "preset: pref_grpo",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b",
        "unified_reward_edit",
        _URE_OURS + "; Pref-GRPO's reading, streams success / overedit / naturalness / artifacts, weight 1/2 "
        "each, normalised in the group (unbiased std + 1e-8)",
        "as given; endpoint: JPEG quality 95",
        reference=_URE_PREF_GRPO_POINT,
    ),
)
UNIFIED_REWARD_EDIT_PAIRWISE = (
    Pairing(
        "reference",
        _URE_PAIR,
        "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b",
        "pairwise_score",
        _URE_REQUEST + "; the first two `([0-9]+\\.[0-9]+)` (a minus sign dropped)",
        _URE_BOUNDS,
    ),
    Pairing(
        "reference",
        _URE_PREF_GRPO_PAIR,
        "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b",
        "pairwise_rank",
        _URE_PREF_GRPO_REQUEST + '; "Edited image 1/2 is better" in `<answer>`, else in the answer, else a tie',
        _URE_BOUNDS,
    ),
    Pairing(
        "default",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b",
        "pairwise_score",
        _URE_OURS + "; the two scores read with their sign",
        "as given; endpoint: JPEG quality 95",
        reference=_URE_PAIR,
    ),
    Pairing(
        "preset: release",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b",
        "pairwise_score",
        _URE_OURS + "; the release's unsigned reading",
        "as given; endpoint: JPEG quality 95",
        reference=_URE_PAIR,
    ),
    Pairing(
        "preset: pref_grpo",
        "rewardzoo",
        "CodeGoat24/UnifiedReward-Edit-qwen3vl-8b",
        "pairwise_rank",
        _URE_OURS + "; Pref-GRPO's verdicts",
        "as given; endpoint: JPEG quality 95",
        reference=_URE_PREF_GRPO_PAIR,
    ),
)

# ------------------------------------------------------------------------------------------ videoscore2
_VS2 = "VideoScore2 e6abe26 (vs2_inference.py)"

VIDEOSCORE2 = (
    Pairing(
        "reference",
        _VS2,
        "TIGER-Lab/VideoScore2",
        "videoscore2",
        "`generate(do_sample=True, temperature=0.7)`, max_new_tokens 1024, float32 weights; soft scores from "
        "`gen_out.scores` at the score tokens: logits / 0.7 and the checkpoint's generation-config warpers "
        "(top-k, transformers' default 50, top-p, repetition penalty)",
        "qwen-vl-utils `fetch_video` defaults",
        "qwen-vl-utils at `fps` 2.0 from the file (`smart_nframes`)",
    ),
    Pairing(
        "default",
        "rewardzoo",
        "TIGER-Lab/VideoScore2",
        "videoscore2",
        "greedy, max_new_tokens 1024; soft scores by a teacher-forced pass through "
        "`generate(do_sample=True, temperature=0.7)`'s scores (the same logits / 0.7 and warpers)",
        "frames as given; the processor's pixel bounds (endpoint: PNG, one image part per frame)",
        "8 frames at `round(linspace(0, T - 1, 8))`, declared at fps 2.0",
        reference=_VS2,
    ),
)

# ------------------------------------------------------------------------------------------ rational_rewards(_edit)
_RR = "Flow-Factory a0b2bc5 (src/flow_factory/rewards/rational_rewards_{}.py, scripts/start_vllm_rational_reward.sh)"
_RR_REQUEST = (
    "request `temperature: 0.1, max_tokens: 2048` (the reward's defaults), the rest the vLLM server's defaults "
    "(the checkpoint's generation config)"
)
_RR_OURS = (
    "`decoding: reference`: the endpoint sends `temperature: 0.1, max_tokens: 2048` as they are; locally, sampled "
    "with the settings vLLM gives that request (the checkpoint's generation config, else top_p 1, top_k off)"
)
_RR_BOUNDS = "as given, PNG data URLs; the server's processor"
_RR_OUR_BOUNDS = "as given; endpoint: PNG; local: the processor's pixel bounds (`min_pixels` / `max_pixels`)"


def _rational(rubric: str) -> tuple[Pairing, ...]:
    model = f"TIGER-Lab/RationalRewards-8B-{'T2I' if rubric == 't2i' else 'Edit'}"
    source = _RR.format(rubric)
    return (
        Pairing("reference", source, model, f"rational_rewards_{rubric}", _RR_REQUEST, _RR_BOUNDS),
        Pairing(
            "default", "rewardzoo", model, f"rational_rewards_{rubric}", _RR_OURS, _RR_OUR_BOUNDS, reference=source
        ),
    )


RATIONAL_REWARDS = _rational("t2i")
RATIONAL_REWARDS_EDIT = _rational("edit")

#: Reward name -> its rows (reference rows first).
PAIRINGS: dict[str, tuple[Pairing, ...]] = {
    "unified_reward": UNIFIED_REWARD,
    "vlm_judge": VLM_JUDGE,
    "video_vlm_judge": VIDEO_VLM_JUDGE,
    "unified_reward_think": UNIFIED_REWARD_THINK,
    "vqascore": VQASCORE,
    "video_vqascore": VIDEO_VQASCORE,
    "hpsv3": HPSV3,
    "videoalign": VIDEOALIGN,
    "unified_reward_2": UNIFIED_REWARD_2,
    "video_unified_reward_2": VIDEO_UNIFIED_REWARD_2,
    "tifa_vqa": TIFA_VQA,
    "edit_reward": EDIT_REWARD,
    "edit_score": EDIT_SCORE,
    "unified_reward_edit": UNIFIED_REWARD_EDIT,
    "unified_reward_edit_pairwise": UNIFIED_REWARD_EDIT_PAIRWISE,
    "videoscore2": VIDEOSCORE2,
    "rational_rewards": RATIONAL_REWARDS,
    "rational_rewards_edit": RATIONAL_REWARDS_EDIT,
}


def model_id(cell: str) -> str:
    """The model id of a model cell (what precedes a parenthesised note)."""
    return cell.split(" (", 1)[0]


__all__ = ["PAIRINGS", "Pairing", "USER_GIVEN", "model_id"]
