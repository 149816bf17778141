"""edit_score, unified_reward_edit and unified_reward_edit_pairwise against their references' prompts, parse rules
and request shapes, re-computed here from the references' code.

- EditScore 6e0f1b9 (VectorSpaceLab/EditScore): ``editscore/vie_prompts.py`` joined as ``EditScore.__init__`` does,
  its ``apply_chat_template`` (``<img1>: `` before each image), ``parse_vlm_output_to_dict`` and ``evaluate``'s
  ``sqrt(min(SC) / 2.5 * min(PQ) / 2.5)``;
- UnifiedReward ff6f520 (CodeGoat24/UnifiedReward, ``UnifiedReward-Edit/``): the ``problem`` strings, images before
  the text as JPEG quality 95, the pairwise score pattern.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import math
import re

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

import rewardzoo
from rewardzoo.errors import InputError, RewardOutputError
from rewardzoo.rewards.models.vlm.judging import Failure, rubric_scores
from rewardzoo.rewards.vlm import edit_score as es
from rewardzoo.rewards.vlm import unified_reward_edit as ure
from rewardzoo.rewards.vlm.unified_reward_edit import UNIFIED_REWARD_EDIT_PAIRWISE_SCORE

from .openai_server import ChatServer

# VectorSpaceLab/EditScore 6e0f1b9a73b40f227d82d9cb32bd9cfb7189739b, editscore/vie_prompts.py, quoted.
REF_CONTEXT = """You are a professional digital artist. You will have to evaluate the effectiveness of the AI-generated image(s) based on given rules.
All the input images are AI-generated. All human in the images are AI-generated too. so you need not worry about the privacy confidentials.

IMPORTANT: You will have to give your output in this way (Keep your reasoning concise and short.):
{
"reasoning" : "...",
"score" : [...]
}
"""
REF_TWO_IMAGE = """RULES:

Two images will be provided: The first being the original AI-generated image and the second being an edited version of the first.
The objective is to evaluate how successfully the editing instruction has been executed in the second image.

Note that sometimes the two images might look identical due to the failure of image edit.
"""
REF_SC = """
From scale 0 to 10: 
A score from 0 to 10 will be given based on the success of the editing. (0 indicates that the scene in the edited image does not follow the editing instruction at all. 10 indicates that the scene in the edited image follow the editing instruction text perfectly.)
A second score from 0 to 10 will rate the degree of overediting in the second image. (0 indicates that the scene in the edited image is completely different from the original. 10 indicates that the edited image can be recognized as a minimal edited yet effective version of original.)
Put the score in a list such that output score = [score1, score2], where 'score1' evaluates the editing success and 'score2' evaluates the degree of overediting.

Editing instruction: <instruction>
"""
REF_PQ = """RULES:

The image is an AI-generated image.
The objective is to evaluate how successfully the image has been generated.

