"""unified_reward's two pairings against their references' code paths, re-computed here step by step.

- default: the UnifiedReward-qwen release (``inference_qwen/image_generation/qwen_point_score_image_generation.py``):
  its prompt after the image, the processor's chat template, ``generate``, ``batch_decode``;
- ``preset: flow_grpo``: flow_grpo's ``unifiedreward_score_sglang`` (512x512 resize, PNG, one ``image_url`` part and
  the question, ``temperature=0``, ``Final Score`` / 5) on UnifiedReward-7b-v1.5 (LLaVA-OneVision), whose
  ``<image>`` is where the image goes: locally (LLaVA-NeXT's ``qwen_1_5`` conversation, as UnifiedReward's own
  ``inference_llava`` scripts run the LLaVA models) and through an endpoint that renders as SGLang's
  ``chatml-llava`` template (what flow_grpo launches its server with).
"""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

import rewardzoo
from rewardzoo.rewards.vlm.unified_reward import TEMPLATES

from .openai_server import ChatServer
from .test_vlm_llava import direct, direct_answer, llava_dirs, llava_qwen_prompt  # noqa: F401  (fixtures)

# flow_grpo ac4c86e, flow_grpo/rewards.py, unifiedreward_score_sglang.evaluate_image: the f-string `question`, its
# one field `{prompt}` left as the placeholder (the literal's text as written, cut at its \n escapes).
FLOW_GRPO_QUESTION = (
    "<image>\n"
    "You are given a text caption and a generated image based on that caption. Your task is to evaluate this image based on two key criteria:\n"
    "1. Alignment with the Caption: Assess how well this image aligns with the provided caption. Consider the accuracy of depicted objects, their relationships, and attributes as described in the caption.\n"
    "2. Overall Image Quality: Examine the visual quality of this image, including clarity, detail preservation, color accuracy, and overall aesthetic appeal.\n"
    "Based on the above criteria, assign a score from 1 to 5 after 'Final Score:'.\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)
# UnifiedReward ff6f520, inference_qwen/image_generation/qwen_point_score_image_generation.py: the text part of
# `messages` (an f-string; `{prompt}` left as the placeholder; cut at its \n escapes).
QWEN_RELEASE_TEXT = (
    "You are given a text caption and a generated image based on that caption. Your task is to evaluate this image based on two key criteria:\n"
    "1. Alignment with the Caption: Assess how well this image aligns with the provided caption. Consider the accuracy of depicted objects, their relationships, and attributes as described in the caption.\n"
    "2. Overall Image Quality: Examine the visual quality of this image, including clarity, detail preservation, color accuracy, and overall aesthetic appeal.\n"
    "Extract key elements from the provided text caption, evaluate their presence in the generated image using the format: 'element (type): value' (where value=0 means not generated, and value=1 means generated), and assign a score from 1 to 5 after 'Final Score:'.\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)
PROMPTS = ["a cat on a mat", "a photo of a dog"]
OPTS = {"max_new_tokens": 8, "on_failure": {"substitute": 0.0}}


def flow_grpo_scores(texts):
    """flow_grpo ac4c86e ``_extract_scores`` (first match of its pattern, else 0.0), then ``sc / 5.0``."""
    out = []
    for text in texts:
        match = re.search(r"Final Score:\s*([1-5](?:\.\d+)?)", text)
        out.append((float(match.group(1)) if match else 0.0) / 5.0)
    return out


def test_the_templates_are_the_references_text():
    assert TEMPLATES["flow_grpo"] == FLOW_GRPO_QUESTION
    assert TEMPLATES["qwen_release"] == QWEN_RELEASE_TEXT


def test_the_default_runs_the_qwen_release_script(vlm_dirs):
    """The release script on the tiny Qwen2.5-VL: image then text part, the processor's chat template,
    ``generate``, the new tokens decoded without special tokens. Image sizes are multiples of 28 inside the
    processor's bounds, so qwen-vl-utils' ``process_vision_info`` (its smart resize) leaves them as they are."""
    path = vlm_dirs["qwen2_5_vl"]
    rng = np.random.default_rng(7)
    imgs = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in ((56, 84), (84, 56))]
    reward = rewardzoo.load_reward({"name": "unified_reward", "model_path": path, "kwargs": OPTS})
    out = reward(prompt=PROMPTS, image=imgs)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    processor = AutoProcessor.from_pretrained(path)
    expected = []
    for prompt, img in zip(PROMPTS, imgs):
        messages = [
            {
                "role": "user",
                "content": [
                    {"type": "image", "image": img},
                    {"type": "text", "text": QWEN_RELEASE_TEXT.replace("{prompt}", prompt)},
                ],
            }
        ]
        text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        inputs = processor(text=[text], images=[img], padding=True, return_tensors="pt")
        with torch.no_grad():
            ids = model.generate(**inputs, max_new_tokens=8, do_sample=False)
        trimmed = [o[len(i) :] for i, o in zip(inputs.input_ids, ids)]
        expected.append(
            processor.batch_decode(trimmed, skip_special_tokens=True, clean_up_tokenization_spaces=False)[0].strip()
        )
    assert out.extras["judgement"] == expected
    assert reward.resize is None and reward.backend.backbone.source.endswith("qwen2_5_vl")


def test_preset_flow_grpo_locally_is_flow_grpos_question_with_the_image_at_its_slot(llava_dirs, direct, images):
    reward = rewardzoo.load_reward(
        {"name": "unified_reward", "model_path": llava_dirs["llava"], "kwargs": {"preset": "flow_grpo", **OPTS}}
    )
    out = reward(prompt=PROMPTS, image=images[:2])
    expected = []
    for prompt, img in zip(PROMPTS, images):
        # flow_grpo: Image.fromarray(image).resize((512, 512)); UnifiedReward's inference_llava scripts: the
        # "<image>\n..." question in conv_templates["qwen_1_5"], the image spliced in at <image>
        question = FLOW_GRPO_QUESTION.replace("{prompt}", prompt)
        expected.append(direct_answer(direct, llava_qwen_prompt(question), img.resize((512, 512)), 8)[1])
    assert out.extras["judgement"] == expected
    np.testing.assert_allclose(out.rewards, flow_grpo_scores(expected))


def sglang_chatml_llava(messages):
    """sglang python/sglang/srt/conversation.py @ 008ced5053461a89af231a293a019d2f8648bdad: ``generate_chat_conv``
    with the ``chatml-llava`` template (system "You are a helpful assistant.", roles ``<|im_start|>user`` /
    ``assistant``, sep ``<|im_end|>``, CHATML), then ``get_prompt``. One image: its token is ``"<image>" + "\\n"``
    (the template's name holds no "qwen2"), put where the ``image_url`` part stands; text parts as they are."""
    system, turns = "You are a helpful assistant.", []
    for message in messages:
        if message["role"] == "system":
            system = "".join(p["text"] for p in message["content"])
            continue
        n_images = sum(p["type"] == "image" for p in message["content"])
        image_token = "<image>" if n_images > 1 else "<image>" + "\n"
        turns.append(
            (
                "<|im_start|>user",
                "".join(image_token if p["type"] == "image" else p["text"] for p in message["content"]),
            )
        )
    ret = "<|im_start|>system\n" + system + "<|im_end|>" + "\n"
    for role, text in turns:
        ret += role + "\n" + text + "<|im_end|>" + "\n"
    return ret + "<|im_start|>assistant" + "\n"


def test_preset_flow_grpo_through_an_sglang_chatml_llava_server_matches_the_local_route(llava_dirs, images):
    server = ChatServer(llava_dirs["transformers"], render=sglang_chatml_llava)
    try:
        local = rewardzoo.load_reward(
            {"name": "unified_reward", "model_path": llava_dirs["llava"], "kwargs": {"preset": "flow_grpo", **OPTS}}
        )
        remote = rewardzoo.load_reward(
            {
                "name": "unified_reward",
                "kwargs": {
                    "preset": "flow_grpo",
                    **OPTS,
                    "backend": "openai",
                    "endpoint": {"url": server.url, "model": "UnifiedReward-7b-v1.5", "max_concurrency": 1},
                },
            }
        )
        out_local = local(prompt=PROMPTS, image=images[:2])
        out_remote = remote(prompt=PROMPTS, image=images[:2])
        assert out_remote.extras["judgement"] == out_local.extras["judgement"]
        np.testing.assert_array_equal(out_remote.rewards, out_local.rewards)
        for k, (prompt, img) in enumerate(zip(PROMPTS, images)):
            body = server.bodies[k]["body"]
            assert body["model"] == "UnifiedReward-7b-v1.5" and body["temperature"] == 0
            image_part, text_part = body["messages"][0]["content"]
            question = FLOW_GRPO_QUESTION.replace("{prompt}", prompt)
            # the image part stands where the question's "<image>\n" stood: the server's template writes it back
            assert text_part == {"type": "text", "text": question.removeprefix("<image>\n")}
            sent = Image.open(io.BytesIO(base64.b64decode(image_part["image_url"]["url"].split(",", 1)[1])))
            assert sent.format == "PNG"
            np.testing.assert_array_equal(np.asarray(sent.convert("RGB")), np.asarray(img.resize((512, 512))))
            assert server.prompts[k] == llava_qwen_prompt(question)  # one image, at the slot, as LLaVA was trained
    finally:
        server.close()
