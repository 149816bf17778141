"""unified_reward_think's two Pref-GRPO pairings against Pref-GRPO's own code path, re-computed here step by step.

- the four templates, string for string with Pref-GRPO's source (quoted below with repository, commit and file);
- the request each preset sends (the body of ``vllm_utils/vllm_request.py`` ``process_item`` with the messages of
  ``build_messages``: JPEG quality 95 data URLs, then the filled template), on a recording server;
- the verdicts counted as ``cal_win_rate`` / ``_pairwise_win_rate`` count them, on the same server's answers;
- Pref-GRPO's frame choice ``np.linspace(0, T - 1, K, dtype=int)`` under the presets, rounding by default;
- ``decoding: reference`` on the local backend: vLLM's sampling settings for that request, then transformers'
  ``generate`` called directly with them (same seed, same tokens).
"""

from __future__ import annotations

import base64
import io
import itertools
import json

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor, GenerationConfig

import rewardzoo
from rewardzoo.errors import ConfigError
from rewardzoo.rewards.models.vlm.backbone import VLMQuery, load_vlm
from rewardzoo.rewards.models.vlm.backend import LocalVLM, served_sampling
from rewardzoo.rewards.vlm.unified_reward_think import TEMPLATES
from rewardzoo.shared.video import sample_indices
from rewardzoo.testing import tiny_vlm_dir

from .openai_server import ChatServer
from .test_vlm_judges import pref_grpo_win_rate  # Pref-GRPO's _pairwise_win_rate, re-computed

# --------------------------------------------------------------------------------- Pref-GRPO's source, quoted
# The trailing spaces inside the two long templates are part of the reference text.

# CodeGoat24/Pref-GRPO 3e787f6, fastvideo/rewards/templates.py, get_unifiedreward_think_image_template (since 1dc528e)
PREF_GRPO_IMAGE = """You are an objective and precise evaluator for image quality comparison. I will provide you with a text caption and two images generated based on this caption. You must analyze the two images carefully and determine which image is better.

        Evaluation procedure:

        1. The caption for the generated images is: 「{prompt}」. You must evaluate the two images across these core dimensions:
        - Semantic consistency (how closely the image content aligns with the caption)
        - Aesthetics (composition, color usage, artistic expression)
        - Authenticity (realism and attention to detail)

        2. You are also encouraged to add up to two additional evaluation dimensions if they are relevant to the specific caption or images (e.g., creativity, spatial layout, fine-grained detail). If no extra dimensions are relevant, just keep the three core dimensions.

        3. For each evaluation dimension:
        - Provide a score between 1–10 for both Image 1 and Image 2
        - Provide a short rationale for each score (2–5 short sentences)
        - The evaluation must follow exactly this format with line breaks and indentation:
            Dimension name: 
                Image 1 (x/10) - rationale; 
                Image 2 (y/10) - rationale

        4. After evaluating all dimensions, calculate the total score for each image and show the calculation explicitly, following this exact format:
            Total score:
            Image 1: x+x+x=total
            Image 2: y+y+y=total

        5. Wrap all reasoning and scoring strictly within <think> and </think> tags.

        6. After </think>, output the final judgment strictly inside <answer> and </answer> tags, containing only one of:
        - Image 1 is better
        - Image 2 is better

        Constraints:
        - You must strictly follow the line breaks, indentation, and formatting shown in the example below.
        - Do not merge multiple dimensions into one line. Each dimension must follow the 3-line block format shown below.
        - Do not use Markdown formatting, bullet points, bold text, or headings.
        - Do not output explanations outside <think> and <answer>.
        - The <answer> tag must contain only the final string with no extra words.

        Required output format:

        <think>
        1. Semantic consistency: 
            Image 1 (9/10) - ...; 
            Image 2 (7/10) - ...
        2. Aesthetics: 
            Image 1 (8/10) - ...; 
            Image 2 (8/10) - ...
        3. Authenticity: 
            Image 1 (8/10) - ...; 
            Image 2 (5/10) - ...
        [Additional dimension if any]: 
            Image 1 (7/10) - ...; 
            Image 2 (8/10) - ...
        [Additional dimension if any]: 
            Image 1 (6/10) - ...; 
            Image 2 (7/10) - ...
        Total score:
        Image 1: 9+8+8+7+6=38
        Image 2: 7+8+5+8+7=35
        </think>
        <answer>Image 1 is better</answer>

        Note: The example above is only to illustrate the exact format (line breaks, indentation, symbols, and style). Your actual evaluation must follow this format exactly, but be based on the given caption and images.
        """
