"""edit_score's answer reading and failure substitution against EditScore 6e0f1b9's rules, re-computed here.

- ``evaluate`` (the default): ``editscore/utils.py`` ``mllm_output_to_dict`` (re-written below from its steps;
  where it calls ``json_repair``, ``parse_vlm_output_to_dict``'s steps stand in, as the card says);
- ``batch_evaluate`` (``preset: omnigen2_rl``): ``parse_vlm_output_to_dict``, then per dimension an empty score list
  -> ``[score_range / 2]`` (0-25 units), a ``min / 2.5`` outside [0, 10] -> ``score_range / 2`` (0-10 units;
  ``editscore/__init__.py`` 177-187), and the reward server's ``O_score / 10``.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

import rewardzoo
from rewardzoo.errors import ConfigError
from rewardzoo.rewards.models.vlm.judging import Failure
from rewardzoo.rewards.vlm import edit_score as es

from .test_vlm_edit_judges import ANSWERS, PROMPTS, CannedBackend, _edits, reference_parse

RANGE = 25  # EditScore's score_range
DELIM = "||V^=^V||"


def reference_mllm_output_to_dict(s):
    """EditScore 6e0f1b9 ``mllm_output_to_dict(s, give_up_parsing=False, score_range=25)``: a dict, or False."""
    if s.count(DELIM) == 2:
        start, end = s.find(DELIM) + len(DELIM), s.rfind(DELIM)
    else:
        start, end = s.find("{"), s.rfind("}") + 1
        if start == -1 or end == 0:
            start, end = s.find("["), s.rfind("]") + 1
            if re.match(r"^\[\d+, ?\d+\]$", s[start:end]):
                s = json.dumps({"score": json.loads(s[start:end]), "reasoning": "System: output is simply a list"})
            else:
                try:
                    ok = 0 <= int(s) <= 10
                except ValueError:
                    ok = False
                if not ok:
                    return False
                s = json.dumps({"score": [int(s)], "reasoning": "System: output is simply a number"})
            start, end = 0, len(s)
    if start == -1 or end == -1 or start == end:
        return False
    js = s[start:end].strip().replace("\n", "")
    js = js.replace("\u201c", '"').replace("\u201d", '"').replace("\u2018", "'").replace("\u2019", "'")
    try:
        data = json.loads(js)
        if not isinstance(data["score"], list):
            data["score"] = [data["score"]]
        return data
    except Exception:
        return reference_parse(js)  # json_repair in the reference (robust_json_fix)


def evaluate_scores(s):
    """The scores EditScore's ``evaluate`` goes on with, or None where it gives up (False) or would raise."""
    data = reference_mllm_output_to_dict(s)
    if data is False or not isinstance(data, dict):
        return None
    scores = data.get("score")
    if not scores or not all(isinstance(x, (int, float)) for x in scores):
        return None  # min([]) / a non-number: evaluate raises
    return [float(x) for x in scores]


EVALUATE_ANSWERS = [
    *ANSWERS,
    f'Here: {DELIM}{{"reasoning": "a", "score": [5, 6]}}{DELIM} and {{"score": [1, 1]}}',
    "[20, 17]",
    "7",
    "12",
    "  3\n",
    "\u201creasoning\u201d {\u201creasoning\u201d: \u201cok\u201d, \u201cscore\u201d: [20, 18]}",
    '{"reasoning": "line\none", "score": [9,\n 8]}',
    '{"score": "7"}',
    '{"score": [3, true]}',
    '{"reasoning": "ok", "scores": [3, 4]}',
    "} nothing {",
    "I'm sorry, but I can't assist with that request.",
]


@pytest.mark.parametrize("answer", EVALUATE_ANSWERS)
def test_the_default_reads_as_editscores_evaluate(answer):
    expected = evaluate_scores(answer)
    got = es.evaluate_answer(answer)
    if expected is None:
        assert isinstance(got, Failure)
    else:
        assert not isinstance(got, Failure) and got[0] == expected


def test_the_two_readings_differ_where_editscore_s_do():
    # no JSON: evaluate gives up, batch_evaluate reads every number; the delimited object vs the widest braces
    assert isinstance(es.evaluate_answer("the edit looks fine: 21 and 19"), Failure)
    assert reference_parse("the edit looks fine: 21 and 19")["score"] == [21.0, 19.0]
    both = f'{DELIM}{{"score": [5, 6]}}{DELIM} {{"score": [1, 1]}}'
    assert es.evaluate_answer(both)[0] == [5.0, 6.0] and min(reference_parse(both)["score"]) == 1.0


