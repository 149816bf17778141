"""speech_judge against SpeechJudge-GRM (AmphionTeam/SpeechJudge@1fbd1c8), on a tiny Qwen2.5-Omni thinker.

SpeechJudge is not on PyPI (CI has no GitHub access), so its steps are restated here from its files and compared
with the reward's: the conversation (``infer/utils.py`` 76-109), the processor call (``utils.py`` 14-43: chat
template with the generation prompt, then the processor on text and audio), the parse (``utils.py`` 167-176) and
the averaging over generations (``main_grm_vllm.py`` 98-115). The model is transformers' own
``Qwen2_5OmniThinkerForConditionalGeneration``, tiny and random (``rewardzoo.testing.tiny_omni_dir``): its answers
are noise, so the scoring path is checked with given judgements (a stub generate and a canned server).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("soundfile")

from rewardzoo.errors import ConfigError, RewardOutputError
from rewardzoo.rewards.audio.speech_judge import SpeechJudge, conversation, parse_rating
from rewardzoo.testing import tiny_omni_dir
from tests.vlm.canned_server import CannedServer

SYSTEM = (
    "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving auditory and "
    "visual inputs, as well as generating text and speech."
)


def reference_conversation(target_text, wav_a, wav_b):
    """utils.py 76-109, restated."""
    return [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "We are comparing the naturalness of two Text-to-Speech models' outputs. "
                    "The models need to generate the target text.",
                },
                {"type": "text", "text": f"Target text: {target_text}"},
                {"type": "text", "text": "Output A:"},
                {"type": "audio", "audio": wav_a},
                {"type": "text", "text": "Output B:"},
                {"type": "audio", "audio": wav_b},
                {"type": "text", "text": "Analysis the two output above, and score them with number from 1 to 10."},
                {
                    "type": "text",
                    "text": "Note: (1) Please evaluate the naturalness of both audio outputs based on the following "
                    "criteria: Prosody and Intonation, Pacing and Rhythm, Articulation and Clarity, and Overall "
                    "Naturalness. (2) After conducting a detailed analysis of each criterion, using the following "
                    "output template to highlight your conclusion: Output A: X, Output B: X.",
                },
            ],
        },
    ]


def reference_rating(result):
    """utils.py 167-176, restated: (a, b) strings or None."""
    matches = re.findall(r"Output A: (\d+(?:\.\d+)?).*?Output B: (\d+(?:\.\d+)?)", result.replace("**", ""), re.DOTALL)
    return (matches[-1][0], matches[-1][1]) if matches else None


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(tiny_omni_dir(tmp_path_factory.mktemp("omni"), seed=0))


@pytest.fixture(scope="module")
def clips():
    g = np.random.default_rng(0)
    return [(0.1 * g.standard_normal(n)).astype(np.float32) for n in (16000, 24000, 12000, 20000)]


def test_the_conversation_is_the_references():
    assert conversation("hello there", "a.wav", "b.wav") == reference_conversation("hello there", "a.wav", "b.wav")


@pytest.mark.parametrize(
    "text",
    [
        "Prosody ... Output A: 7, Output B: 5.",
        "**Output A: 8.5**, **Output B: 6**",
        "Output A: 3, Output B: 4\nlater\nOutput A: 9,\nthen Output B: 2",
        "Output A: seven, Output B: 5",
        "no template at all",
        "Output B: 3, Output A: 4",
    ],
)
def test_the_parse_is_the_references(text):
    want = reference_rating(text)
    got = parse_rating(text)
    assert got == (None if want is None else (float(want[0]), float(want[1])))


def test_local_inputs_are_the_references_processor_call(model_dir, clips):
    reward = SpeechJudge(model_dir, max_new_tokens=4, do_sample=False, on_failure={"substitute": 0.0})
    processor = reward.backend.processor
    conv = reference_conversation("say hi", clips[0], clips[1])
    text = processor.apply_chat_template(conv, add_generation_prompt=True, tokenize=False)
    want = processor(text=text, audio=[clips[0], clips[1]], return_tensors="pt", padding=True)
    got = reward.backend.inputs(conversation("say hi", clips[0], clips[1]))
    assert sorted(got) == sorted(want)
    for key in want:
        assert (got[key] == want[key]).all(), key
    # the tiny model's answers are noise: no rating, the failure policy substitutes and counts
    out = reward(
        prompt=["say hi", "bye"],
        audio=clips[:2],
        condition_audio=clips[2:],
        audio_sample_rate=[16000] * 2,
        condition_audio_sample_rate=[16000] * 2,
    )
    assert out.rewards.tolist() == [0.0, 0.0] and out.extras["substituted"].tolist() == [1.0, 1.0]
    strict = SpeechJudge(model_dir, max_new_tokens=4, do_sample=False)
    with pytest.raises(RewardOutputError, match="no score"):
        strict(
            prompt=["x"],
            audio=clips[:1],
            condition_audio=clips[1:2],
            audio_sample_rate=[16000],
            condition_audio_sample_rate=[16000],
        )


def test_scores_average_the_parsed_generations(model_dir, clips, monkeypatch):
    answers = ["Output A: 7, Output B: 5", "garbled", "**Output A: 8**, Output B: 9"]
    reward = SpeechJudge(model_dir, generations=3, score="margin")
    seen = {}

    def generate(conv, n, sampling, max_new_tokens):
        seen.update(n=n, sampling=sampling, max_new_tokens=max_new_tokens, conv=conv)
        return answers

    monkeypatch.setattr(reward.backend, "generate", generate)
    out = reward(
        prompt=["t"],
        audio=clips[:1],
        condition_audio=clips[1:2],
        audio_sample_rate=[16000],
        condition_audio_sample_rate=[16000],
    )
    # main_grm_vllm.py 101-114: the unparsed one skipped, A and B averaged separately
    assert out.extras["score_a"].tolist() == [7.5] and out.extras["score_b"].tolist() == [7.0]
    assert out.rewards.tolist() == [0.5] and out.extras["parsed"].tolist() == [2.0]
    assert seen["n"] == 3 and seen["max_new_tokens"] == 1024
    assert seen["sampling"] == {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 50}


def test_endpoint_sends_audio_parts_and_scores(clips):
    server = CannedServer(lambda body: "Analysis. Output A: **6**, Output B: 4")
    try:
        reward = SpeechJudge("speechjudge", backend="openai", endpoint={"url": server.url}, generations=2)
        out = reward(
            prompt=["hello"],
            audio=clips[:1],
            condition_audio=clips[1:2],
            audio_sample_rate=[16000],
            condition_audio_sample_rate=[16000],
        )
        assert out.rewards.tolist() == [6.0]
        (body,) = server.bodies
        assert body["model"] == "speechjudge" and body["n"] == 2 and body["max_tokens"] == 1024
        assert body["temperature"] == 1.0 and body["top_k"] == 50
        parts = body["messages"][1]["content"]
        assert [p["type"] for p in parts].count("input_audio") == 2
        assert body["messages"][0] == {"role": "system", "content": SYSTEM}
        texts = [p["text"] for p in parts if p["type"] == "text"]
        assert texts == [p["text"] for p in reference_conversation("hello", 0, 0)[1]["content"] if p["type"] == "text"]
    finally:
        server.close()
    with pytest.raises(ConfigError, match="endpoint"):
        SpeechJudge("m", backend="transformers", endpoint={"url": "http://127.0.0.1:1/v1"})


def test_processor_sends_each_pair_resampled(clips):
    from rewardzoo.core.processor import RewardProcessor
    from rewardzoo.spec.sample import Sample

    server = CannedServer(lambda body: "Output A: 8, Output B: 3")
    try:
        entry = {"name": "speech_judge", "model_path": "sj", "batch_size": 2}
        entry["kwargs"] = {"backend": "openai", "endpoint": {"url": server.url}, "score": "margin"}
        proc = RewardProcessor([entry])
        samples = [
            Sample(
                prompt=f"text {i}",
                audio=np.stack([c, c]),
                audio_sample_rate=32000,
                condition_audio=c,
                condition_audio_sample_rate=16000,
            )
            for i, c in enumerate(clips[:3])
        ]
        result = proc(samples)
        assert result.rewards["speech_judge"].tolist() == [5.0, 5.0, 5.0]
        assert len(server.bodies) == 3
        import base64
        import io

        import soundfile as sf

        for body, clip in zip(server.bodies, clips):
            audio_parts = [p for p in body["messages"][1]["content"] if p["type"] == "input_audio"]
            a, rate = sf.read(io.BytesIO(base64.b64decode(audio_parts[0]["input_audio"]["data"])))
            assert rate == 16000 and abs(a.shape[0] - clip.shape[0] / 2) <= 1  # 32 kHz stereo -> 16 kHz mono
    finally:
        server.close()
