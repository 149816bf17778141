"""video_unified_reward_2 against its reference, UnifiedReward ff6f520's point_score_APS_video_generation.py: its
prompt string-equal, its frame choice (``read_video_frames``) and Pref-GRPO's parse re-computed from their code,
the local backend against transformers' own generate on the tiny Qwen3-VL with the frames as separate images, the
endpoint backend against the test server (the request's image parts: the chosen frames, in order, then the text),
and bad input as typed errors naming the sample."""

from __future__ import annotations

import base64
import io
import math

import numpy as np
import pytest
from PIL import Image

import rewardzoo
from rewardzoo.errors import ConfigError, InputError, RewardOutputError
from rewardzoo.rewards.vlm.unified_reward_2 import TEMPLATES, VIDEO_DIMENSIONS, parse_dimensions
from rewardzoo.shared.video import stride_indices

from .openai_server import ChatServer
from .test_vlm_unified_reward_2 import Canned, direct_judgement, pref_grpo_dimensions

# UnifiedReward ff6f520, inference_qwen/UnifiedReward-2.0-inference/point_score_APS_video_generation.py: `problem`
# (its last line an f-string; `{prompt}` left as the placeholder; cut at its \n escapes).
UR2_VIDEO_PROBLEM = (
    "You are presented with a generated video and its associated text caption. "
    "Your task is to analyze the video across multiple dimensions in relation to the caption. Specifically:\n"
    "Provide overall assessments for the video along the following axes (each rated from 1 to 5):\n"
    "- Alignment Score: How well the video matches the caption in terms of content.\n"
    "- Physics Score: How well the gravity, movements, collisions, and interactions make physical sense.\n"
    "- Style Score: How visually appealing the video looks, regardless of caption accuracy.\n\n"
    "Output your evaluation using the format below:\n\n"
    "Alignment Score (1-5): X\n"
    "Physics Score (1-5): Y\n"
    "Style Score (1-5): Z\n\n"
    "Your task is provided as follows:\n"
    "Text Caption: [{prompt}]"
)
PROMPTS = ["a cat running on a mat", "a ball falling"]
OPTS = {"max_new_tokens": 6, "on_failure": {"substitute": 0.0}}


def reference_frames(frames, num_frames=16):
    """UnifiedReward ff6f520 ``read_video_frames``: ``selected = [int(i * total / num_frames) ...]``, then a
    sequential read keeping each frame whose index is selected (once), stopping after ``num_frames``."""
    total = len(frames)
    selected = [int(i * total / num_frames) for i in range(num_frames)]
    kept = []
    for current, frame in enumerate(frames):
        if current in selected:
            kept.append(frame)
        if len(kept) >= num_frames:
            break
    return kept


JUDGEMENTS = [
    "Alignment Score (1-5): 2.4036\nPhysics Score (1-5): 3.0987\nStyle Score (1-5): 3.3889",  # the script's example
    "Alignment Score (1-5): 4\nPhysics Score (1-5): 1.5\nStyle Score (1-5): 5",
    "Style Score (1-5): 2 Physics Score (1-5):0\nAlignment Score (1-5): 1\nAlignment Score (1-5): 3",
]


@pytest.fixture(scope="module")
def videos():
    """Three videos of 16, 21 and 37 numbered frames (each frame's top-left pixel is its index)."""
    rng = np.random.default_rng(3)
    out = []
    for count, (h, w) in zip((16, 21, 37), [(32, 48), (40, 32), (32, 32)]):
        frames = []
        for k in range(count):
            a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            a[0, 0] = k
            frames.append(Image.fromarray(a))
        out.append(frames)
    return out


def _load(path, **kwargs):
    return rewardzoo.load_reward({"name": "video_unified_reward_2", "model_path": path, "kwargs": kwargs})


def test_the_template_is_the_references_text():
    assert TEMPLATES["unified_reward_2_video"] == UR2_VIDEO_PROBLEM
    assert list(VIDEO_DIMENSIONS) == ["Alignment", "Physics", "Style"]


@pytest.mark.parametrize("total", [16, 17, 21, 31, 32, 37, 81, 121, 1000])
def test_the_frame_choice_is_the_references(total):
    frames = list(range(total))
    assert [frames[k] for k in stride_indices(total, 16)] == reference_frames(frames)


