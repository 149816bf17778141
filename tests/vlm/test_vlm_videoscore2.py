"""videoscore2 against TIGER-AI-Lab/VideoScore2 e6abe26 ``vs2_inference.py``: its query, its score pattern, its
score-token search and soft score, re-written here from its code; the soft pass against transformers' own logits
at the score token (the distribution the reference reads from ``generate(output_scores=True)``)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

import rewardzoo
from rewardzoo.errors import RewardOutputError
from rewardzoo.rewards.models.vlm.judging import Failure
from rewardzoo.rewards.vlm import videoscore2 as vs2

# TIGER-AI-Lab/VideoScore2 e6abe26bf694c293023cb3863bd6c657128766ac, vs2_inference.py, main(): VS2_QUERY_TEMPLATE
# (a string.Template; the literal as written inside main, its indentation included).
REF_QUERY = """
    You are an expert for evaluating AI-generated videos from three dimensions:
    (1) visual quality – clarity, smoothness, artifacts;
    (2) text-to-video alignment – fidelity to the prompt;
    (3) physical/common-sense consistency – naturalness and physics plausibility.

    Video prompt: $t2v_prompt

    Please output in this format:
    visual quality: <v_score>; 
    text-to-video alignment: <t_score>, 
    physical/common-sense consistency: <p_score>
    """
REF_PATTERN = r"visual quality:\s*(\d+).*?text-to-video alignment:\s*(\d+).*?physical/common-sense consistency:\s*(\d+)"
LABELS = ("visual quality:", "text-to-video alignment:", "physical/common-sense consistency:")


def test_the_query_is_the_references():
    from string import Template

    assert vs2.QUERY.replace("{prompt}", "a dog runs") == Template(REF_QUERY).substitute(t2v_prompt="a dog runs")
    assert vs2.SCORES == REF_PATTERN


ANSWERS = [
    "The motion is smooth.\nvisual quality: 4;\ntext-to-video alignment: 3,\nphysical/common-sense consistency: 5",
    "Visual Quality: 2; Text-to-Video Alignment: 2, Physical/Common-Sense Consistency: 1",
    "(1) visual quality: 5; (2) text-to-video alignment: 4, (3) physical/common-sense consistency: 4",
    "visual quality: 4; text-to-video alignment: three",
]
#: The same answers with each score right after its colon. Qwen's tokenizers split every digit into its own
#: token (the space before it is a token of its own), so the reference's score token is the digit and the prefix
#: ends with the space; the tiny byte-level BPE here merges " 4" into one token, so the tests that follow the
#: reference token by token write the scores without the space (both rules then pick the same step).
TIGHT = [a.replace(": ", ":") for a in ANSWERS[:3]]


@pytest.mark.parametrize("answer", ANSWERS)
def test_hard_scores_are_the_references_pattern(answer):
    m = re.search(REF_PATTERN, answer, re.DOTALL | re.IGNORECASE)
    got = vs2.hard_scores(answer)
    if m is None:
        assert isinstance(got, Failure)
    else:
        assert got == tuple(int(m.group(i)) for i in (1, 2, 3))


def reference_index(prompt_text, tokenizer, gen_ids):
    """vs2_inference.py ``find_score_token_index_by_prompt``, re-written from its steps."""
    gen_str = tokenizer.decode(gen_ids, skip_special_tokens=False)
    m = re.search(r"(?:\(\d+\)\s*|\n\s*)?" + re.escape(prompt_text), gen_str, flags=re.IGNORECASE)
    if not m:
        return -1
    d = re.search(r"\d", gen_str[m.end() :])
    if not d:
        return -1
    target = gen_str[: m.end() + d.start() + 1]
    for i in range(len(gen_ids)):
        if tokenizer.decode(gen_ids[: i + 1], skip_special_tokens=False) == target:
            return i
    return -1


def reference_soft(logits, tokenizer):
    """vs2_inference.py ``ll_based_soft_score_normed`` (without its rounding) on one step's logits."""
    pairs = []
    for s in range(1, 6):
        ids = tokenizer.encode(str(s), add_special_tokens=False)
        if len(ids) == 1:
            pairs.append((s, float(np.exp(torch.log_softmax(logits, dim=-1)[ids[0]].item()))))
    values, probs = zip(*pairs)
    best = values[probs.index(max(probs))]
    return best * (max(probs) / sum(probs) if sum(probs) > 0 else 0)