# CodeGoat24/Pref-GRPO 3e787f6, fastvideo/rewards/templates.py, get_unifiedreward_think_video_template (since 1dc528e)
PREF_GRPO_VIDEO = """You are an objective and precise evaluator for video quality comparison. I will provide you with a text caption and a sequence of consecutive frames extracted from two generated videos based on this caption. The first half of the frames belong to Video 1, and the second half of the frames belong to Video 2. You must analyze these two videos carefully and determine which video is better.

        Instructions (MUST follow strictly):
        1. All reasoning, analysis, explanations, and scores MUST be written strictly inside <think> and </think> tags.
        2. The <think> block must start immediately with the first evaluation dimension. Do NOT include any introduction, notes, or explanations before the first numbered dimension.
        3. After </think>, output the final judgment strictly inside <answer> and </answer> tags, containing only one of:
        - Video 1 is better
        - Video 2 is better
        4. Do NOT output anything outside <think> and <answer>. No extra explanations, notes, or prefaces.

        Evaluation procedure:

        1. The caption for the generated videos is: 「{prompt}」. The provided frames represent two candidate videos:
        - First half: Video 1
        - Second half: Video 2

        2. You must evaluate the two videos across these core dimensions:
        - Semantic consistency (how closely the video content aligns with the caption)
        - Temporal coherence (smoothness and logical flow of motion across frames)
        - Authenticity (realism and attention to detail)

        3. You may also add up to two additional evaluation dimensions if they are clearly relevant (e.g., camera stability, lighting consistency, creativity). If no extra dimensions are relevant, keep only the three core dimensions.

        4. For each evaluation dimension:
        - Provide a score between 1–10 for both Video 1 and Video 2.
        - Provide a short rationale for each score (2–5 short sentences).
        - Each dimension must follow exactly this 3-line block format with numbering, line breaks, and indentation:
            N. Dimension name: 
                Video 1 (x/10) - rationale; 
                Video 2 (y/10) - rationale

        5. After evaluating all dimensions, calculate the total score for each video and show the calculation explicitly, following this exact format:
            Total score:
            Video 1: x+x+x(+...)=total
            Video 2: y+y+y(+...)=total

        6. All reasoning, analysis, scoring, and totals must be written strictly inside <think> and </think> tags. Nothing related to reasoning or scores may appear outside <think>.

        Required output format (follow this exactly, including line breaks and indentation):

        <think>
        1. Semantic consistency: 
            Video 1 (9/10) - ...; 
            Video 2 (7/10) - ...
        2. Temporal coherence: 
            Video 1 (8/10) - ...; 
            Video 2 (6/10) - ...
        3. Authenticity: 
            Video 1 (7/10) - ...; 
            Video 2 (5/10) - ...
        [Additional dimension if any]: 
            Video 1 (8/10) - ...; 
            Video 2 (6/10) - ...
        [Additional dimension if any]: 
            Video 1 (7/10) - ...; 
            Video 2 (7/10) - ...
        Total score:
        Video 1: 9+8+7+8+7=39
        Video 2: 7+6+5+6+7=31
        </think>
        <answer>Video 1 is better</answer>

        Note: The example above is only to illustrate the exact format (numbering, line breaks, indentation, and style). Your actual evaluation must follow this format exactly, but be based on the given caption and the two provided videos (frames divided into two halves).
        """
