"""``ocr`` with ``engine: vlm`` against verl-omni a1139ba's ``genrm_ocr.py``: the transcription comes from a VLM (its
question, system turn and sampling), then the edit-distance score.

- an endpoint (a canned chat-completions server returning known transcriptions): the request is verl-omni's and
  the score its ``_levenshtein_score`` formula, re-computed here (and by its own function when the snapshot's file
  imports) on the server's text;
- a local tiny Qwen-VL: the request sampled as vLLM would sample it, the score the formula on the model's text;
- an empty transcription, and the OCR engines' options given to ``engine: vlm``, are errors.
"""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
from PIL import Image

import rewardzoo
from rewardzoo.errors import ConfigError, RewardOutputError
from tests.clients import SHARED

from .canned_server import CannedServer

Levenshtein = pytest.importorskip("Levenshtein")

QUESTION = "Please output only the text content from the image without any additional descriptions or formatting."
PROMPTS = ['a sign that says "Open 24 Hours"', 'a mug with "Good Morning" on it', 'a poster: "SALE"', "a shop front"]
READS = ["OPEN\n24 HOURS\nevery day", "Good Mornin", "S A L E\tnow", "nothing to read here at all"]


def verl_omni_score(text, ground_truth):
    """verl-omni's ``_levenshtein_score``, re-written: whitespace removed, lower-cased, 0 distance when the truth
    occurs in the text, else the Levenshtein distance capped at the truth's length; ``1 - d / len``."""
    gt, tx = re.sub(r"\s+", "", ground_truth).lower(), re.sub(r"\s+", "", text).lower()
    d = 0 if gt in tx else min(Levenshtein.distance(tx, gt), len(gt))
    return 1 - d / len(gt)


def _quoted(prompt):
    return prompt.split('"')[1] if '"' in prompt else prompt


def _images(n):
    rng = np.random.default_rng(11)
    return [Image.fromarray(rng.integers(0, 256, (32, 40 + 8 * i, 3), dtype=np.uint8)) for i in range(n)]


@pytest.fixture
def server():
    by_image = {}
    srv = CannedServer(lambda body: by_image[body["messages"][1]["content"][0]["image_url"]["url"]])
    srv.by_image = by_image
    yield srv
    srv.close()


def _endpoint_reward(server, images, reads, **kwargs):
    from rewardzoo.rewards.models.vlm.endpoint import image_data_url

    for im, text in zip(images, reads):
        server.by_image[image_data_url(im)] = text
    options = {"engine": "vlm", "backend": "openai", "endpoint": {"url": server.url, "model": "qwen3-vl"}, **kwargs}
    return rewardzoo.load_reward({"name": "ocr", "kwargs": options})