From scale 0 to 10: 
A score from 0 to 10 will be given based on image naturalness. 
(
    0 indicates that the scene in the image does not look natural at all or give a unnatural feeling such as wrong sense of distance, or wrong shadow, or wrong lighting. 
    10 indicates that the image looks natural.
)
A second score from 0 to 10 will rate the image artifacts. 
(
    0 indicates that the image contains a large portion of distortion, or watermark, or scratches, or blurred faces, or unusual body parts, or subjects not harmonized. 
    10 indicates the image has no artifacts.
)
Put the score in a list such that output score = [naturalness, artifacts]
"""
# EditScore.__init__ (editscore/__init__.py): SC_prompt and PQ_prompt at score_range 25, then evaluate's
# .replace("<instruction>", text_prompt)
REF_SC_PROMPT = "\n".join([REF_CONTEXT, REF_TWO_IMAGE, REF_SC.replace("10", "25")])
REF_PQ_PROMPT = "\n".join([REF_CONTEXT, REF_PQ.replace("10", "25")])

# CodeGoat24/UnifiedReward ff6f520247a2d36e2aff7b2ba53a935afd437f66, UnifiedReward-Edit/*.py: `problem`, with the
# instruction written where the scripts concatenate it.
REF_URE_IF = (
    'You are a professional digital artist. You will have to evaluate the effectiveness of the AI-generated image(s) based on given rules.\nAll the input images are AI-generated. All human in the images are AI-generated too. so you need not worry about the privacy confidentials.\n\nIMPORTANT: You will have to give your output in this way (Keep your reasoning concise and short.):\n{\n\n"reasoning" : "...",\n"score" : [...],\n}\n\nRULES:\n\nTwo images will be provided: The first being the original AI-generated image and the second being an edited version of the first.\nThe objective is to evaluate how successfully the editing instruction has been executed in the second image.\n\nNote that sometimes the two images might look identical due to the failure of image edit.\n\n\nFrom scale 0 to 25: \nA score from 0 to 25 will be given based on the success of the editing. (0 indicates that the scene in the edited image does not follow the editing instruction at all. 25 indicates that the scene in the edited image follow the editing instruction text perfectly.)\nA second score from 0 to 25 will rate the degree of overediting in the second image. (0 indicates that the scene in the edited image is completely different from the original. 25 indicates that the edited image can be recognized as a minimal edited yet effective version of original.)\nPut the score in a list such that output score = [score1, score2], where \'score1\' evaluates the editing success and \'score2\' evaluates the degree of overediting.\n\nEditing instruction:'
    + "{instruction}\n"
)
REF_URE_QUALITY = 'You are a professional digital artist. You will have to evaluate the effectiveness of the AI-generated image(s) based on given rules.\nAll the input images are AI-generated. All human in the images are AI-generated too. so you need not worry about the privacy confidentials.\n\nIMPORTANT: You will have to give your output in this way (Keep your reasoning concise and short.):\n{\n\n"reasoning" : "...",\n"score" : [...],\n}\n\nRULES:\n\nThe image is an AI-generated image.\nThe objective is to evaluate how successfully the image has been generated.\n\nFrom scale 0 to 25: \nA score from 0 to 25 will be given based on image naturalness. \n(\n    0 indicates that the scene in the image does not look natural at all or give a unnatural feeling such as wrong sense of distance, or wrong shadow, or wrong lighting. \n    25 indicates that the image looks natural.\n)\nA second score from 0 to 25 will rate the image artifacts. \n(\n    0 indicates that the image contains a large portion of distortion, or watermark, or scratches, or blurred faces, or unusual body parts, or subjects not harmonized. \n    25 indicates the image has no artifacts.\n)\nPut the score in a list such that output score = [naturalness, artifacts]\n'
REF_URE_PAIRWISE_HEAD = "You are tasked with assigning scores to two edited images, comparing each with the original source image. \n\nThe score should reflect both how well the model executed the instructions and the overall quality of the edit, including its visual appeal for both images.\n\n**Inputs Provided:**\n- Source Image (before editing)\n- Edited Image 1 (after applying the instruction)\n- Edited Image 2 (after applying the instruction)\n- Text Instruction\n\n"
REF_URE_PAIRWISE_TAIL = "Please provide the scores for each image based on the evaluation of the above aspects.\n\nText instruction - {instruction}\n"

PROMPTS = ["add a hat", "make the sky red"]
OPTS = {"max_new_tokens": 8, "on_failure": {"substitute": 0.0}}


def test_templates_equal_the_reference_source():
    sc, pq = es.TEMPLATES["editscore"]
    assert sc == "<img1>: <image><img2>: <image>" + REF_SC_PROMPT.replace("<instruction>", "{prompt}")
    assert pq == "<img1>: <image>" + REF_PQ_PROMPT
    assert es.PRESETS["omnigen2_rl"]["templates"][1] == "<img1>: <image><img2>: <image>" + REF_PQ_PROMPT
    assert ure.TEMPLATES["unified_reward_edit"] == (REF_URE_IF.replace("{instruction}", "{prompt}"), REF_URE_QUALITY)
    assert UNIFIED_REWARD_EDIT_PAIRWISE_SCORE.startswith(REF_URE_PAIRWISE_HEAD)
    assert UNIFIED_REWARD_EDIT_PAIRWISE_SCORE.endswith(REF_URE_PAIRWISE_TAIL.replace("{instruction}", "{prompt}"))


# ------------------------------------------------------------------------------------------ the parse rule
def reference_parse(s):
    """EditScore 6e0f1b9 editscore/json_parser.py ``parse_vlm_output_to_dict``, re-written from its steps."""
    if not s or not s.strip():
        return {"score": [], "reasoning": "Input was empty."}
    m = re.search(r"\{.*\}", s, re.DOTALL)
    target = m.group(0) if m else s.strip()

    def validate(data):
        if not isinstance(data, dict):
            return None
        reasoning = ""
        for k in ["reasoning", "reason", "rationale"]:
            if k in data and isinstance(data[k], str):
                reasoning = data[k]
                break
        scores = []
        if "score" in data:
            v = data["score"]
            if isinstance(v, list):
                scores = [float(x) for x in v if isinstance(x, (int, float, str))]
            elif isinstance(v, (int, float)):
                scores = [float(v)]
        return {"score": scores, "reasoning": reasoning} if reasoning or scores else None

    def fix_quotes(t):
        t = re.sub(r"\bTrue\b", "true", t)
        t = re.sub(r"\bFalse\b", "false", t)
        t = re.sub(r"\bNone\b", "null", t)
        try:
            json.loads(t.replace("'", '"'))
            return t.replace("'", '"')
        except json.JSONDecodeError:
            pass
        return re.sub(r"([\{\s,])(\w+)\s*:", r'\1"\2":', t)

    def fix_reasoning(t):
        return re.sub(
            r'("reasoning"\s*:\s*")(.*?)(?="\s*[,}])',
            lambda mm: mm.group(1) + mm.group(2).replace('"', '\\"'),
            t,
            flags=re.DOTALL,
        )

    for fixer in (lambda t: t, fix_quotes, fix_reasoning):
        try:
            out = validate(json.loads(fixer(target)))
            if out is not None:
                return out
        except (json.JSONDecodeError, TypeError):
            continue
    sm = re.search(r'["\']score["\']\s*:\s*(.*)', target, re.DOTALL | re.IGNORECASE)
    area = sm.group(1) if sm else target
    return {"score": [float(n) for n in re.findall(r"[-+]?\d*\.?\d+", area)], "reasoning": "?"}


ANSWERS = [
    '{\n"reasoning" : "The hat is there.",\n"score" : [20, 17]\n}',
    "Sure. {'reasoning': 'ok', 'score': [12.5, 25]} done",
    '{reasoning: "fine", score: [3, 4]}',
    '{"reasoning": "he said "wow" here", "score": [10, 11]}',
    '{"score": 18}',
    'reasoning is short, "score": [7, 9',
    "the edit looks fine: 21 and 19",
    '{"reasoning": "no numbers", "score": []}',
    "",
]


@pytest.mark.parametrize("answer", ANSWERS)
def test_the_parse_reads_what_editscores_parser_reads(answer):
    expected = reference_parse(answer)["score"]
    got = rubric_scores(answer)
    if not expected:
        assert isinstance(got, Failure)  # EditScore's batched path would score it mid-scale
    else:
        assert got[0] == expected


class CannedBackend:
    """Answers in order; records the queries (a stand-in for the generation, to test the scoring)."""

    kind, io_bound = "transformers", False

    def __init__(self, answers):
        self.answers, self.queries = list(answers), []

    def generate(self, queries, *, max_new_tokens):
        self.queries += queries
        out, self.answers = self.answers[: len(queries)], self.answers[len(queries) :]
        return out


def _edits(seed, n=2, size=(56, 84)):
    rng = np.random.default_rng(seed)
    img = lambda: Image.fromarray(rng.integers(0, 256, (size[0], size[1], 3), dtype=np.uint8))  # noqa: E731
    return [img() for _ in range(n)], [img() for _ in range(n)]


def test_scores_are_editscores_evaluate(vlm_dirs):
    reward = rewardzoo.load_reward({"name": "edit_score", "model_path": vlm_dirs["qwen2_5_vl"], "kwargs": OPTS})
    sc = ['{"reasoning": "a", "score": [20, 15]}', '{"reasoning": "b", "score": [25, 25]}']
    pq = ['{"reasoning": "c", "score": [10, 22.5]}', "no score at all"]
    reward.backend = CannedBackend(sc + pq)
    sources, edited = _edits(0)
    out = reward(prompt=PROMPTS, image=edited, condition_images=[[s] for s in sources])
    sc_score, pq_score = min(20, 15) / 2.5, min(10, 22.5) / 2.5
    np.testing.assert_allclose(out.rewards, [math.sqrt(sc_score * pq_score), 0.0])
    assert list(out.extras["substituted"]) == [0.0, 1.0]
    assert out.extras["prompt_following"][0] == 20 / 2.5 and out.extras["consistency"][0] == 15 / 2.5
    assert out.extras["sc_reasoning"][0] == "a" and out.extras["pq_answer"][1] == "no score at all"
    # the queries: SC on [source, edited] with the instruction, PQ on [edited]
    q = reward.backend.queries
    assert [len(x.images) for x in q] == [2, 2, 1, 1]
    assert q[0].images[0] is not None and q[2].images[0].tobytes() == edited[0].tobytes()


def test_preset_omnigen2_rl_shows_pq_both_images_and_divides_by_10(vlm_dirs):
    reward = rewardzoo.load_reward(
        {"name": "edit_score", "model_path": vlm_dirs["qwen2_5_vl"], "kwargs": {**OPTS, "preset": "omnigen2_rl"}}
    )
    reward.backend = CannedBackend(['{"score": [25, 20]}', '{"score": [20, 20]}'])
    sources, edited = _edits(1, n=1)
    out = reward(prompt=PROMPTS[:1], image=edited, condition_images=[[s] for s in sources])
    np.testing.assert_allclose(out.rewards, [math.sqrt(8.0 * 8.0) / 10])
    assert [len(x.images) for x in reward.backend.queries] == [2, 2]


def test_out_of_range_is_a_failure_naming_the_input(vlm_dirs):
    reward = rewardzoo.load_reward(
        {"name": "edit_score", "model_path": vlm_dirs["qwen2_5_vl"], "kwargs": {"max_new_tokens": 8}}
    )
    reward.backend = CannedBackend(['{"score": [30, 40]}', '{"score": [20, 20]}'])
    sources, edited = _edits(2, n=1)
    with pytest.raises(RewardOutputError, match="outside"):
        reward(prompt=PROMPTS[:1], image=edited, condition_images=[[s] for s in sources])


def _editscore_reference_prompt(n_images, text):
    """EditScore's ``apply_chat_template`` (editscore/mllm_tools/qwen25vl.py): the prompt it renders."""
    t = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    t += "".join(f"<img{i}>: <|vision_start|><|image_pad|><|vision_end|>" for i in range(1, n_images + 1))
    return t + f"{text}<|im_end|>\n<|im_start|>assistant\n"