def test_the_judge_gets_the_references_frames_and_the_parse_is_pref_grpos(vlm_dirs, videos):
    reward = _load(vlm_dirs["qwen3_vl"], weights={"physics": 2, "style": 1})
    reward.backend = canned = Canned(JUDGEMENTS)
    out = reward(prompt=["p"] * 3, video=videos)
    for query, frames in zip(canned.queries, videos):
        *images, text = query.content
        assert text == UR2_VIDEO_PROBLEM.replace("{prompt}", "p")
        assert [np.asarray(m)[0, 0, 0] for m in images] == [np.asarray(f)[0, 0, 0] for f in reference_frames(frames)]
    want = pref_grpo_dimensions(JUDGEMENTS, ("Alignment", "Physics", "Style"))
    for key in ("alignment", "physics", "style"):
        np.testing.assert_array_equal(out.extras[key], [w[key] for w in want])
    np.testing.assert_allclose(out.rewards, [(2 * w["physics"] + w["style"]) / 15 for w in want])
    assert out.extras["judgement"] == JUDGEMENTS and "coherence" not in out.extras
    plain = _load(vlm_dirs["qwen3_vl"])
    plain.backend = Canned(JUDGEMENTS)
    np.testing.assert_allclose(
        plain(prompt=["p"] * 3, video=videos).rewards, [(w["alignment"] + w["physics"] + w["style"]) / 15 for w in want]
    )


def test_an_image_judgement_is_not_a_video_one_and_failures_follow_the_policy(vlm_dirs, videos):
    coherence = "Alignment Score (1-5): 3\nCoherence Score (1-5): 3\nStyle Score (1-5): 3"
    assert "no 'Physics Score" in parse_dimensions(coherence, VIDEO_DIMENSIONS).reason
    reward = _load(vlm_dirs["qwen3_vl"])
    reward.backend = Canned([coherence])
    with pytest.raises(RewardOutputError, match="no 'Physics Score"):
        reward(prompt=["p"], video=videos[:1])
    lenient = _load(vlm_dirs["qwen3_vl"], on_failure={"substitute": 0.0})
    lenient.backend = Canned([JUDGEMENTS[1], coherence])
    out = lenient(prompt=["p", "q"], video=videos[:2])
    assert list(out.extras["substituted"]) == [0.0, 1.0] and out.rewards[1] == 0.0
    assert math.isnan(out.extras["physics"][1]) and out.extras["physics"][0] == 1.5


def test_bad_input_and_options_are_typed_errors_naming_the_sample(vlm_dirs, videos):
    reward = _load(vlm_dirs["qwen3_vl"])
    reward.backend = Canned(JUDGEMENTS)
    with pytest.raises(InputError) as caught:
        reward(prompt=["p", "q", "r"], video=[videos[0], videos[1], videos[0][:15]])
    assert (caught.value.sample, caught.value.field, caught.value.reward) == (2, "video", "video_unified_reward_2")
    assert "16 frames" in str(caught.value) and "has 15" in str(caught.value)
    with pytest.raises(InputError) as caught:
        reward(prompt=["p", "q"], video=[videos[0], []])
    assert caught.value.sample == 1
    for kwargs, field in [
        ({"num_frames": 0}, None),
        ({"num_frames": 2.5}, None),
        ({"weights": {"coherence": 1}}, "kwargs.weights"),
        ({"fps": 2.0}, None),
    ]:
        with pytest.raises(ConfigError) as caught:
            _load(vlm_dirs["qwen3_vl"], **kwargs)
        assert field is None or caught.value.field == field


def test_the_local_backend_and_the_endpoint_give_transformers_own_judgement(vlm_dirs, videos):
    path = vlm_dirs["qwen3_vl"]
    clips = videos[1:]
    out = _load(path, **OPTS)(prompt=PROMPTS, video=clips)
    # the reference's 16 frames as 16 image parts, then the problem
    expected = [
        direct_judgement(path, reference_frames(v), UR2_VIDEO_PROBLEM.replace("{prompt}", p), OPTS["max_new_tokens"])
        for p, v in zip(PROMPTS, clips)
    ]
    assert out.extras["judgement"] == expected
    server = ChatServer(path)
    try:
        endpoint = {"url": server.url, "model": "UnifiedReward", "max_concurrency": 1}
        remote = rewardzoo.load_reward(
            {"name": "video_unified_reward_2", "kwargs": {**OPTS, "backend": "openai", "endpoint": endpoint}}
        )
        assert remote(prompt=PROMPTS, video=clips).extras["judgement"] == expected
        for k, (prompt, frames) in enumerate(zip(PROMPTS, clips)):
            *image_parts, text_part = server.bodies[k]["body"]["messages"][-1]["content"]
            assert text_part == {"type": "text", "text": UR2_VIDEO_PROBLEM.replace("{prompt}", prompt)}
            assert [p["type"] for p in image_parts] == ["image_url"] * 16
            for part, frame in zip(image_parts, reference_frames(frames)):
                sent = Image.open(io.BytesIO(base64.b64decode(part["image_url"]["url"].split(",", 1)[1])))
                np.testing.assert_array_equal(np.asarray(sent.convert("RGB")), np.asarray(frame))
    finally:
        server.close()