@pytest.fixture(scope="module")
def tiny(vlm_dirs):
    path = vlm_dirs["qwen2_5_vl"]
    return path, AutoProcessor.from_pretrained(path), AutoModelForImageTextToText.from_pretrained(path).eval()


@pytest.mark.parametrize("answer", TIGHT)
def test_the_score_prefix_ends_where_the_references_score_token_starts(tiny, answer):
    _, processor, _ = tiny
    tok = processor.tokenizer
    ids = tok.encode(answer, add_special_tokens=False)
    for label in LABELS:
        index = reference_index(label, tok, ids)
        assert index >= 0
        assert tok.decode(ids[:index]) == vs2.score_prefix(answer, label)
        assert tok.decode(ids[index : index + 1]).strip().isdigit()


def test_soft_score_is_the_references_formula(tiny):
    _, processor, _ = tiny
    tok = processor.tokenizer
    logits = torch.randn(len(tok), generator=torch.Generator().manual_seed(0)) * 3
    probs = torch.softmax(logits, dim=-1)[[tok.encode(d, add_special_tokens=False)[0] for d in vs2.DIGITS]]
    assert vs2.soft_score(probs.tolist()) == pytest.approx(reference_soft(logits, tok), rel=1e-6)  # float32 softmax


class CannedGenerate:
    """The local backend with its generation replaced by fixed answers (a random tiny model writes no scores)."""

    def __init__(self, backend, answers):
        self.backend, self.answers = backend, answers
        self.kind, self.io_bound = backend.kind, backend.io_bound

    def generate(self, queries, *, max_new_tokens):
        return self.answers[: len(queries)]

    def answer_probs(self, queries, answers, **kw):
        return self.backend.answer_probs(queries, answers, **kw)


def test_soft_scores_read_the_models_distribution_at_the_score_token(tiny, video_frames):
    path, processor, model = tiny
    reward = rewardzoo.load_reward(
        {"name": "videoscore2", "model_path": path, "kwargs": {"num_frames": 4, "temperature": None}}
    )
    answers = [TIGHT[0], TIGHT[2]]
    reward.backend = CannedGenerate(reward.backend, answers)
    prompts = ["a dog runs", "a red car"]
    out = reward(prompt=prompts, video=video_frames)
    tok = processor.tokenizer
    for i, (frames, prompt, answer) in enumerate(zip(video_frames, prompts, answers)):
        msgs = [
            {
                "role": "user",
                "content": [{"type": "video"}, {"type": "text", "text": vs2.QUERY.replace("{prompt}", prompt)}],
            }
        ]
        rendered = processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        soft = []
        for label in LABELS:
            ids = tok.encode(answer, add_special_tokens=False)
            index = reference_index(label, tok, ids)
            inputs = processor(
                text=[rendered + tok.decode(ids[:index])],
                videos=[list(frames)],
                return_tensors="pt",
                videos_kwargs={
                    "do_sample_frames": False,
                    "video_metadata": [
                        {
                            "fps": 2.0,
                            "total_num_frames": len(frames),
                            "duration": len(frames) / 2.0,
                            "frames_indices": list(range(len(frames))),
                        }
                    ],
                },
            )
            with torch.no_grad():
                logits = model(**inputs).logits[0, -1].float()
            soft.append(reference_soft(logits, tok))
        got = [out.extras[name][i] for name, _ in vs2.DIMENSIONS]
        np.testing.assert_allclose(got, soft, atol=1e-5)
        assert out.rewards[i] == pytest.approx(np.mean(soft), abs=1e-5)
    assert out.extras["reasoning"][0] == "The motion is smooth."
    assert out.extras["judgement"] == answers


