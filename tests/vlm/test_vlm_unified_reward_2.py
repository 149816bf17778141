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


# Two groups of four answers: a missing Style (the batch mean), a 5.5 (read and kept), a 6 (not read by the
# pattern: missing, the batch mean), a repeated name (the last wins).
PREF_GRPO_ANSWERS = [
    "Alignment Score (1-5): 4\nCoherence Score (1-5): 3\nStyle Score (1-5): 5",
    "Alignment Score (1-5): 2.5\nCoherence Score (1-5): 4\n",
    "Alignment Score (1-5): 5.5\nCoherence Score (1-5): 1\nStyle Score (1-5): 2",
    "Alignment Score (1-5): 1\nCoherence Score (1-5): 2\nStyle Score (1-5): 3\nAlignment Score (1-5): 3",
    "Alignment Score (1-5): 3\nCoherence Score (1-5): 3\nStyle Score (1-5): 4",
    "Alignment Score (1-5): 6\nCoherence Score (1-5): 5\nStyle Score (1-5): 1",
    "Alignment Score (1-5): 2\nCoherence Score (1-5): 2.25\nStyle Score (1-5): 3.5",
    "Alignment Score (1-5): 4.75\nCoherence Score (1-5): 1.5\nStyle Score (1-5): 2",
]


def pref_grpo_advantages(texts, weights, num_generations, apply_gdpo=False):
    """Pref-GRPO 3e787f6 re-computed: ``extract_normalized_rewards`` (per answer the last match per name, a
    dimension an answer lacks the batch mean of those that have it) and ``compute_weighted_advantages`` with
    ``use_group`` (contiguous groups of ``num_generations``, ``(r - mean) / (std + 1e-8)``, torch's unbiased std),
    ``sum_d w_d adv_d``; with ``apply_gdpo`` that sum renormalised over the batch (unbiased std + 1e-8)."""
    pattern = r"(\w+) Score \(1-5\):\s*([0-5](?:\.\d+)?)"
    found = [{k: float(v) for k, v in re.findall(pattern, t)} for t in texts]
    advantages = np.zeros(len(texts))
    raw = {}
    for name in ("Alignment", "Coherence", "Style"):
        have = [f[name] for f in found if name in f]
        raw[name.lower()] = np.array([f.get(name, np.mean(have) if have else 0.0) for f in found])
    for name, weight in weights.items():
        values = raw[name.lower()]
        for start in range(0, len(texts), num_generations):
            g = values[start : start + num_generations]
            advantages[start : start + num_generations] += weight * (g - g.mean()) / (np.std(g, ddof=1) + 1e-8)
    if apply_gdpo:
        advantages = (advantages - advantages.mean()) / (advantages.std(ddof=1) + 1e-8)
    return advantages, raw


@pytest.mark.parametrize(
    "preset, weights, advantage",
    [
        ("pref_grpo_defaults", {"Alignment": 1.0, "Coherence": 0.5, "Style": 2.0}, "sum"),
        ("pref_grpo", {"Alignment": 1.0, "Coherence": 0.5, "Style": 2.0}, "pref_grpo"),
        ("pref_grpo", None, "pref_grpo"),  # the scripts' --reward_spec: alignment 1.4, style 0.7, coherence untrained
    ],
)
def test_preset_pref_grpo_gives_pref_grpos_advantage_from_one_call(vlm_dirs, images, preset, weights, advantage):
    kwargs = (
        {"preset": preset}
        if weights is None
        else {"preset": preset, "weights": {k.lower(): w for k, w in weights.items()}}
    )
    entry = {"name": "unified_reward_2", "model_path": vlm_dirs["qwen3_vl"], "batch_size": 8, "kwargs": kwargs}
    proc = rewardzoo.RewardProcessor([entry], advantage=advantage)
    backend = Canned(PREF_GRPO_ANSWERS)
    proc.rewards["unified_reward_2"].backend = backend
    samples = [rewardzoo.Sample(prompt="p", image=images[i % 5], group_id=i // 4) for i in range(8)]
    result = proc(samples)
    assert len(backend.queries) == 8  # one judgement per sample: the streams come from it
    weights = weights or {"Alignment": 1.4, "Style": 0.7}
    want, raw = pref_grpo_advantages(PREF_GRPO_ANSWERS, weights, 4, apply_gdpo=advantage == "pref_grpo")
    for name in (k.lower() for k in weights):
        np.testing.assert_allclose(result.streams["unified_reward_2"][name], raw[name], rtol=1e-6)
    assert result.streams["unified_reward_2"]["alignment"][2] == 5.5  # above 5, kept
    np.testing.assert_allclose(result.advantages(), want, rtol=1e-5, atol=1e-5)
    capped = {k: np.minimum(v, 5.0) for k, v in raw.items()}
    score = sum(w * capped[k.lower()] for k, w in weights.items()) / (5 * sum(weights.values()))
    np.testing.assert_allclose(result.rewards["unified_reward_2"], score, rtol=1e-6)  # the score stays in [0, 1]
    if advantage == "sum":
        np.testing.assert_allclose(result.total, want, rtol=1e-5, atol=1e-5)
    explicit = dict(entry, streams={"style": {"weight": 1.0, "normalize": "group"}})
    only_style = rewardzoo.RewardProcessor([explicit])
    only_style.rewards["unified_reward_2"].backend = Canned(PREF_GRPO_ANSWERS)
    style = raw["style"]
    z = np.concatenate([(g - g.mean()) / g.std() for g in (style[:4], style[4:])])
    np.testing.assert_allclose(only_style(samples).total, z, rtol=1e-5, atol=1e-5)  # the entry's streams win


def test_the_video_form_has_no_pref_grpo_preset_and_unknown_streams_list_the_valid_ones(vlm_dirs):
    with pytest.raises(ConfigError, match="preset"):
        rewardzoo.load_reward(
            {"name": "video_unified_reward_2", "model_path": vlm_dirs["qwen3_vl"], "kwargs": {"preset": "pref_grpo"}}
        )
    with pytest.raises(ConfigError, match="alignment, physics, style") as err:
        rewardzoo.RewardProcessor(
            [{"name": "video_unified_reward_2", "model_path": vlm_dirs["qwen3_vl"], "streams": {"coherence": 1}}]
        )
    assert "coherence" in str(err.value) and err.value.field == "streams.coherence"
