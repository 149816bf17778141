"""vqascore's ``preset: t2v_metrics`` against t2v_metrics' own path re-computed step by step, and the default bounds.

t2v_metrics 6ecb74f (``t2v_metrics/models/vqascore_models/qwen2vl_model.py``, ``Qwen2VLModel.forward``) resizes
each image with qwen-vl-utils' ``fetch_image`` (``process_vision_info``), calls the processor with
``do_resize=False``, ``generate(max_new_tokens=1, temperature=1.0, do_sample=False, output_scores=True,
return_dict_in_generate=True)`` one pair at a time and takes ``softmax(scores[-1][0] / temperature)`` at the
answer's token. ``scores`` are the logits after the checkpoint's generation-config processors: the tiny build
here has a ``generation_config.json`` with ``repetition_penalty``, so they differ from the raw logits.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor, GenerationConfig

import rewardzoo
from rewardzoo.errors import ConfigError
from rewardzoo.testing import tiny_vlm_dir

QUESTION = 'Does this figure show "{}"? Please answer Yes or No.'  # t2v_metrics' Qwen2-VL default (6ecb74f)


def qwen_vl_utils_fetch_image(image, min_pixels=4 * 28 * 28, max_pixels=16384 * 28 * 28, factor=28):
    """qwen-vl-utils 0.0.14 ``fetch_image`` on a PIL image: ``smart_resize`` (sides rounded to ``factor``, scaled
    by ``sqrt`` and floored / ceiled outside the bounds), then ``image.resize`` with PIL's default filter."""
    image = image.convert("RGB")
    width, height = image.size
    h_bar, w_bar = max(factor, round(height / factor) * factor), max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar, w_bar = math.floor(height / beta / factor) * factor, math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return image.resize((w_bar, h_bar))


class T2VMetrics:
    """``Qwen2VLModel.forward`` for one pair, transformers alone."""

    def __init__(self, path):
        self.processor = AutoProcessor.from_pretrained(path)
        self.model = AutoModelForImageTextToText.from_pretrained(path).eval()

    def inputs(self, part, prompt, media):
        messages = [{"role": "user", "content": [part, {"type": "text", "text": QUESTION.format(prompt)}]}]
        text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.processor(text=[text], padding=True, return_tensors="pt", **media)

    def score(self, inputs, answer="Yes", *, raw=False):
        tok = self.processor.tokenizer
        answer_ids = tok.encode(answer, add_special_tokens=False)
        with torch.inference_mode():
            out = self.model.generate(
                **inputs,
                max_new_tokens=1,
                temperature=1.0,
                do_sample=False,
                output_scores=True,
                output_logits=raw,
                return_dict_in_generate=True,
            )
        generated = out.sequences[0][inputs.input_ids.shape[1] :]
        if generated[-1].item() in (tok.eos_token_id, tok.bos_token_id, tok.pad_token_id):
            raise ValueError("No content tokens to score after removing special tokens")  # as t2v_metrics
        logits = (out.logits if raw else out.scores)[-1][0]
        return torch.nn.functional.softmax(logits.float() / 1.0, dim=-1)[answer_ids[0]].item()

    def image_score(self, image, prompt):
        resized = qwen_vl_utils_fetch_image(image)
        return self.score(
            self.inputs({"type": "image", "image": resized}, prompt, {"images": [resized], "do_resize": False})
        )


@pytest.fixture(scope="module")
def penalised_dir(tmp_path_factory):
    """A tiny Qwen2.5-VL whose generation_config.json sets a repetition penalty (as Qwen's VL checkpoints do)."""
    path = tiny_vlm_dir(tmp_path_factory.mktemp("vqa_penalty") / "qwen2_5_vl", "qwen2_5_vl", seed=21)
    GenerationConfig(bos_token_id=0, eos_token_id=2, pad_token_id=0, repetition_penalty=1.3).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def reference(penalised_dir):
    return T2VMetrics(penalised_dir)


@pytest.fixture(scope="module")
def sized_images():
    rng = np.random.default_rng(4)  # sizes on both sides of the 28-pixel grid, one below the 3,136-pixel minimum
    return [
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        for h, w in [(64, 80), (100, 60), (30, 40), (56, 56)]
    ]


PROMPTS = ["a cat on a mat", "a photo of a dog", "two cats", "a red car"]