def test_local_backend_runs_editscores_qwen25vl_path_batched(vlm_dirs):
    """EditScore's ``Qwen25VL.prepare_input`` + ``inference`` one query at a time (greedy here), against the reward's
    batch of all SC and PQ queries."""
    path = vlm_dirs["qwen2_5_vl"]
    reward = rewardzoo.load_reward({"name": "edit_score", "model_path": path, "kwargs": OPTS})
    sources, edited = _edits(3)
    out = reward(prompt=PROMPTS, image=edited, condition_images=[[s] for s in sources])
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    processor = AutoProcessor.from_pretrained(path)

    def answer(images, text):
        inputs = processor(
            text=[_editscore_reference_prompt(len(images), text)], images=images, padding=True, return_tensors="pt"
        )
        with torch.no_grad():
            ids = model.generate(**inputs, max_new_tokens=8, do_sample=False)
        return processor.batch_decode(
            ids[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True, clean_up_tokenization_spaces=False
        )[0].strip()

    sc = [answer([s, e], REF_SC_PROMPT.replace("<instruction>", p)) for s, e, p in zip(sources, edited, PROMPTS)]
    pq = [answer([e], REF_PQ_PROMPT) for e in edited]
    assert out.extras["sc_answer"] == sc and out.extras["pq_answer"] == pq
    single = reward(prompt=PROMPTS[1:], image=edited[1:], condition_images=[[sources[1]]])
    assert single.extras["sc_answer"] == sc[1:] and single.extras["pq_answer"] == pq[1:]


def test_local_qwen3vl_runs_editscores_qwen3vl_path_without_image_labels(vlm_dirs):
    """EditScore 6e0f1b9 ``mllm_tools/qwen3vl.py`` 52-70: messages with the images, then the text, through the
    processor's own ``apply_chat_template(tokenize=True)`` (no ``<imgN>: `` labels); greedy here, one query at a
    time, against the reward's batch."""
    path = vlm_dirs["qwen3_vl"]
    reward = rewardzoo.load_reward({"name": "edit_score", "model_path": path, "kwargs": OPTS})
    assert all("<img1>" not in t for t in reward.queries_text)
    sources, edited = _edits(4)
    out = reward(prompt=PROMPTS, image=edited, condition_images=[[s] for s in sources])
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    processor = AutoProcessor.from_pretrained(path)

    def answer(images, text):
        messages = [
            {
                "role": "user",
                "content": [{"type": "image", "image": im} for im in images] + [{"type": "text", "text": text}],
            }
        ]
        inputs = processor.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=True, return_dict=True, return_tensors="pt"
        )
        with torch.no_grad():
            ids = model.generate(**inputs, max_new_tokens=8, do_sample=False)
        return processor.batch_decode(
            ids[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True, clean_up_tokenization_spaces=False
        )[0].strip()

    sc = [answer([s, e], REF_SC_PROMPT.replace("<instruction>", p)) for s, e, p in zip(sources, edited, PROMPTS)]
    pq = [answer([e], REF_PQ_PROMPT) for e in edited]
    assert out.extras["sc_answer"] == sc and out.extras["pq_answer"] == pq
    labelled = rewardzoo.load_reward({"name": "edit_score", "model_path": vlm_dirs["qwen2_5_vl"], "kwargs": OPTS})
    assert all(t.startswith("<img1>: <image>") for t in labelled.queries_text)


@contextlib.contextmanager
def local_and_remote(path, name, served):
    """(server, the reward on the local backend, the reward through the test server on the same model, edits)."""
    server = ChatServer(path)
    try:
        local = rewardzoo.load_reward({"name": name, "model_path": path, "kwargs": OPTS})
        remote = rewardzoo.load_reward(
            {
                "name": name,
                "kwargs": {
                    **OPTS,
                    "backend": "openai",
                    "endpoint": {"url": server.url, "model": served, "max_concurrency": 1},
                },
            }
        )
        yield server, local, remote, _edits(4, size=(56, 56))
    finally:
        server.close()


def test_unified_reward_edit_through_an_endpoint_sends_the_releases_request(vlm_dirs):
    with local_and_remote(vlm_dirs["qwen2_5_vl"], "unified_reward_edit", "UnifiedReward") as (
        server,
        local,
        remote,
        (sources, edited),
    ):
        cond = [[s] for s in sources]
        out_remote = remote(prompt=PROMPTS, image=edited, condition_images=cond)
        bodies = [b["body"] for b in server.bodies]
        assert len(bodies) == 4
        for k, body in enumerate(bodies):
            content = body["messages"][-1]["content"]
            n = 2 if k < 2 else 1
            assert [p["type"] for p in content] == ["image_url"] * n + ["text"]  # images before the text
            assert all(p["image_url"]["url"].startswith("data:image/jpeg;base64,") for p in content[:n])
            expected = REF_URE_IF.replace("{instruction}", PROMPTS[k]) if k < 2 else REF_URE_QUALITY
            assert content[-1]["text"] == expected
            assert body["temperature"] == 0 and body["model"] == "UnifiedReward"
        # the server decoded the JPEGs the release would send (quality 95)
        first = bodies[0]["messages"][-1]["content"][1]["image_url"]["url"].split(",", 1)[1]
        buf = io.BytesIO()
        edited[0].save(buf, format="JPEG", quality=95)
        assert base64.b64decode(first) == buf.getvalue()
        # locally on the same model (images as PNG-exact pixels there, so only the request shape is compared)
        out_local = local(prompt=PROMPTS, image=edited, condition_images=cond)
        assert len(out_local.extras["sc_answer"]) == len(out_remote.extras["sc_answer"]) == 2


def test_bad_edit_inputs_are_typed_errors_naming_the_sample(vlm_dirs):
    reward = rewardzoo.load_reward({"name": "edit_score", "model_path": vlm_dirs["qwen2_5_vl"], "kwargs": OPTS})
    sources, edited = _edits(5)
    with pytest.raises(InputError) as info:
        reward(prompt=PROMPTS, image=edited, condition_images=None)
    assert info.value.field == "condition_images"
    wrong = Image.new("L", (10, 10), 255)
    with pytest.raises(InputError) as info:
        reward(prompt=PROMPTS, image=edited, condition_images=[[sources[0]], [sources[1], wrong]])
    assert (info.value.field, info.value.sample) == ("condition_images", 1)


# ------------------------------------------------------------------------------------------ pairwise
def reference_pairwise(text):
    """UnifiedReward-Edit/edit_paiwise_score.py's closing comment: the first two decimals are edit 1's and 2's."""
    scores = re.findall(r"([0-9]+\.[0-9]+)", text)
    return float(scores[0]), float(scores[1])


@pytest.mark.parametrize("text", ["Image 1: 7.5, Image 2: 3.25", "scores 2.0 and 2.0", "1.5 vs 9.75 (out of 10.0)"])
def test_pairwise_verdict_compares_the_releases_two_scores(text):
    a, b = reference_pairwise(text)
    assert ure.pairwise_verdict(text) == (1.0 if a > b else 0.0 if a < b else 0.5)


def test_pairwise_verdict_without_two_scores_is_unparseable():
    assert isinstance(ure.pairwise_verdict("Image 1 is better: 7"), Failure)


def test_pairwise_reward_judges_every_pair_of_a_group(vlm_dirs):
    from rewardzoo.core.loader import RewardLoader
    from rewardzoo.core.processor import RewardProcessor

    proc = RewardProcessor(
        [
            {
                "name": "pw",
                "reward_model": "unified_reward_edit_pairwise",
                "model_path": vlm_dirs["qwen2_5_vl"],
                "kwargs": OPTS,
            }
        ],
        RewardLoader(),
    )
    judge = proc.rewards["pw"].judge
    # three edits of one source: pairs (0, 1), (0, 2), (1, 2) -> edit 0 beats both, 1 beats 2
    judge.backend = CannedBackend(["7.5 and 3.0", "6.0 vs 2.5", "4.0 4.0"])
    sources, edited = _edits(6, n=3)
    samples = [{"prompt": "add a hat", "image": e, "condition_images": [sources[0]], "group_id": 0} for e in edited]
    res = proc(samples)
    np.testing.assert_allclose(res.rewards["pw"], [1.0, 0.25, 0.25])
    assert [len(q.images) for q in judge.backend.queries] == [3, 3, 3]
    assert judge.backend.queries[0].content[-1] == UNIFIED_REWARD_EDIT_PAIRWISE_SCORE.replace("{prompt}", "add a hat")


def test_edit_score_through_an_endpoint_answers_as_locally(vlm_dirs):
    """The labelled images go as text and image_url parts in order; the server renders what the local backend does."""
    with local_and_remote(vlm_dirs["qwen2_5_vl"], "edit_score", "EditScore-7B") as (
        server,
        local,
        remote,
        (sources, edited),
    ):
        cond = [[s] for s in sources]
        out_remote = remote(prompt=PROMPTS, image=edited, condition_images=cond)
        out_local = local(prompt=PROMPTS, image=edited, condition_images=cond)
        assert out_remote.extras["sc_answer"] == out_local.extras["sc_answer"]
        assert out_remote.extras["pq_answer"] == out_local.extras["pq_answer"]
        content = server.bodies[0]["body"]["messages"][-1]["content"]
        assert [p["type"] for p in content] == ["text", "image_url", "text", "image_url", "text"]
        assert [content[0]["text"], content[2]["text"]] == ["<img1>: ", "<img2>: "]
        assert server.prompts[0] == _editscore_reference_prompt(2, REF_SC_PROMPT.replace("<instruction>", PROMPTS[0]))


def test_through_the_engine_a_bad_mask_names_the_reward_and_the_global_sample(vlm_dirs):
    from rewardzoo.core.loader import RewardLoader
    from rewardzoo.core.processor import RewardProcessor

    proc = RewardProcessor(
        [
            {
                "name": "es",
                "reward_model": "edit_score",
                "model_path": vlm_dirs["qwen2_5_vl"],
                "batch_size": 2,
                "kwargs": OPTS,
            }
        ],
        RewardLoader(),
    )
    sources, edited = _edits(8, n=4)
    samples = [{"prompt": "add a hat", "image": e, "condition_images": [s]} for s, e in zip(sources, edited)]
    samples[3]["condition_images"] = [sources[3], Image.new("L", (5, 5), 255)]
    with pytest.raises(InputError) as info:
        proc(samples)
    assert (info.value.reward, info.value.field, info.value.sample) == ("es", "condition_images", 3)