def test_hard_mode_weights_and_failures(tiny, video_frames):
    path, _, _ = tiny
    reward = rewardzoo.load_reward(
        {"name": "videoscore2", "model_path": path, "kwargs": {"num_frames": 4, "soft": False, "weights": [2, 1, 1]}}
    )
    reward.backend = CannedGenerate(reward.backend, [ANSWERS[0], ANSWERS[1]])
    out = reward(prompt=["a", "b"], video=video_frames)
    np.testing.assert_allclose(out.rewards, [(2 * 4 + 3 + 5) / 4, (2 * 2 + 2 + 1) / 4])
    reward.backend = CannedGenerate(
        reward.backend.backend,
        [ANSWERS[0], "visual quality: 7; text-to-video alignment: 3, physical/common-sense consistency: 3"],
    )
    with pytest.raises(RewardOutputError):
        reward(prompt=["a", "b"], video=video_frames)


def test_through_an_endpoint_it_answers_as_locally(tiny, video_frames):
    from .openai_server import ChatServer

    path, _, _ = tiny
    server = ChatServer(path)
    try:
        opts = {"num_frames": 4, "soft": False, "max_new_tokens": 6, "on_failure": {"substitute": 0.0}}
        local = rewardzoo.load_reward({"name": "videoscore2", "model_path": path, "kwargs": opts})
        remote = rewardzoo.load_reward(
            {
                "name": "videoscore2",
                "kwargs": {
                    **opts,
                    "backend": "openai",
                    "endpoint": {"url": server.url, "model": "VideoScore2", "max_concurrency": 1},
                },
            }
        )
        prompts = ["a dog runs", "a red car"]
        out_remote = remote(prompt=prompts, video=video_frames)
        content = server.bodies[0]["body"]["messages"][-1]["content"]
        assert [p["type"] for p in content] == ["image_url"] * 4 + ["text"]  # the frames, then the query
        assert content[-1]["text"] == vs2.QUERY.replace("{prompt}", prompts[0])
        assert len(out_remote.extras["judgement"]) == 2
        assert list(out_remote.extras["substituted"]) == [1.0, 1.0]  # a random tiny model writes no scores
        out_local = local(prompt=prompts, video=video_frames)
        assert list(out_local.extras["substituted"]) == [1.0, 1.0]
    finally:
        server.close()


def test_the_temperature_moves_the_soft_score_as_in_the_issue():
    """A "4" one logit ahead of a "3" (the other digits far below): 2.92 from the raw softmax, 3.23 from the
    reference's logits / 0.7."""
    logits = np.array([-30.0, -30.0, 0.0, 1.0, -30.0])
    raw = np.exp(logits) / np.exp(logits).sum()
    assert vs2.soft_score(raw) == pytest.approx(4 * np.e / (1 + np.e), rel=1e-9) == pytest.approx(2.92, abs=5e-3)
    warm = np.exp(logits / 0.7)
    assert vs2.soft_score(warm / warm.sum()) == pytest.approx(3.23, abs=5e-3)


def reference_sampled_logits(logits, input_ids, *, temperature, repetition_penalty, top_k):
    """The scores ``generate(do_sample=True, temperature=...)`` reports for one step, written out from
    transformers' documented processors in their order: repetition penalty over the ids so far (divide a
    positive logit, multiply a negative one), the temperature, top-k (all below the k-th largest to -inf)."""
    x = logits.clone()
    seen = torch.unique(input_ids)
    x[seen] = torch.where(x[seen] > 0, x[seen] / repetition_penalty, x[seen] * repetition_penalty)
    x = x / temperature
    kth = torch.topk(x, top_k).values[-1]
    return x.masked_fill(x < kth, float("-inf"))


