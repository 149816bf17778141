"""rational_rewards / rational_rewards_edit against Flow-Factory a0b2bc5's RationalRewards rewards.

- the parse of the ``# Detailed Judgement`` section, on canned replies, through the reward's real call path,
  against the reference's reading re-written here from its description (and against the reference's own
  ``parse_scores_from_detailed_judgement*`` / ``aggregate_aspect_scores`` when its snapshot imports);
- the endpoint backend against a canned chat-completions server: the request is the reference's (system prompt,
  text / image / text parts, ``temperature: 0.1``, ``max_tokens: 2048``, PNG data URLs) and the score its reading;
- the local backend on a tiny Qwen-VL: the prompt the processor renders from the reference's messages, generated
  greedily by transformers alone, is what the reward generates;
- errors: no usable aspect names the sample; bad aspects are ConfigErrors.
"""

from __future__ import annotations

import base64
import io
import math
import re

import numpy as np
import pytest

import rewardzoo
from rewardzoo.errors import ConfigError, RewardOutputError
from rewardzoo.rewards.vlm import rational_rewards as rr
from tests.clients import client_module

from .canned_server import CannedServer
from .test_vlm_edit_judges import CannedBackend as _Canned
from .test_vlm_edit_judges import _edits


class CannedBackend(_Canned):
    """Canned answers in order; also records the decoding request."""

    def generate(self, queries, *, max_new_tokens, request=None):
        self.request = request
        return super().generate(queries, max_new_tokens=max_new_tokens)


T2I = [("text_faithfulness", "Text Faithfulness"), ("physical_quality", "Physical and Visual Quality"),
       ("text_rendering", "Text Rendering")]  # fmt: skip
EDIT = [T2I[0], ("image_faithfulness", "Image Faithfulness"), *T2I[1:]]


def reference_scores(text, rubric):
    """Flow-Factory's reading, re-written from its description: the text before the first '# Summary:'; blocks
    from each line starting 'k.' and holding aspect k's header to the next such line (a later block of the same
    aspect replaces an earlier one); with no such line, the spans between 'Header:' occurrences in rubric order;
    per block the first line with 'Score: V' where V is 'N/A' or starts with a number."""
    body = text.split("# Summary:")[0]
    lines = body.split("\n")
    starts = []
    for i, line in enumerate(lines):
        for k, (key, head) in enumerate(rubric, 1):
            if line.strip().startswith(f"{k}.") and head in line.strip():
                starts.append((i, key))
                break
    blocks = {}
    for j, (i, key) in enumerate(starts):
        end = starts[j + 1][0] if j + 1 < len(starts) else len(lines)
        blocks[key] = "\n".join(lines[i:end])
    if not blocks and f"{rubric[0][1]}:" in body:
        rest = body[body.index(f"{rubric[0][1]}:") + len(rubric[0][1]) + 1 :]
        for (key, _), (_, nxt) in zip(rubric, rubric[1:]):
            at = rest.find(f"{nxt}:")
            blocks[key], rest = (rest, "") if at < 0 else (rest[:at], rest[at + len(nxt) + 1 :])
        blocks[rubric[-1][0]] = rest
    out = {key: None for key, _ in rubric}
    for key, block in blocks.items():
        for line in block.split("\n"):
            m = re.search(r"Score\s*:\s*(.+)$", line.strip(), re.IGNORECASE)
            if m is None:
                continue
            value = m.group(1).strip()
            if value == "N/A":
                out[key] = "N/A"
                break
            n = re.match(r"\s*(\d+(?:\.\d+)?)", value)
            if n:
                out[key] = float(n.group(1))
                break
    return out


def reference_reward(text, rubric, aspects):
    """(mean of the aspects' numeric scores clamped to [1, 4] - 1) / 3; None when there is none."""
    found = reference_scores(text, rubric)
    vals = [min(4.0, max(1.0, found[a])) for a in aspects if isinstance(found[a], float)]
    return None if not vals else (sum(vals) / len(vals) - 1) / 3


def judgement(*scores, headers=T2I, analysis="", summary="# Summary: fine\n"):
    body = "# User Request Analysis\n" + analysis + "the request...\n# Detailed Judgement\n"
    for k, ((_, head), score) in enumerate(zip(headers, scores), 1):
        if score is None:
            continue
        body += f"{k}. {head}:\n## Justification: because.\n## Score: {score}\n"
    return body + summary + "\n# User Request Refinement:\n## Refined Request: a better prompt\n"


