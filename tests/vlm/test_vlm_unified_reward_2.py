"""unified_reward_2 against its references: UnifiedReward-2.0's prompt as written in UnifiedReward and Pref-GRPO,
Pref-GRPO's parse re-computed from its code, the local backend against transformers' own generate on the tiny
Qwen3-VL (the UnifiedReward-2.0-qwen3vl-8b architecture), and the endpoint backend against the test server."""

from __future__ import annotations

import base64
import io
import math
import re

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

import rewardzoo
from rewardzoo.errors import ConfigError, RewardOutputError
from rewardzoo.rewards.vlm.unified_reward_2 import TEMPLATES, parse_dimensions

from .openai_server import ChatServer

# UnifiedReward ff6f520, inference_qwen/UnifiedReward-2.0-inference/point_score_ACS_image_generation.py: `problem`
# (its last line an f-string; `{prompt}` left as the placeholder; cut at its \n escapes). Pref-GRPO 3e787f6,
# fastvideo/rewards/templates.py, get_unifiedreward_image_template() returns the same text.
UR2_PROBLEM = (
    "You are presented with a generated image and its associated text caption. "
    "Your task is to analyze the image across multiple dimensions in relation to the caption. Specifically:\n"
    "Provide overall assessments for the image along the following axes (each rated from 1 to 5):\n"
    "- Alignment Score: How well the image matches the caption in terms of content.\n"
    "- Coherence Score: How logically consistent the image is (absence of visual glitches, object distortions, etc.).\n"
    "- Style Score: How aesthetically appealing the image looks, regardless of caption accuracy.\n\n"
    "Output your evaluation using the format below:\n\n"
    "Alignment Score (1-5): X\n"
    "Coherence Score (1-5): Y\n"
    "Style Score (1-5): Z\n\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)
PROMPTS = ["a cat on a mat", "a photo of a dog"]
OPTS = {"max_new_tokens": 8, "on_failure": {"substitute": 0.0}}


def pref_grpo_dimensions(texts, names=("Alignment", "Coherence", "Style")):
    """Pref-GRPO 3e787f6 ``extract_normalized_rewards``: ``re.findall`` of its pattern, one dict per response (the
    last match of a name wins), the raw numbers per dimension (a missing one is imputed with the batch mean there;
    these texts have all three), keyed by the lower-cased name."""
    pattern = r"(\w+) Score \(1-5\):\s*([0-5](?:\.\d+)?)"
    out = []
    for text in texts:
        scores = {key: float(value) for key, value in re.findall(pattern, text)}
        out.append({name.lower(): scores[name] for name in names})
    return out


JUDGEMENTS = [
    "Alignment Score (1-5): 4\nCoherence Score (1-5): 3.5\nStyle Score (1-5): 5",
    "Alignment Score (1-5): 2.694700002670288\nCoherence Score (1-5): 2.371500015258789\n"
    "Style Score (1-5): 2.802500009536743",  # the example output of the UnifiedReward script
    "Some words. Alignment Score (1-5):1\nStyle Score (1-5): 2\nCoherence Score (1-5): 0\nAlignment Score (1-5): 3",
]


class Canned:
    """A backend that answers with the given texts and keeps the queries (the parse and combination, without a
    model)."""

    io_bound = False

    def __init__(self, texts):
        self.texts, self.queries = texts, []

    def generate(self, queries, *, max_new_tokens):
        self.queries.extend(queries)
        return list(self.texts[: len(queries)])


def test_the_template_is_the_references_text():
    assert TEMPLATES["unified_reward_2"] == UR2_PROBLEM


def test_the_parse_is_pref_grpos_and_the_score_the_configured_combination(vlm_dirs, images):
    reward = rewardzoo.load_reward(
        {
            "name": "unified_reward_2",
            "model_path": vlm_dirs["qwen3_vl"],
            "kwargs": {"weights": {"alignment": 2, "style": 1}},
        }
    )
    reward.backend = Canned(JUDGEMENTS)
    out = reward(prompt=["p"] * 3, image=images[:3])
    want = pref_grpo_dimensions(JUDGEMENTS)
    for key in ("alignment", "coherence", "style"):
        np.testing.assert_array_equal(out.extras[key], [w[key] for w in want])
    np.testing.assert_allclose(out.rewards, [(2 * w["alignment"] + w["style"]) / 15 for w in want])
    assert out.extras["judgement"] == JUDGEMENTS
    plain = rewardzoo.load_reward({"name": "unified_reward_2", "model_path": vlm_dirs["qwen3_vl"]})
    plain.backend = Canned(JUDGEMENTS)
    np.testing.assert_allclose(
        plain(prompt=["p"] * 3, image=images[:3]).rewards,
        [(w["alignment"] + w["coherence"] + w["style"]) / 15 for w in want],
    )


def test_a_missing_or_off_scale_dimension_is_a_failure_never_a_silent_score(vlm_dirs, images):
    assert "no 'Style Score" in parse_dimensions("Alignment Score (1-5): 3\nCoherence Score (1-5): 3").reason
    assert "above 5" in parse_dimensions(JUDGEMENTS[0].replace(": 5", ": 5.5")).reason
    reward = rewardzoo.load_reward({"name": "unified_reward_2", "model_path": vlm_dirs["qwen3_vl"]})
    reward.backend = Canned(["Alignment Score (1-5): 3"])
    with pytest.raises(RewardOutputError, match="no 'Coherence Score"):
        reward(prompt=["p"], image=images[:1])
    lenient = rewardzoo.load_reward(
        {"name": "unified_reward_2", "model_path": vlm_dirs["qwen3_vl"], "kwargs": {"on_failure": {"substitute": 0.0}}}
    )
    lenient.backend = Canned(["Alignment Score (1-5): 3", JUDGEMENTS[0]])
    out = lenient(prompt=["p", "q"], image=images[:2])
    assert list(out.extras["substituted"]) == [1.0, 0.0] and out.rewards[0] == 0.0
    assert math.isnan(out.extras["alignment"][0]) and out.extras["alignment"][1] == 4.0


@pytest.mark.parametrize("weights", [{"beauty": 1}, {"alignment": -1}, {"alignment": 0}, [1, 2, 3], {"style": True}])
def test_bad_weights_are_config_errors(vlm_dirs, weights):
    with pytest.raises(ConfigError, match="weights"):
        rewardzoo.load_reward(
            {"name": "unified_reward_2", "model_path": vlm_dirs["qwen3_vl"], "kwargs": {"weights": weights}}
        )


def direct_judgement(path, images, problem, max_new_tokens):
    """transformers alone: the image parts then the problem text (as the reference's request orders its
    content), the processor's chat template, greedy generate, the new tokens decoded."""
    processor = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    content = [{"type": "image", "image": img} for img in images] + [{"type": "text", "text": problem}]
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )
    inputs = processor(text=[text], images=list(images), padding=True, return_tensors="pt")
    with torch.no_grad():
        ids = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    return processor.batch_decode(
        ids[:, inputs.input_ids.shape[1] :], skip_special_tokens=True, clean_up_tokenization_spaces=False
    )[0].strip()