@pytest.fixture(scope="module")
def sampled_tiny(tiny, tmp_path_factory):
    """The tiny Qwen2.5-VL with a generation config that sets sampling processors, as a checkpoint's may."""
    import shutil

    from transformers import GenerationConfig

    path, processor, _ = tiny
    out = tmp_path_factory.mktemp("vs2_gen") / "model"
    shutil.copytree(path, out)
    GenerationConfig(do_sample=True, repetition_penalty=1.05, top_k=250).save_pretrained(out)
    return str(out), processor, AutoModelForImageTextToText.from_pretrained(out).eval()


def test_by_default_the_soft_scores_read_the_references_sampled_distribution(sampled_tiny, video_frames):
    """vs2_inference.py 103-113: ``generate(do_sample=True, temperature=0.7)``'s ``scores`` at the score token,
    re-computed from the raw logits with the checkpoint's repetition penalty and top-k, then
    ``ll_based_soft_score_normed``; a hard score outside 1..5 still has its soft score, as there."""
    path, processor, model = sampled_tiny
    reward = rewardzoo.load_reward({"name": "videoscore2", "model_path": path, "kwargs": {"num_frames": 4}})
    out_of_range = TIGHT[2].replace("alignment:4", "alignment:7")
    answers = [TIGHT[0], out_of_range]
    reward.backend = CannedGenerate(reward.backend, answers)
    prompts = ["a dog runs", "a red car"]
    before = torch.get_rng_state()
    out = reward(prompt=prompts, video=video_frames)
    assert torch.equal(torch.get_rng_state(), before)  # the token drawn for the scores leaves no trace
    tok = processor.tokenizer
    finite = []
    for i, (frames, prompt, answer) in enumerate(zip(video_frames, prompts, answers)):
        msgs = [
            {
                "role": "user",
                "content": [{"type": "video"}, {"type": "text", "text": vs2.QUERY.replace("{prompt}", prompt)}],
            }
        ]
        rendered = processor.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        soft = []
        for label in LABELS:
            ids = tok.encode(answer, add_special_tokens=False)
            index = reference_index(label, tok, ids)
            inputs = processor(
                text=[rendered + tok.decode(ids[:index])],
                videos=[list(frames)],
                return_tensors="pt",
                videos_kwargs={
                    "do_sample_frames": False,
                    "video_metadata": [
                        {
                            "fps": 2.0,
                            "total_num_frames": len(frames),
                            "duration": len(frames) / 2.0,
                            "frames_indices": list(range(len(frames))),
                        }
                    ],
                },
            )
            with torch.no_grad():
                logits = model(**inputs).logits[0, -1].float()
            scores = reference_sampled_logits(
                logits, inputs["input_ids"][0], temperature=0.7, repetition_penalty=1.05, top_k=250
            )
            digit_ids = [tok.encode(d, add_special_tokens=False)[0] for d in vs2.DIGITS]
            finite.append(int(torch.isfinite(scores[digit_ids]).sum()))
            soft.append(reference_soft(scores, tok))
        got = [out.extras[name][i] for name, _ in vs2.DIMENSIONS]
        np.testing.assert_allclose(got, soft, atol=1e-5)
        assert out.rewards[i] == pytest.approx(np.mean(soft), abs=1e-5)
    assert min(finite) >= 2 and max(finite) < 5  # top-k masks some digits, the temperature weighs the rest


@pytest.mark.parametrize(
    "answer, want",
    [
        (
            "(1) visual quality – clarity, smoothness, artifacts: 4\n(2) text-to-video alignment – fidelity to the prompt: "
            "3\n(3) physical/common-sense consistency – naturalness and physics plausibility: 2",
            (4, 3, 2),
        ),
        ("visual quality: 5; text-to-video alignment: 4, physical/common-sense consistency: 1", (5, 4, 1)),
    ],
)
def test_answers_that_copy_the_dimension_lines_parse(answer, want):
    """The shape seen in a public run log; the reference's own pattern, tried first, still decides the rest."""
    assert vs2.hard_scores(answer) == want
    for label, value in zip(LABELS, want):
        prefix = vs2.score_prefix(answer, label)
        assert answer[len(prefix)] == str(value)