T2I_REPLIES = [
    judgement("3.5", "2.25", "N/A"),
    judgement("4", "1", "3.0"),
    judgement("5.2", "0.5", "2"),  # clamped to [1, 4]
    judgement("3.5/4", "3 (minor flaws)", "N/A"),  # a number first, then anything
    judgement("N/A", "N/A", "N/A"),  # nothing usable
    judgement("2.0", None, "3.0"),  # an aspect missing
    judgement("x", "3", "2").replace("## Score: x\n", "## Score: unclear\nFinal score: 3.75\n"),  # a later line
    judgement("1.5", "2.5", "3.5", analysis="1. Text Faithfulness matters. Score: 4\n"),  # a repeated header
    judgement("3", "3", "3", summary="# Summary: 2. Physical and Visual Quality\n## Score: 1\n"),  # after Summary
    "Text Faithfulness: good. Score: 3.2\nPhysical and Visual Quality: ok Score: 2.7\nText Rendering: Score: N/A",
    "text faithfulness: Score: 3",  # neither form: nothing
    "",
]
EDIT_REPLIES = [
    judgement("3.5", "2.0", "3.25", "N/A", headers=EDIT),
    judgement("4", "4", "1", "2", headers=EDIT),
    judgement("1", None, "4.5", "N/A", headers=EDIT),
    "Text Faithfulness: Score: 2\nImage Faithfulness: Score: 4\nPhysical and Visual Quality:\nScore: 3\n",
    judgement("3", "3", "3", "3", headers=T2I),  # the T2I numbering: 2. is not Image Faithfulness
]
ASPECT_SETS = {
    "t2i": [None, ["text_faithfulness"], ["physical_quality", "text_rendering"]],
    "edit": [None, ["image_faithfulness"], ["text_faithfulness", "text_rendering"]],
}


def _images(n, seed=0):
    rng = np.random.default_rng(seed)
    from PIL import Image

    return [Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)) for _ in range(n)]


def _load(name, vlm_dir, **kwargs):
    return rewardzoo.load_reward({"name": name, "model_path": vlm_dir, "kwargs": {"max_new_tokens": 4, **kwargs}})


@pytest.mark.parametrize("aspects", ASPECT_SETS["t2i"], ids=str)
def test_t2i_scores_are_the_references_reading(vlm_dir, aspects):
    reward = _load("rational_rewards", vlm_dir, aspects=aspects, on_failure={"substitute": 0.0})
    reward.backend = CannedBackend(T2I_REPLIES)
    out = reward(prompt=["a sign"] * len(T2I_REPLIES), image=_images(len(T2I_REPLIES)))
    keys = aspects or [k for k, _ in T2I]
    want = [reference_reward(t, T2I, keys) for t in T2I_REPLIES]
    assert [w is None for w in want] == [bool(s) for s in out.extras["substituted"]]
    np.testing.assert_allclose(out.rewards, [0.0 if w is None else w for w in want], rtol=0, atol=1e-12)
    if aspects is None:
        assert want[2] == pytest.approx(((4 + 1 + 2) / 3 - 1) / 3)  # 5.2 and 0.5 clamped, by hand
    for key, _ in T2I:  # the per-aspect extras: clamped numbers, NaN for missing or N/A
        got = out.extras[key]
        ref = [reference_scores(t, T2I)[key] for t in T2I_REPLIES]
        np.testing.assert_array_equal(got, [min(4.0, max(1.0, v)) if isinstance(v, float) else math.nan for v in ref])
    assert out.extras["judgement"] == T2I_REPLIES


@pytest.mark.parametrize("aspects", ASPECT_SETS["edit"], ids=str)
def test_edit_scores_are_the_references_reading_and_the_source_comes_first(vlm_dir, aspects):
    reward = _load("rational_rewards_edit", vlm_dir, aspects=aspects, on_failure={"substitute": 0.0})
    reward.backend = CannedBackend(EDIT_REPLIES)
    sources, edited = _edits(5, n=len(EDIT_REPLIES))
    out = reward(prompt=["make it red"] * len(EDIT_REPLIES), image=edited, condition_images=[[s] for s in sources])
    keys = aspects or [k for k, _ in EDIT]
    want = [reference_reward(t, EDIT, keys) for t in EDIT_REPLIES]
    np.testing.assert_allclose(out.rewards, [0.0 if w is None else w for w in want], rtol=0, atol=1e-12)
    assert [w is None for w in want] == [bool(s) for s in out.extras["substituted"]]
    q = reward.backend.queries[0]
    assert q.images[0].tobytes() == sources[0].tobytes() and q.images[1].tobytes() == edited[0].tobytes()


