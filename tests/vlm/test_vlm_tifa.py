"""tifa_vqa against GenEval2's Soft-TIFA (evaluation.py ``soft_tifa``, commit a6e82d2) re-computed here step by step
with transformers on the tiny Qwen3-VL (Soft-TIFA's model family): the question template, the answer variants,
one ``generate`` per question, the probabilities summed, AM and GM; the endpoint backend against the test server;
bad questions as InputErrors naming the reward, the field and the global sample."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

import rewardzoo
from rewardzoo.errors import InputError
from rewardzoo.rewards.vlm.tifa import TEMPLATES, answer_variants

from .openai_server import ChatServer

# GenEval2 a6e82d2, evaluation.py, soft_tifa: send_message_with_image('{} Answer in one word.'.format(question), ...)
GENEVAL2_QUESTION = "{} Answer in one word."
QUESTIONS = [
    [
        {"question": "How many bicycles are in the image?", "answer": "four"},
        {"question": "Are the bicycles white?", "answer": "Yes"},
        {"question": "Are there any cows in the image?", "answer": "Yes"},
    ],
    [{"question": "Is there a cat?", "answer": "Yes"}],
    [
        {"question": "How many dogs are in the image?", "answer": "two"},
        {"question": "Is the dog red?", "answer": "Yes"},
    ],
]


def geneval2_answer_list(question, answer):
    """GenEval2 a6e82d2 ``soft_tifa``'s ``answer_list`` (``return_numeric_string`` for the digits); its yes list for
    every other question."""
    numeric = {
        "one": "1",
        "two": "2",
        "three": "3",
        "four": "4",
        "five": "5",
        "six": "6",
        "seven": "7",
        "eight": "8",
        "nine": "9",
        "ten": "10",
    }.get(answer, "other")
    if question.startswith("How many"):
        return [answer, answer.capitalize(), " " + answer, " " + answer.capitalize(), numeric, " " + numeric]
    return ["Yes", "yes", " yes", " Yes"]


def soft_tifa(path, image, questions):
    """GenEval2's per-question probabilities: image then text part, apply_chat_template(tokenize=True), generate one
    token greedily with output_scores, softmax, sum of probs at ``tokenizer.encode(answer)[0]`` over the list."""
    processor = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    probs = []
    for item in questions:
        messages = [
            {
                "role": "user",
                "content": [
                    {"type": "image", "image": image},
                    {"type": "text", "text": GENEVAL2_QUESTION.format(item["question"])},
                ],
            }
        ]
        inputs = processor.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=True, return_dict=True, return_tensors="pt"
        )
        with torch.no_grad():
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
        p = torch.nn.functional.softmax(out.scores[0].float(), dim=-1)
        probs.append(
            sum(
                p[0, processor.tokenizer.encode(a)[0]].item()
                for a in geneval2_answer_list(item["question"], item["answer"])
            )
        )
    return probs


@pytest.fixture(scope="module")
def qwen3(vlm_dirs):
    return vlm_dirs["qwen3_vl"]


def test_the_template_and_the_answer_variants_are_geneval2s():
    assert TEMPLATES["geneval2"].replace("{question}", "{}") == GENEVAL2_QUESTION
    for qs in QUESTIONS:
        for item in qs:
            got, want = (
                answer_variants(item["question"], item["answer"]),
                geneval2_answer_list(item["question"], item["answer"]),
            )
            assert sorted(got) == sorted(want)


def test_local_scores_equal_soft_tifa_recomputed_batched_and_alone(qwen3, images):
    mean = rewardzoo.load_reward({"name": "tifa_vqa", "model_path": qwen3})
    geo = rewardzoo.load_reward({"name": "tifa_vqa", "model_path": qwen3, "kwargs": {"aggregate": "geometric"}})
    meta = [json.dumps({"questions": qs}) for qs in QUESTIONS]
    out = mean(image=images[:3], metadata=meta)
    want = [soft_tifa(qwen3, im, qs) for im, qs in zip(images, QUESTIONS)]
    np.testing.assert_allclose(out.rewards, [np.mean(w) for w in want], rtol=1e-4, atol=1e-7)
    for got, w in zip(out.extras["question_probs"], want):
        np.testing.assert_allclose(json.loads(got), w, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(out.extras["min_prob"], [min(w) for w in want], rtol=1e-4, atol=1e-7)
    assert list(out.extras["num_questions"]) == [3.0, 1.0, 2.0]
    np.testing.assert_allclose(
        geo(image=images[:3], metadata=meta).rewards,
        [float(np.exp(np.mean(np.log(w)))) for w in want],
        rtol=1e-4,
        atol=1e-7,
    )
    alone = np.concatenate([mean(image=[im], metadata=[m]).rewards for im, m in zip(images, meta)])
    np.testing.assert_allclose(alone, out.rewards, rtol=1e-5, atol=1e-8)
    assert np.ptp([np.mean(w) for w in want]) > 0


def test_the_endpoint_reads_the_same_probabilities_from_top_logprobs(qwen3, images):
    """Yes/no questions: every variant is one token of the tiny tokenizer, as of Qwen's (an endpoint reports whole
    tokens, so a variant that is several tokens counts there only through its first token, which the server does
    not name)."""
    server = ChatServer(qwen3)
    try:
        local = rewardzoo.load_reward({"name": "tifa_vqa", "model_path": qwen3})
        remote = rewardzoo.load_reward(
            {
                "name": "tifa_vqa",
                "kwargs": {
                    "backend": "openai",
                    "endpoint": {"url": server.url, "model": "qwen3", "top_logprobs": 1000},
                },
            }
        )
        yes_only = [[q for q in qs if not q["question"].startswith("How many")] for qs in QUESTIONS[:2]]
        meta = [json.dumps({"questions": qs}) for qs in yes_only]
        np.testing.assert_allclose(
            remote(image=images[:2], metadata=meta).rewards,
            local(image=images[:2], metadata=meta).rewards,
            rtol=1e-4,
            atol=1e-7,
        )
        texts = [m["content"][-1]["text"] for b in server.bodies for m in b["body"]["messages"]]
        assert sorted(texts) == sorted(GENEVAL2_QUESTION.format(item["question"]) for qs in yes_only for item in qs)
    finally:
        server.close()


@pytest.mark.parametrize(
    "metadata, words",
    [
        ({}, "needs metadata['questions']"),
        ({"questions": []}, "needs metadata['questions']"),
        ({"questions": [{"question": "Is there a cat?"}]}, "metadata['questions'][0] must be"),
        ({"questions": [["Is there a cat?", "Yes"]]}, "metadata['questions'][0] must be"),
        ({"questions": [{"question": "Is there a cat?", "answer": ""}]}, "metadata['questions'][0] must be"),
    ],
)
def test_missing_or_malformed_questions_name_reward_field_and_global_sample(qwen3, images, metadata, words):
    proc = rewardzoo.RewardProcessor(
        [{"name": "tifa", "reward_model": "tifa_vqa", "model_path": qwen3, "batch_size": 2}]
    )
    good = {"image": images[0], "metadata": {"questions": QUESTIONS[1]}}
    with pytest.raises(InputError) as info:
        proc([good, good, {"image": images[1], "metadata": metadata}])
    assert (info.value.reward, info.value.field, info.value.sample) == ("tifa", "metadata", 2)
    assert words in str(info.value)


def test_the_aggregate_is_not_capped_at_one_as_in_geneval2():
    """GenEval2 a6e82d2 ``evaluation.py`` 187-190: ``sum(s)/len(s)`` (AM) or ``gmean(s)`` (GM) of the per-question
    sums as they are; a sum passes 1 when variants share a first token, and the score follows it."""
    from scipy.stats import gmean

    from rewardzoo.rewards.base import validate_scores
    from rewardzoo.rewards.vlm.tifa import TifaVQA

    probs = np.array([1.6, 0.9, 1.2])
    for aggregate, want in (("mean", sum(probs) / len(probs)), ("geometric", gmean(probs))):
        reward = object.__new__(TifaVQA)
        reward.aggregate = aggregate
        assert reward.combine(probs) == pytest.approx(want, rel=1e-12)
        assert want > 1
    card = rewardzoo.RewardInfo.of_class(TifaVQA)
    np.testing.assert_allclose(validate_scores([1.2333], 1, "tifa_vqa", card.score_range)[0], [1.2333])