# CodeGoat24/Pref-GRPO 6d405e8, fastvideo/train_flux_pref_grpo.py, module-level `template` (until 7246966)
PREF_GRPO_QWEN_7B_IMAGE = "Given a caption and two images generated based on this caption, please analyze in detail the two provided images. Evaluate them on various dimensions such as semantic consistency (how closely the image content aligns with the caption), aesthetics (composition, color usage, artistic expression), authenticity (realism and attention to detail), and any other factors you deem relevant. For each evaluation dimension, provide a score between 1-10 for both images (e.g., Image 1: 8/10, Image 2: 6/10) and provide a concise rationale for the score. Calculate the total score for each image by summing all dimension scores. Use a chain-of-thought process to detail your reasoning steps, and enclose all your detailed reasoning within <think> and </think> tags. Then, in the <answer> tag, output exactly one of the following strings: 'Image 1 is better' or 'Image 2 is better' based on the total scores. No additional text is allowed in the <answer> section.\n\nExample output format:\n<think>\n1. Semantic consistency: Image 1 (9/10) - ...; Image 2 (7/10) - ...\n2. Aesthetics: Image 2 (8/10) - ...; Image 1 (8/10) - ...\n3. Authenticity: Image 1 (8/10) - ...; Image 2 (5/10) - ...\n[Additional dimensions if any]: Image 2 (8/10) - ...; Image 1 (6/10) - ...\nTotal score:\nImage 1: 9+8+8+6=31\nImage 2: 7+8+5+8=28\n</think>\n<answer>Image 1 is better</answer>\n**Note: In the example above, scores and the final answer are placeholders meant only to demonstrate the format. Your actual evaluation should be based on the quality of two given images.**\n\nYour task is provided as follows:\nText Caption: [{prompt}]"
# CodeGoat24/Pref-GRPO a1ca93c, fastvideo/train_wan_2_1_pref_grpo.py, module-level `template` (until 7246966)
PREF_GRPO_QWEN_7B_VIDEO = "Given a caption and two videos generated based on this caption, please analyze in detail the two provided videos. Evaluate them on various dimensions such as semantic consistency (how closely the video content aligns with the caption), temporal coherence (smoothness and logical flow of motion across frames), authenticity (realism and attention to detail), and any other factors you deem relevant. For each evaluation dimension, provide a score between 1-10 for both videos (e.g., Video 1: 8/10, Video 2: 6/10) and provide a concise rationale for the score. Calculate the total score for each video by summing all dimension scores. Use a chain-of-thought process to detail your reasoning steps, and enclose all your detailed reasoning within <think> and </think> tags. Then, in the <answer> tag, output exactly one of the following strings: 'Video 1 is better' or 'Video 2 is better' based on the total scores. No additional text is allowed in the <answer> section.\n\nExample output format:\n<think>\n1. Semantic consistency: Video 1 (9/10) - ...; Video 2 (7/10) - ...\n2. Temporal coherence: Video 1 (8/10) - ...; Video 2 (6/10) - ...\n3. Authenticity: Video 1 (7/10) - ...; Video 2 (5/10) - ...\n[Additional dimensions if any]: Video 2 (8/10) - ...; Video 1 (6/10) - ...\nTotal score:\nVideo 1: 9+8+7+6=30\nVideo 2: 7+6+5+8=26\n</think>\n<answer>Video 1 is better</answer>\n**Note: In the example above, scores and the final answer are placeholders meant only to demonstrate the format. Your actual evaluation should be based on the quality of two given videos.**\n\nYour task is provided as follows:\nText Caption: [{prompt}]"