def _reward(vlm_dirs, **kwargs):
    return rewardzoo.load_reward(
        {"name": "edit_score", "model_path": vlm_dirs["qwen2_5_vl"], "kwargs": {"max_new_tokens": 8, **kwargs}}
    )


def _run(reward, sc, pq):
    reward.backend = CannedBackend(sc + pq)
    sources, edited = _edits(3, n=len(sc))
    return reward(prompt=(PROMPTS * len(sc))[: len(sc)], image=edited, condition_images=[[s] for s in sources])


SC = ['{"reasoning": "a", "score": [20, 15]}', "the edit looks fine: 21 and 19", "nothing"]
PQ = ['{"reasoning": "b", "score": []}', '{"reasoning": "c", "score": [10, 22.5]}', "7"]


@pytest.mark.parametrize("value", [5.0, 0.0, 8.5])
def test_default_substitutes_the_failed_dimension_on_the_0_10_scale(vlm_dirs, value):
    out = _run(_reward(vlm_dirs, on_failure={"substitute": value}), SC, PQ)
    expected, marks = [], []
    for sc, pq in zip(SC, PQ):
        dims = [evaluate_scores(a) for a in (sc, pq)]
        values = [value if d is None else min(d) / (RANGE / 10) for d in dims]
        expected.append(math.sqrt(values[0] * values[1]))
        marks.append(float(None in dims))
    np.testing.assert_allclose(out.rewards, expected)
    assert list(out.extras["substituted"]) == marks == [1.0, 1.0, 1.0]
    np.testing.assert_allclose(out.extras["perceptual_quality"], [value, 4.0, 7 / 2.5])
    np.testing.assert_allclose(out.extras["semantic_consistency"], [6.0, value, value])


def batch_evaluate_reward(sc_answer, pq_answer):
    """EditScore 6e0f1b9 ``batch_evaluate`` (one pass) then the OmniGen2-RL reward server's ``O_score / 10``."""
    dims = []
    for answer in (sc_answer, pq_answer):
        scores = reference_parse(answer)["score"] or [RANGE / 2]
        value = min(scores) / (RANGE / 10)
        dims.append(RANGE / 2 if value < 0 or value > 10 else value)
    return math.sqrt(dims[0] * dims[1]) / 10


def test_omnigen2_rl_substitutes_as_batch_evaluate_before_the_division(vlm_dirs):
    reward = _reward(vlm_dirs, preset="omnigen2_rl", on_failure={"substitute": 5.0})  # 12.5 / 2.5
    sc = ['{"reasoning": "a", "score": [20, 15]}', "the edit looks fine: 21 and 19", '{"score": []}']
    pq = ['{"reasoning": "b", "score": []}', '{"score": [10, 22.5]}', ""]
    out = _run(reward, sc, pq)
    np.testing.assert_allclose(out.rewards, [batch_evaluate_reward(a, b) for a, b in zip(sc, pq)])
    assert list(out.extras["substituted"]) == [1.0, 0.0, 1.0]
    assert out.rewards[2] == pytest.approx(0.5)  # both substituted: sqrt(5 * 5) / 10


def test_omnigen2_rl_out_of_range_takes_the_substitute_not_batch_evaluates_12_5(vlm_dirs):
    reward = _reward(vlm_dirs, preset="omnigen2_rl", on_failure={"substitute": 5.0})
    sc, pq = ['{"score": [30, 40]}'], ['{"score": [20, 20]}']
    out = _run(reward, sc, pq)
    assert out.rewards[0] == pytest.approx(math.sqrt(5.0 * 8.0) / 10)
    assert batch_evaluate_reward(sc[0], pq[0]) == pytest.approx(math.sqrt(12.5 * 8.0) / 10)  # the reference's slip


@pytest.mark.parametrize("preset", [None, "omnigen2_rl"])
def test_the_substitute_is_read_on_0_10_on_every_preset(vlm_dirs, preset):
    with pytest.raises(ConfigError, match=r"within \[0.0, 10.0\]") as err:
        _reward(vlm_dirs, preset=preset, on_failure={"substitute": 12.5})
    assert err.value.field == "kwargs.on_failure"
    out = _run(_reward(vlm_dirs, preset=preset, on_failure={"substitute": 10.0}), ["nothing"], ["nothing"])
    assert out.rewards[0] == pytest.approx(10.0 / (10.0 if preset else 1.0))