def test_endpoint_score_is_verl_omnis_formula_on_the_transcription(server):
    images = _images(len(PROMPTS))
    reward = _endpoint_reward(server, images, READS)
    out = reward(prompt=PROMPTS, image=images)
    want = [verl_omni_score(t, _quoted(p)) for t, p in zip(READS, PROMPTS)]
    np.testing.assert_allclose(out.rewards, want, rtol=0, atol=1e-12)
    assert want[0] == 1.0 and 0 < want[1] < 1 and want[2] == 1.0  # containment across lines and tabs; a near miss
    assert out.extras["ocr_text"] == READS and reward.io_bound
    path = SHARED / "verl_omni_src" / "verl_omni" / "utils" / "reward_score" / "genrm_ocr.py"
    if path.is_file():
        spec = importlib.util.spec_from_file_location("_genrm_ocr", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except ImportError as exc:
            pytest.skip(f"verl-omni's genrm_ocr.py does not import here: {exc}")
        np.testing.assert_allclose(
            out.rewards, [module._levenshtein_score(t, _quoted(p)) for t, p in zip(READS, PROMPTS)], atol=1e-12
        )
        assert module.DEFAULT_GRM_PROMPT == QUESTION and module.DEFAULT_SAMPLING_PARAMS == {
            "temperature": 0.7,
            "top_p": 0.8,
            "max_tokens": 4096,
        }


def test_the_request_is_verl_omnis(server):
    images = _images(2)
    reward = _endpoint_reward(server, images, READS[:2])
    reward(prompt=PROMPTS[:2], image=images)
    for body in server.bodies:
        assert body["model"] == "qwen3-vl"
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.7, 0.8, 4096)
        system, user = body["messages"]
        assert system == {"role": "system", "content": "You are a helpful assistant."}
        assert [p["type"] for p in user["content"]] == ["image_url", "text"]
        assert user["content"][1]["text"] == QUESTION
        assert user["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    server.bodies.clear()
    reward = _endpoint_reward(server, images, READS[:2], sampling={"seed": 3, "max_tokens": 64})
    reward(prompt=PROMPTS[:1], image=images[:1])
    assert {k: server.bodies[0][k] for k in ("temperature", "top_p", "max_tokens", "seed")} == {
        "temperature": 0.7,
        "top_p": 0.8,
        "max_tokens": 64,
        "seed": 3,
    }


def test_an_empty_transcription_is_an_error_naming_the_sample(server):
    images = _images(3)
    reward = _endpoint_reward(server, images, ["Open 24 Hours", "  \n", "SALE"])
    with pytest.raises(RewardOutputError, match="transcription is empty") as exc:
        reward(prompt=PROMPTS[:3], image=images)
    assert exc.value.reward == "ocr" and exc.value.inputs == (1,)
    lenient = _endpoint_reward(server, images, ["Open 24 Hours", "", "SALE"], on_failure={"substitute": 0.0})
    out = lenient(prompt=PROMPTS[:3], image=images)
    assert list(out.rewards) == [1.0, 0.0, 1.0] and list(out.extras["substituted"]) == [0.0, 1.0, 0.0]


def test_local_qwen_vl_scores_its_own_transcription_sampled_as_vllm_would(vlm_dir, monkeypatch):
    from rewardzoo.rewards.models.vlm.backend import served_sampling

    proc = rewardzoo.RewardProcessor(
        [
            {
                "name": "ocr",
                "model_path": vlm_dir,
                "kwargs": {"engine": "vlm", "sampling": {"max_tokens": 6}, "on_failure": {"substitute": 0.0}},
            }
        ]
    )
    reader = proc.rewards["ocr"].reader
    seen = {}
    generate = reader.backend.backbone.generate

    def spy(queries, *, max_new_tokens, pixels, sampling=None):
        seen.update(sampling=sampling, max_new_tokens=max_new_tokens, queries=queries)
        return generate(queries, max_new_tokens=max_new_tokens, pixels=pixels, sampling=sampling)

    monkeypatch.setattr(reader.backend.backbone, "generate", spy)
    images = _images(3)
    result = proc([rewardzoo.Sample(prompt=p, image=im) for p, im in zip(PROMPTS, images)])
    config = reader.backend.backbone.model.generation_config
    assert seen["sampling"] == served_sampling(config, {"temperature": 0.7, "top_p": 0.8, "max_tokens": 6})
    assert seen["max_new_tokens"] == 6
    q = seen["queries"][0]
    assert q.system == "You are a helpful assistant." and q.content[1] == QUESTION and len(q.images) == 1
    texts = result.extras["ocr"]["ocr_text"]
    subs = result.extras["ocr"]["substituted"]
    want = [0.0 if s else verl_omni_score(t, _quoted(p)) for t, p, s in zip(texts, PROMPTS, subs)]
    np.testing.assert_allclose(result.rewards["ocr"], want, atol=1e-6)


@pytest.mark.parametrize(
    ("name", "kwargs", "field"),
    [
        ("ocr", {"det_db_thresh": 0.2}, "kwargs.det_db_thresh"),
        ("ocr", {"threads": 2}, "kwargs.threads"),
        ("ocr", {"sampling": {"temperature": 0.7, "beam": 2}}, "kwargs.sampling"),
        ("ocr", {"sampling": {"top_p": 1.5}}, "kwargs.sampling"),
        ("ocr", {"question": 3}, "kwargs.question"),
        ("ocr", {"min_pixel": 5}, "kwargs.min_pixel"),
        ("video_ocr", {}, "kwargs.engine"),
    ],
)
def test_bad_options_are_config_errors(name, kwargs, field):
    options = {"engine": "vlm", "backend": "openai", "endpoint": {"url": "http://127.0.0.1:9/v1", "model": "m"}}
    with pytest.raises(ConfigError) as exc:
        rewardzoo.load_reward({"name": name, "kwargs": {**options, **kwargs}})
    assert exc.value.field == field