@pytest.mark.parametrize(
    "key,quoted",
    [
        ("pref_grpo", PREF_GRPO_IMAGE),
        ("pref_grpo_video", PREF_GRPO_VIDEO),
        ("pref_grpo_qwen_7b", PREF_GRPO_QWEN_7B_IMAGE),
        ("pref_grpo_qwen_7b_video", PREF_GRPO_QWEN_7B_VIDEO),
    ],
)
def test_each_template_is_pref_grpos_text_and_fills_as_its_str_format(key, quoted):
    assert TEMPLATES[key] == quoted
    from rewardzoo.rewards.models.vlm.common import fill

    prompt = "a {braced} cat 「quoted」"
    assert fill(TEMPLATES[key], prompt) == quoted.format(prompt=prompt)  # Pref-GRPO: template.format(prompt=...)


# --------------------------------------------------------------------------------- Pref-GRPO's request, re-built


def pref_grpo_jpeg(image):
    """``_encode_image`` (vllm_request.py / unifiedreward_think.py): RGB, JPEG quality 95, base64."""
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="JPEG", quality=95)
    return base64.b64encode(buffer.getvalue()).decode("utf-8")


def pref_grpo_body(images, problem, decoding):
    """``process_item``'s payload with ``build_messages``' messages (images, then the text)."""
    content = [
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{pref_grpo_jpeg(im)}"}} for im in images
    ]
    content.append({"type": "text", "text": problem})
    return {"model": "UnifiedReward", "messages": [{"role": "user", "content": content}], **decoding}


def pref_grpo_frames(frames, num_frames=8):
    """``_extract_frames`` on decoded frames: ``min(K, T)`` indices ``np.linspace(0, T - 1, K, dtype=int)``."""
    k = min(num_frames, len(frames))
    return [frames[i] for i in np.linspace(0, len(frames) - 1, k, dtype=int)]


def verdict_of(body):
    """The recording server's answer: the brighter half of the images wins (a judge the test can re-run)."""
    images = [
        Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1])))
        for p in body["messages"][0]["content"]
        if p["type"] == "image_url"
    ]
    label = "Video" if "Video 1" in body["messages"][0]["content"][-1]["text"] else "Image"
    half = len(images) // 2
    first, second = (
        np.mean([np.asarray(im, dtype=np.float64).mean() for im in part]) for part in (images[:half], images[half:])
    )
    return f"<think>...</think><answer>{label} {1 if first > second else 2} is better</answer>"


class RecordingServer(ChatServer):
    """The test suite's chat server, answering with :func:`verdict_of` instead of the tiny model's text."""

    def answer(self, body):
        return {
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": verdict_of(body)}}
            ]
        }


@pytest.fixture(scope="module")
def server(vlm_dir):
    srv = RecordingServer(vlm_dir)
    yield srv
    srv.close()


def bright_images(n, size=(48, 40)):
    rng = np.random.default_rng(3)
    return [Image.fromarray(rng.integers(0, 256 - 40 * (i % 4), (*size, 3), dtype=np.uint8)) for i in range(n)]


def endpoint_reward(server, **kwargs):
    endpoint = {"url": server.url, "model": "UnifiedReward", "max_concurrency": 4}
    return rewardzoo.load_reward(
        {"name": "unified_reward_think", "kwargs": {"backend": "openai", "endpoint": endpoint, **kwargs}}
    )


def recorded(server, since):
    return sorted(json.dumps(b["body"], sort_keys=True) for b in server.bodies[since:])


CASES = [  # preset, media, the request's decoding fields as Pref-GRPO sends them, its template
    ("pref_grpo", "image", {"do_sample": False, "max_tokens": 4096}, PREF_GRPO_IMAGE),
    ("pref_grpo_qwen_7b", "image", {"max_tokens": 2048}, PREF_GRPO_QWEN_7B_IMAGE),
    ("pref_grpo", "video", {"do_sample": False, "max_tokens": 4096}, PREF_GRPO_VIDEO),
    ("pref_grpo_qwen_7b", "video", {"max_tokens": 2048}, PREF_GRPO_QWEN_7B_VIDEO),
]


