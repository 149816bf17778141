"""VQAScore against transformers' own model call: t2v_metrics' recipe (generate 1 token, softmax of its scores)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

import rewardzoo
from rewardzoo.errors import ConfigError, InputError, RewardOutputError

QUESTION = 'Does this figure show "{}"? Please answer Yes or No.'  # t2v_metrics' Qwen2-VL default


def t2v_metrics_score(path, prompt, *, image=None, frames=None, answer="Yes"):
    """One pair the way t2v_metrics' Qwen2VLModel.forward scores it: generate(max_new_tokens=1,
    output_scores=True), softmax over the vocabulary of the scores at the answer position, the answer's
    first token."""
    processor = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    part = {"type": "image"} if image is not None else {"type": "video"}
    messages = [{"role": "user", "content": [part, {"type": "text", "text": QUESTION.format(prompt)}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    media = {"images": [image]} if image is not None else {"videos": [frames]}
    inputs = processor(text=[text], padding=True, return_tensors="pt", **media)
    answer_id = processor.tokenizer.encode(answer, add_special_tokens=False)[0]
    with torch.inference_mode():
        out = model.generate(
            **inputs,
            max_new_tokens=1,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
            temperature=None,
            top_p=None,
            top_k=None,
        )
    return float(torch.softmax(out.scores[0][0].float(), dim=-1)[answer_id])


@pytest.fixture(scope="module")
def vqascore(vlm_dir):
    return rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir})


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl"])
def test_vqascore_equals_the_probability_from_transformers_per_sample_batched_and_alone(
    vlm_dirs, family, images, prompts
):
    reward = rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dirs[family]})
    expected = np.array([t2v_metrics_score(vlm_dirs[family], p, image=im) for p, im in zip(prompts, images)])
    batched = reward(prompt=prompts, image=images).rewards
    alone = np.concatenate([reward(prompt=[p], image=[im]).rewards for p, im in zip(prompts, images)])
    np.testing.assert_allclose(batched, expected, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(alone, expected, rtol=1e-4, atol=1e-7)
    assert np.ptp(expected) > 0


def test_video_vqascore_equals_transformers_on_the_same_frames(vlm_dir, video_frames, prompts):
    reward = rewardzoo.load_reward({"name": "video_vqascore", "model_path": vlm_dir, "kwargs": {"num_frames": 4}})
    assert reward.inputs.num_frames == 4 and reward.inputs.fields == ("prompt", "video")
    out = reward(prompt=prompts[:2], video=video_frames)
    expected = [t2v_metrics_score(vlm_dir, p, frames=f) for p, f in zip(prompts[:2], video_frames)]
    np.testing.assert_allclose(out.rewards, expected, rtol=1e-4, atol=1e-7)


def test_through_the_processor_video_files_are_sampled_by_the_video_layer(vlm_dir, tmp_path, video_frames):
    from rewardzoo.shared.video import write_video

    path = write_video(tmp_path / "clip.mp4", [np.asarray(f) for f in video_frames[0]] * 3, fps=4)
    proc = rewardzoo.RewardProcessor([{"name": "video_vqascore", "model_path": vlm_dir, "kwargs": {"num_frames": 4}}])
    result = proc([{"video": str(path), "prompt": "a cat"}])
    assert 0.0 < result.rewards["video_vqascore"][0] < 1.0
    assert result.substitutions == {"video_vqascore": 0}


def test_relative_mode_is_yes_over_yes_plus_no(vlm_dir, images, prompts, vqascore):
    rel = rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir, "kwargs": {"normalize": "relative"}})
    yes = vqascore(prompt=prompts, image=images).rewards
    no = rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir, "kwargs": {"answer": "No"}})(
        prompt=prompts, image=images
    ).rewards
    np.testing.assert_allclose(rel(prompt=prompts, image=images).rewards, yes / (yes + no), rtol=1e-6)


def test_the_template_and_answer_are_options(vlm_dir, images):
    custom = rewardzoo.load_reward(
        {
            "name": "vqascore",
            "model_path": vlm_dir,
            "kwargs": {"question_template": "Is this {prompt}? Answer yes or no.", "answer": "yes"},
        }
    )
    default = rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir})
    assert (
        custom(prompt=["a cat"], image=images[:1]).rewards[0] != default(prompt=["a cat"], image=images[:1]).rewards[0]
    )
    with pytest.raises(ConfigError, match="exactly one"):
        rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir, "kwargs": {"question_template": "no slot"}})
    with pytest.raises(ConfigError, match="video judges only"):
        rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir, "kwargs": {"num_frames": 4}})


def test_bad_inputs_name_the_field_and_sample(vqascore, images):
    with pytest.raises(InputError, match="expected a string") as exc:
        vqascore(prompt=["a cat", 3], image=images[:2])
    assert exc.value.sample == 1 and exc.value.field == "prompt"


def test_an_over_long_prompt_through_the_processor_names_the_reward_and_sample(short_vlm_dir, images):
    proc = rewardzoo.RewardProcessor([{"name": "vqascore", "model_path": short_vlm_dir}])
    with pytest.raises(InputError, match="context of 64") as exc:
        proc([{"image": images[0], "prompt": "a cat"}, {"image": images[1], "prompt": "a cat " * 50}])
    assert exc.value.sample == 1 and exc.value.reward == "vqascore"


def test_vqascore_and_unified_reward_on_one_model_share_one_backbone(vlm_dir):
    proc = rewardzoo.RewardProcessor(
        [
            {"name": "vqascore", "model_path": vlm_dir},
            {"name": "unified_reward", "model_path": vlm_dir, "kwargs": {"max_new_tokens": 4}},
        ]
    )
    vq, ur = proc.loader.instances
    assert type(vq).__name__ == "VQAScore" and type(ur).__name__ == "UnifiedReward"
    assert vq.backend.backbone is ur.backend.backbone


def test_an_unreachable_endpoint_is_an_error_by_default(images):
    reward = rewardzoo.load_reward(
        {
            "name": "vqascore",
            "kwargs": {"backend": "openai", "endpoint": {"url": "http://127.0.0.1:9/v1", "model": "m", "retries": 0}},
        }
    )
    with pytest.raises(RewardOutputError, match="reward .vqascore.: the judge gave no score for 1 of 1.*http"):
        reward(prompt=["a cat"], image=images[:1])


def test_direct_calls_accept_tensors_as_the_media_conversion_reads_them(vqascore, images):
    from rewardzoo.shared.media import to_uint8_tensor

    tensor = to_uint8_tensor(images[0]).float() / 255.0
    np.testing.assert_allclose(
        vqascore(prompt=["a cat"], image=[tensor]).rewards, vqascore(prompt=["a cat"], image=images[:1]).rewards
    )


@pytest.mark.parametrize("mode", ["cpu", "drop"])
def test_a_qwen_vl_judge_scores_bit_identically_after_a_wake(vlm_dir, images, prompts, mode):
    entry = {"name": "v", "reward_model": "vqascore", "model_path": vlm_dir, "device": "cpu"}
    batch = [{"image": im, "prompt": p} for im, p in zip(images[:2], prompts[:2])]
    expected = rewardzoo.RewardProcessor([entry])(batch).rewards["v"]
    sleeper = rewardzoo.RewardProcessor([{**entry, "offload": mode}])
    reward, residency = sleeper.rewards["v"], sleeper.loader.residency
    assert residency.is_asleep(reward) and (residency.weight_bytes(reward) == 0) == (mode == "drop")
    assert sleeper(batch).rewards["v"].tobytes() == expected.tobytes()
    assert residency.is_asleep(reward)
    sleeper.wake()  # the backbone is cached across loaders: leave it awake for the other tests