@pytest.mark.parametrize(("rubric", "replies"), [("t2i", T2I_REPLIES), ("edit", EDIT_REPLIES)])
def test_the_parse_equals_flow_factorys_own(rubric, replies):
    mod = client_module("flow_factory", f"flow_factory.rewards.rational_rewards_{rubric}")
    parse = (
        mod.parse_scores_from_detailed_judgement if rubric == "t2i" else mod.parse_scores_from_detailed_judgement_edit
    )
    for text in replies:
        assert rr.aspect_scores(text, rr.RUBRICS[rubric]) == parse(text)
        for aspects in ASPECT_SETS[rubric]:
            keys = tuple(aspects or rr.RUBRICS[rubric])
            ours = rr.rubric_reward(rr.aspect_scores(text, rr.RUBRICS[rubric]), keys)
            try:
                theirs = mod.aggregate_aspect_scores(parse(text), keys, supported_aspects=mod.SUPPORTED_ASPECTS)
            except ValueError:
                theirs = None
            assert (ours if isinstance(ours, float) else None) == theirs


def test_no_usable_aspect_is_an_error_naming_the_sample(vlm_dir):
    reward = _load("rational_rewards", vlm_dir)
    reward.backend = CannedBackend([T2I_REPLIES[0], T2I_REPLIES[4]])
    with pytest.raises(RewardOutputError, match="no usable score") as exc:
        reward(prompt=["a", "b"], image=_images(2))
    assert exc.value.reward == "rational_rewards" and exc.value.inputs == (1,)
    proc = rewardzoo.RewardProcessor([{"name": "rational_rewards", "model_path": vlm_dir, "batch_size": 4}])
    proc.rewards["rational_rewards"].backend = CannedBackend([T2I_REPLIES[0], T2I_REPLIES[0], ""])
    samples = [rewardzoo.Sample(prompt=p, image=im) for p, im in zip("abc", _images(3))]
    with pytest.raises(RewardOutputError) as exc:
        proc(samples)
    assert exc.value.samples == (2,)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"aspects": ["image_faithfulness"]}, "kwargs.aspects"),  # an edit aspect on the T2I rubric
        ({"aspects": []}, "kwargs.aspects"),
        ({"aspects": "text_rendering"}, "kwargs.aspects"),
        ({"decoding": "beam"}, "kwargs.decoding"),
        ({"temperature": 0}, "kwargs.temperature"),
        ({"num_frames": 4}, "kwargs.num_frames"),
    ],
)
def test_bad_options_are_config_errors(vlm_dir, kwargs, field):
    with pytest.raises(ConfigError) as exc:
        _load("rational_rewards", vlm_dir, **kwargs)
    assert exc.value.field == field


def _png_pixels(url):
    from PIL import Image

    assert url.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))


@pytest.mark.parametrize("rubric", ["t2i", "edit"])
def test_endpoint_sends_flow_factorys_request_and_reads_the_reply(rubric):
    mod = client_module("flow_factory", f"flow_factory.rewards.rational_rewards_{rubric}")
    replies = {"a <image> sign": T2I_REPLIES[0] if rubric == "t2i" else EDIT_REPLIES[0], "b": T2I_REPLIES[1]}
    if rubric == "edit":
        replies["b"] = EDIT_REPLIES[1]
    server = CannedServer(lambda body: replies[_instruction(body)])
    try:
        name = "rational_rewards" if rubric == "t2i" else "rational_rewards_edit"
        model = f"RationalRewards-8B-{'T2I' if rubric == 't2i' else 'Edit'}"
        reward = rewardzoo.load_reward(
            {"name": name, "kwargs": {"backend": "openai", "endpoint": {"url": server.url, "model": model}}}
        )
        prompts = list(replies)
        sources, edited = _edits(7, n=2)
        if rubric == "t2i":
            out = reward(prompt=prompts, image=edited)
        else:
            out = reward(prompt=prompts, image=edited, condition_images=[[s] for s in sources])
        rows = EDIT if rubric == "edit" else T2I
        want = [reference_reward(replies[p], rows, [k for k, _ in rows]) for p in prompts]
        np.testing.assert_allclose(out.rewards, want, rtol=0, atol=1e-12)
        assert reward.io_bound
        bodies = {_instruction(b): b for b in server.bodies}
        for prompt, src, ed in zip(prompts, sources, edited):
            body = bodies[prompt]
            assert body["model"] == model and body["temperature"] == 0.1 and body["max_tokens"] == 2048
            assert set(body) == {"model", "messages", "temperature", "max_tokens"}
            if rubric == "t2i":
                ref = mod.build_scoring_messages(prompt, "IMG")
                shown = [ed]
            else:
                ref = mod.build_scoring_messages_edit(prompt, "IMG", "IMG")
                shown = [src, ed]
            sent = body["messages"]
            assert sent[0] == ref[0]  # the system prompt
            assert [p["type"] for p in sent[1]["content"]] == [p["type"] for p in ref[1]["content"]]
            texts = [p.get("text") for p in sent[1]["content"]]
            assert texts == [p.get("text") for p in ref[1]["content"]]
            urls = [p["image_url"]["url"] for p in sent[1]["content"] if p["type"] == "image_url"]
            for url, im in zip(urls, shown):
                np.testing.assert_array_equal(_png_pixels(url), np.asarray(im))
    finally:
        server.close()