def test_the_preset_equals_t2v_metrics_per_pair_with_the_checkpoints_processors(penalised_dir, reference, sized_images):
    reward = rewardzoo.load_reward(
        {"name": "vqascore", "model_path": penalised_dir, "kwargs": {"preset": "t2v_metrics"}}
    )
    out = reward(prompt=PROMPTS, image=sized_images)  # one left-padded batch of mixed sizes
    expected = [reference.image_score(im, p) for im, p in zip(sized_images, PROMPTS)]
    np.testing.assert_allclose(out.rewards, expected, rtol=2e-5)
    alone = reward(prompt=PROMPTS[2:3], image=sized_images[2:3]).rewards
    np.testing.assert_allclose(alone, expected[2:3], rtol=2e-5)


def test_the_default_reads_the_raw_logits_which_the_penalty_moves_away_from(penalised_dir, reference, sized_images):
    default = rewardzoo.load_reward({"name": "vqascore", "model_path": penalised_dir})
    preset = rewardzoo.load_reward(
        {"name": "vqascore", "model_path": penalised_dir, "kwargs": {"preset": "t2v_metrics"}}
    )
    ours = default(prompt=PROMPTS[:2], image=sized_images[:2]).rewards
    raw = [
        reference.score(reference.inputs({"type": "image"}, p, {"images": [im]}), raw=True)
        for im, p in zip(sized_images[:2], PROMPTS[:2])
    ]
    np.testing.assert_allclose(ours, raw, rtol=2e-5)
    processed = preset(prompt=PROMPTS[:2], image=sized_images[:2]).rewards
    assert np.all(np.abs(np.log(processed) - np.log(ours)) > 1e-3)  # a penalty of 1.3 changes P(Yes)


def test_the_video_preset_equals_generates_scores_on_the_same_frames(penalised_dir, reference, video_frames):
    reward = rewardzoo.load_reward(
        {"name": "video_vqascore", "model_path": penalised_dir, "kwargs": {"preset": "t2v_metrics", "num_frames": 4}}
    )
    out = reward(prompt=PROMPTS[:2], video=video_frames)
    # the frames (64x96, 56x84) lie inside every bound, so the processor's own resize is the reference's
    expected = [
        reference.score(
            reference.inputs(
                {"type": "video"},
                p,
                {
                    "videos": [frames],
                    "videos_kwargs": {
                        "do_sample_frames": False,
                        "video_metadata": [{"fps": 8.0, "total_num_frames": 4}],
                    },
                },
            )
        )
        for frames, p in zip(video_frames, PROMPTS[:2])
    ]
    np.testing.assert_allclose(out.rewards, expected, rtol=2e-5)


def test_the_default_bounds_are_the_references(penalised_dir):
    image = rewardzoo.load_reward({"name": "vqascore", "model_path": penalised_dir})
    assert image.backend.pixels.max_pixels == 16384 * 28 * 28 == 12_845_056  # qwen-vl-utils' IMAGE_MAX_TOKEN_NUM
    assert image.backend.pixels.min_pixels is None  # the processor's (3,136 on Qwen's checkpoints)
    video = rewardzoo.load_reward({"name": "video_vqascore", "model_path": penalised_dir})
    assert video.backend.pixels.video_max_pixels == 360 * 420  # t2v_metrics' per-video max_pixels
    own = rewardzoo.load_reward({"name": "vqascore", "model_path": penalised_dir, "kwargs": {"max_pixels": 1003520}})
    assert own.backend.pixels.max_pixels == 1003520
    served = rewardzoo.load_reward(
        {"name": "vqascore", "kwargs": {"backend": "openai", "endpoint": {"url": "http://127.0.0.1:9/v1"}}}
    )  # the server owns its bounds
    assert served.backend.kind == "openai"


def test_the_preset_refuses_what_t2v_metrics_cannot_run(vlm_dirs):
    with pytest.raises(ConfigError, match="backend: transformers") as exc:
        rewardzoo.load_reward(
            {
                "name": "vqascore",
                "kwargs": {"preset": "t2v_metrics", "backend": "openai", "endpoint": {"url": "http://127.0.0.1:9/v1"}},
            }
        )
    assert exc.value.field == "kwargs.preset"
    with pytest.raises(ConfigError, match="qwen3_vl"):
        rewardzoo.load_reward(
            {"name": "vqascore", "model_path": vlm_dirs["qwen3_vl"], "kwargs": {"preset": "t2v_metrics"}}
        )
    with pytest.raises(ConfigError, match="preset"):
        rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dirs["qwen2_vl"], "kwargs": {"preset": "vbench"}})