@pytest.mark.parametrize("preset,media,decoding,template", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_preset_sends_pref_grpos_requests_and_counts_its_verdicts(server, preset, media, decoding, template):
    prompt = "a red car"
    if media == "image":
        items = bright_images(4)
        shown = [[im] for im in items]
    else:  # 10-frame videos, 8 frames each: floor and round differ (index 1, 2, 3 ... of linspace(0, 9, 8))
        frames = bright_images(40, size=(32, 48))
        items = [frames[10 * v : 10 * v + 10] for v in range(4)]
        shown = [pref_grpo_frames(v) for v in items]
    before = len(server.bodies)
    reward = endpoint_reward(server, preset=preset, media=media)
    out = reward(prompt=[prompt] * 4, **{media: items}, group_id=[0] * 4)

    problem = template.format(prompt=prompt)
    pairs = list(itertools.combinations(range(4), 2))  # cal_win_rate_images / _videos
    bodies = [pref_grpo_body(shown[i] + shown[j], problem, decoding) for i, j in pairs]
    assert recorded(server, before) == sorted(json.dumps(b, sort_keys=True) for b in bodies)
    label = "Image" if media == "image" else "Video"
    expected = pref_grpo_win_rate(
        4, [(p, verdict_of(b)) for p, b in zip(pairs, bodies)], f"{label} 1 is better", f"{label} 2 is better"
    )
    np.testing.assert_allclose(out.rewards, expected)
    assert len(set(expected)) > 1  # the verdicts are not all ties


def test_the_default_runs_the_current_pairing_greedily_with_rounded_frame_indices(server):
    reward = endpoint_reward(server, media="video")
    judge = reward.judge
    assert (
        judge.backend.model == "UnifiedReward"
        and type(judge).default_model == "CodeGoat24/UnifiedReward-Think-qwen3vl-8b"
    )
    assert judge.template == PREF_GRPO_VIDEO and judge.max_new_tokens == 4096 and judge.request is None
    assert reward.inputs.num_frames == 8  # the video layer samples: round(linspace), not Pref-GRPO's floor
    frames = bright_images(20, size=(32, 48))
    before = len(server.bodies)
    reward(prompt=["p", "p"], video=[frames[:8], frames[10:18]], group_id=[0, 0])
    (body,) = [json.loads(b) for b in recorded(server, before)]
    assert body["temperature"] == 0 and body["max_tokens"] == 4096 and "do_sample" not in body
    assert len(body["messages"][0]["content"]) == 17  # 8 + 8 frames and the text


def test_decoding_and_max_new_tokens_override_a_presets(server):
    reward = endpoint_reward(server, preset="pref_grpo_qwen_7b", decoding="greedy", max_new_tokens=64)
    before = len(server.bodies)
    reward(prompt=["p", "p"], image=bright_images(2), group_id=[0, 0])
    (body,) = [json.loads(b) for b in recorded(server, before)]
    assert (body["temperature"], body["max_tokens"]) == (0, 64)
    reward = endpoint_reward(server, decoding="reference", max_new_tokens=64)  # the default pairing's request
    assert reward.judge.request == {"do_sample": False, "max_tokens": 64}


@pytest.mark.parametrize("kwargs,match", [({"preset": "pref"}, "preset"), ({"decoding": "sample"}, "decoding")])
def test_bad_preset_or_decoding_names_the_option(server, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        endpoint_reward(server, **kwargs)


@pytest.mark.parametrize("total,k", [(10, 8), (81, 8), (6, 4), (8, 3), (5, 8), (2, 2), (100, 7)])
def test_floored_frame_indices_are_numpys_integer_linspace(total, k):
    expected = np.linspace(0, total - 1, min(k, total), dtype=int).tolist()
    assert sample_indices(total, k, floor=True) == expected
    if total > k:
        assert sample_indices(total, k) == np.rint(np.linspace(0, total - 1, k)).astype(int).tolist()


# ------------------------------------------------------------------------- decoding: reference, locally


def vllm_sampling(generation_config, request):
    """vLLM's reading (``--generation-config auto``): each field from the request, else the checkpoint's
    generation_config.json, else vLLM's default; do_sample is no chat-completions field."""
    own = {k: v for k, v in generation_config.items()}
    defaults = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": None, "repetition_penalty": 1.0}
    return {k: request.get(k, own.get(k, d)) for k, d in defaults.items()}


SAMPLING = {"temperature": 0.7, "top_p": 0.8, "top_k": 5, "repetition_penalty": 1.1}


@pytest.fixture(scope="module")
def sampling_dir(tmp_path_factory):
    path = tiny_vlm_dir(tmp_path_factory.mktemp("think_sampling") / "qwen2_vl", "qwen2_vl", seed=11)
    GenerationConfig(do_sample=True, bos_token_id=0, eos_token_id=2, pad_token_id=0, **SAMPLING).save_pretrained(path)
    return str(path)


@pytest.mark.parametrize(
    "request_fields", [{"do_sample": False, "max_tokens": 6}, {"temperature": 1.3, "max_tokens": 6}]
)
def test_served_sampling_reads_the_request_then_the_checkpoint_then_vllms_defaults(sampling_dir, request_fields):
    config = GenerationConfig.from_pretrained(sampling_dir)
    assert served_sampling(config, request_fields) == vllm_sampling(SAMPLING, request_fields)
    assert served_sampling(GenerationConfig(), {"max_tokens": 1}) == vllm_sampling({}, {})


def test_local_reference_decoding_samples_as_transformers_does_with_vllms_settings(sampling_dir):
    image = bright_images(1)[0]
    text = fill_think("a cat")
    backend = LocalVLM(load_vlm(sampling_dir, cache=False))
    torch.manual_seed(0)
    ours = backend.generate(
        [VLMQuery.of(text, image=image)], max_new_tokens=99, request={"do_sample": False, "max_tokens": 6}
    )

    processor = AutoProcessor.from_pretrained(sampling_dir)
    model = AutoModelForImageTextToText.from_pretrained(sampling_dir).eval()
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    inputs = processor(
        text=[processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)],
        images=[image],
        return_tensors="pt",
    )
    torch.manual_seed(0)
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=6, do_sample=True, **SAMPLING, pad_token_id=0)
    theirs = processor.tokenizer.batch_decode(out[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert ours == [t.strip() for t in theirs]
    torch.manual_seed(1)
    assert backend.generate([VLMQuery.of(text, image=image)], max_new_tokens=6) == backend.generate(
        [VLMQuery.of(text, image=image)], max_new_tokens=6
    )  # greedy stays deterministic


def fill_think(prompt):
    return PREF_GRPO_IMAGE.format(prompt=prompt)


def test_the_default_pairings_model_family_runs_on_the_local_backend(vlm_dirs, images):
    """UnifiedReward-Think-qwen3vl-8b is a Qwen3-VL: the VLM layer runs that family (a tiny build here)."""
    reward = rewardzoo.load_reward(
        {
            "name": "unified_reward_think",
            "model_path": vlm_dirs["qwen3_vl"],
            "kwargs": {"max_new_tokens": 3, "on_failure": {"substitute": 0.5}},
        }
    )
    judge = reward.judge
    assert judge.backend.backbone.model_type == "qwen3_vl"
    out = reward(prompt=["a cat"] * 3, image=images[:3], group_id=[0] * 3)
    np.testing.assert_allclose(out.rewards, [0.5, 0.5, 0.5])  # a random model writes no verdict: substituted
    assert reward.substitutions == 3
    text = judge.backend.backbone.render(judge.queries_of([judge.template], [[images[0], images[1]]])[0])
    assert text.count("<|image_pad|>") == 2 and text.index("<|image_pad|>") < text.index("You are an objective")