def _instruction(body):
    first = body["messages"][1]["content"][0]["text"]
    return first.split("User Instruction: ", 1)[1].split("\nYou are provided", 1)[0]


def test_greedy_decoding_sends_temperature_zero():
    server = CannedServer(lambda body: T2I_REPLIES[1])
    try:
        reward = rewardzoo.load_reward(
            {
                "name": "rational_rewards",
                "kwargs": {"backend": "openai", "decoding": "greedy", "endpoint": {"url": server.url, "model": "m"}},
            }
        )
        out = reward(prompt=["x"], image=_images(1))
        assert server.bodies[0]["temperature"] == 0 and server.bodies[0]["max_tokens"] == 2048
        assert out.rewards[0] == pytest.approx(reference_reward(T2I_REPLIES[1], T2I, [k for k, _ in T2I]))
    finally:
        server.close()


def test_local_backend_generates_what_transformers_does_on_the_references_messages(vlm_dirs):
    """The reference's messages (system, text / image / text) through the processor's chat template and a greedy
    ``generate`` by transformers alone, against the reward's batch on the same tiny Qwen2.5-VL."""
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForImageTextToText, AutoProcessor

    mod = client_module("flow_factory", "flow_factory.rewards.rational_rewards_t2i")
    path = vlm_dirs["qwen2_5_vl"]
    reward = _load("rational_rewards", path, decoding="greedy", on_failure={"substitute": 0.0})
    images = _images(2, seed=3)
    prompts = ['a sign that says "hi"', "a cat <image> on a mat"]
    out = reward(prompt=prompts, image=images)
    assert list(out.extras["substituted"]) == [1.0, 1.0]  # a random model writes no judgement
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    processor = AutoProcessor.from_pretrained(path)
    for prompt, image, got in zip(prompts, images, out.extras["judgement"]):
        ref = mod.build_scoring_messages(prompt, "IMG")
        messages = [
            {"role": "system", "content": [{"type": "text", "text": ref[0]["content"]}]},
            {
                "role": "user",
                "content": [
                    {"type": "image", "image": image}
                    if p["type"] == "image_url"
                    else {"type": "text", "text": p["text"]}
                    for p in ref[1]["content"]
                ],
            },
        ]
        inputs = processor.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=True, return_dict=True, return_tensors="pt"
        )
        with torch.no_grad():
            ids = model.generate(**inputs, max_new_tokens=4, do_sample=False)
        want = processor.batch_decode(ids[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)[0].strip()
        assert got == want


def test_reference_decoding_is_sampled_locally_as_vllm_would(vlm_dir, monkeypatch):
    from rewardzoo.rewards.models.vlm import backend as backend_module

    reward = _load("rational_rewards", vlm_dir, on_failure={"substitute": 0.0})
    seen = {}
    generate = reward.backend.backbone.generate

    def spy(queries, *, max_new_tokens, pixels, sampling=None):
        seen.update(sampling=sampling, max_new_tokens=max_new_tokens)
        return generate(queries, max_new_tokens=max_new_tokens, pixels=pixels, sampling=sampling)

    monkeypatch.setattr(reward.backend.backbone, "generate", spy)
    reward(prompt=["x"], image=_images(1))
    config = reward.backend.backbone.model.generation_config
    assert seen["sampling"] == backend_module.served_sampling(config, {"temperature": 0.1, "max_tokens": 4})
    assert seen["sampling"]["temperature"] == 0.1 and seen["max_new_tokens"] == 4