def test_the_local_backend_and_the_endpoint_give_transformers_own_judgement(vlm_dirs, images):
    path = vlm_dirs["qwen3_vl"]
    local = rewardzoo.load_reward({"name": "unified_reward_2", "model_path": path, "kwargs": OPTS})
    out = local(prompt=PROMPTS, image=images[:2])
    expected = [direct_judgement(path, [im], UR2_PROBLEM.replace("{prompt}", p), 8) for p, im in zip(PROMPTS, images)]
    assert out.extras["judgement"] == expected
    server = ChatServer(path)
    try:
        endpoint = {"url": server.url, "model": "UnifiedReward", "max_concurrency": 1}
        remote = rewardzoo.load_reward(
            {"name": "unified_reward_2", "kwargs": {**OPTS, "backend": "openai", "endpoint": endpoint}}
        )
        out_remote = remote(prompt=PROMPTS, image=images[:2])
        assert out_remote.extras["judgement"] == expected
        for k, (prompt, img) in enumerate(zip(PROMPTS, images)):
            body = server.bodies[k]["body"]
            image_part, text_part = body["messages"][-1]["content"]
            assert text_part == {"type": "text", "text": UR2_PROBLEM.replace("{prompt}", prompt)}
            sent = Image.open(io.BytesIO(base64.b64decode(image_part["image_url"]["url"].split(",", 1)[1])))
            np.testing.assert_array_equal(np.asarray(sent.convert("RGB")), np.asarray(img))
    finally:
        server.close()


def test_the_tiny_build_has_the_published_qwen3_vl_key_layout(vlm_dirs):
    """UnifiedReward-2.0-qwen3vl-8b and Qwen3-VL-8B-Instruct are Qwen3VLForConditionalGeneration checkpoints whose
    weights sit under ``model.language_model.``, ``model.visual.`` and ``lm_head.``: the tiny build loads through
    the same path because it is saved the same way."""
    import json
    from pathlib import Path

    from safetensors import safe_open

    root = Path(vlm_dirs["qwen3_vl"])
    assert json.loads((root / "config.json").read_text())["architectures"] == ["Qwen3VLForConditionalGeneration"]
    with safe_open(str(root / "model.safetensors"), "pt") as f:
        names = f.keys()  # a safe_open handle is not iterable in every safetensors release
    prefixes = {".".join(k.split(".")[:2]) if k.startswith("model.") else k.split(".")[0] for k in names}
    assert prefixes == {"model.language_model", "model.visual", "lm_head"}
