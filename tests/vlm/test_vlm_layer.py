"""The VLM backbone (rewardzoo.rewards.models.vlm.backbone): loading, chat-template rendering, left-padded batches, limits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.models.vlm.backbone import PixelBounds, Video, VLMQuery, backbone_key, load_vlm

from .conftest import random_image

QUESTION = 'Does this figure show "{}"? Please answer Yes or No.'


def reference_last_logits(path, text, image=None, frames=None):
    """transformers alone, one sample, no padding: the logits at the last prompt position."""
    processor = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    part = {"type": "image"} if image is not None else {"type": "video"}
    messages = [{"role": "user", "content": [part, {"type": "text", "text": text}]}]
    rendered = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    media = {"images": [image]} if image is not None else {"videos": [frames]}
    inputs = processor(text=[rendered], return_tensors="pt", **media)
    with torch.no_grad():
        return model(**inputs).logits[0, -1].float()


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl"])
def test_each_family_loads_and_its_batched_logits_match_transformers_alone(vlm_dirs, family, images, prompts):
    bb = load_vlm(vlm_dirs[family], cache=False)
    assert bb.model_type == family and bb.dtype == torch.float32
    queries = [VLMQuery.of(QUESTION.format(p), image=im) for p, im in zip(prompts, images)]
    batched = bb.last_logits(queries)
    for i, (p, im) in enumerate(zip(prompts, images)):
        ref = reference_last_logits(vlm_dirs[family], QUESTION.format(p), image=im)
        torch.testing.assert_close(batched[i], ref, atol=1e-5, rtol=1e-5)


def test_render_is_the_chat_template_with_the_generation_prompt(vlm_dir, images):
    bb = load_vlm(vlm_dir)
    q = VLMQuery.of("hello", image=images[0])
    assert bb.render(q) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "<|vision_start|><|image_pad|><|vision_end|>hello<|im_end|>\n<|im_start|>assistant\n"
    )
    q2 = VLMQuery(("first", images[0], "second"), system="Judge.", answer_prefix="Score:")
    assert bb.render(q2) == (
        "<|im_start|>system\nJudge.<|im_end|>\n<|im_start|>user\nfirst<|vision_start|>"
        "<|image_pad|><|vision_end|>second<|im_end|>\n<|im_start|>assistant\nScore:"
    )


def test_batches_are_left_padded_so_the_last_position_is_the_answer_position(vlm_dir, images, prompts):
    bb = load_vlm(vlm_dir)
    batch = bb.encode([VLMQuery.of(QUESTION.format(p), image=im) for p, im in zip(prompts, images)])
    mask = batch["attention_mask"]
    assert bool(mask[:, -1].all()) and not bool(mask.all())  # padded, and on the left
    assert int(batch["input_ids"][0, -1]) == bb.tokenizer.convert_tokens_to_ids("\u010a")  # the "\n" after assistant


@pytest.mark.parametrize("size", [1, 2, 3])
def test_batch_size_does_not_change_scores_beyond_1e5_in_fp32(vlm_dirs, images, prompts, size):
    bb = load_vlm(vlm_dirs["qwen2_5_vl"])
    queries = [VLMQuery.of(QUESTION.format(p), image=im) for p, im in zip(prompts, images)]
    whole = bb.answer_logprobs(queries, ["Yes", "No"]).exp()
    chunked = torch.cat(
        [bb.answer_logprobs(queries[i : i + size], ["Yes", "No"]).exp() for i in range(0, len(queries), size)]
    )
    assert chunked.sub(whole).abs().max() < 1e-5
    assert whole[:, 0].std() > 0  # the scores differ between inputs (the comparison is not vacuous)


def test_mixed_image_sizes_and_a_video_share_one_batch(vlm_dir, images, video_frames):
    bb = load_vlm(vlm_dir)
    queries = [
        VLMQuery.of("Is it a cat?", image=images[1]),
        VLMQuery.of("Is it a cat?", video=Video(tuple(video_frames[0]))),
        VLMQuery.of("Is it a cat?", image=images[3]),
    ]
    together = bb.last_logits(queries)
    alone = torch.cat([bb.last_logits([q]) for q in queries])
    assert together.sub(alone).abs().max() < 1e-4
    ref = reference_last_logits(vlm_dir, "Is it a cat?", frames=video_frames[0])
    torch.testing.assert_close(together[1], ref, atol=1e-5, rtol=1e-5)


def test_pixel_bounds_change_the_image_tokens(vlm_dir, images):
    bb = load_vlm(vlm_dir)
    q = [VLMQuery.of("x", image=images[3])]
    small = bb.encode(q, pixels=PixelBounds(max_pixels=28 * 28 * 2))["image_grid_thw"]
    large = bb.encode(q, pixels=PixelBounds(min_pixels=112 * 112, max_pixels=112 * 112))["image_grid_thw"]
    assert int(small.prod()) < int(large.prod())
    with pytest.raises(ConfigError, match="min_pixels"):
        bb.encode(q, pixels=PixelBounds(min_pixels=10_000, max_pixels=100))


def test_a_prompt_longer_than_the_context_is_an_error_naming_the_sample(short_vlm_dir, images):
    bb = load_vlm(short_vlm_dir)
    short = VLMQuery.of("a cat", image=images[2])
    long = VLMQuery.of("a cat " * 60, image=images[2])
    bb.last_logits([short])  # fits in 64 positions
    with pytest.raises(InputError, match="more than the model's context of 64") as exc:
        bb.last_logits([short, long])
    assert exc.value.sample == 1 and exc.value.field == "prompt"


def test_greedy_generation_batched_equals_one_at_a_time_and_respects_the_token_limit(vlm_dir, images, prompts):
    bb = load_vlm(vlm_dir)
    queries = [VLMQuery.of(p, image=im) for p, im in zip(prompts[:3], images[:3])]
    together = bb.generate(queries, max_new_tokens=6)
    assert together == [bb.generate([q], max_new_tokens=6)[0] for q in queries]
    processor = AutoProcessor.from_pretrained(vlm_dir)
    model = AutoModelForImageTextToText.from_pretrained(vlm_dir).eval()
    rendered = bb.render(queries[0])
    inputs = processor(text=[rendered], images=[images[0]], return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=6, do_sample=False)
    new = out[0, inputs["input_ids"].shape[1] :]
    assert len(new) <= 6
    assert together[0] == processor.tokenizer.decode(new, skip_special_tokens=True).strip()


def test_rewards_naming_the_same_model_share_one_backbone(vlm_dir):
    a, b = load_vlm(vlm_dir), load_vlm(vlm_dir + "/")
    assert a is b
    assert load_vlm(vlm_dir, dtype="float64") is not a
    assert backbone_key(vlm_dir) == backbone_key(vlm_dir, dtype="float32")  # fp32 is the CPU default


def test_unsupported_or_missing_models_are_config_errors(tmp_path, vlm_dir):
    with pytest.raises(ConfigError, match="cannot read the model config"):
        load_vlm(tmp_path / "nothing-here")
    from rewardzoo.testing import gpt2_config

    gpt2_config().save_pretrained(tmp_path / "gpt2")
    with pytest.raises(ConfigError, match="'gpt2' model; the VLM layer supports"):
        load_vlm(tmp_path / "gpt2")


def test_a_video_needs_frames_and_a_positive_fps():
    with pytest.raises(InputError, match="no frames"):
        Video(())
    with pytest.raises(InputError, match="fps"):
        Video((random_image(np.random.default_rng(0), 8, 8),), fps=0)


@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_video_fps_reaches_the_time_positions_as_transformers_places_them(vlm_dirs, family, video_frames):
    path, frames = vlm_dirs[family], video_frames[0]
    bb = load_vlm(path)
    ours = {
        fps: bb.last_logits([VLMQuery.of("Is it a cat?", video=Video(tuple(frames), fps=fps))])[0] for fps in (1.0, 8.0)
    }
    processor = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Is it a cat?"}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    for fps, logits in ours.items():
        meta = {
            "fps": fps,
            "total_num_frames": len(frames),
            "duration": len(frames) / fps,
            "frames_indices": list(range(len(frames))),
        }
        inputs = processor(
            text=[text], videos=[frames], video_metadata=[meta], do_sample_frames=False, return_tensors="pt"
        )
        with torch.no_grad():
            ref = model(**inputs).logits[0, -1].float()
        torch.testing.assert_close(logits, ref, atol=1e-5, rtol=1e-5)
    assert ours[1.0].sub(ours[8.0]).abs().max() > 1e-4  # the rate is not ignored


def test_two_rewards_calling_one_backbone_from_threads_get_their_own_answers(vlm_dir, images, prompts):
    from concurrent.futures import ThreadPoolExecutor

    bb = load_vlm(vlm_dir)
    queries = [[VLMQuery.of(QUESTION.format(p), image=im)] for p, im in zip(prompts, images)] * 2
    expected = [bb.answer_logprobs(q, ["Yes"]) for q in queries]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda q: bb.answer_logprobs(q, ["Yes"]), queries))
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
