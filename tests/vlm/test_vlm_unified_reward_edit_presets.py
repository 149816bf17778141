"""unified_reward_edit's Pref-GRPO presets (3e787f6) against Pref-GRPO's reading and advantage re-computed here:
the pointwise ``preset: pref_grpo`` (four streams, each group-normalised, from two answers per edit), the pairwise
rank prompt and its verdicts, and the signed default reading of the pairwise-score answers."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import rewardzoo
from rewardzoo.errors import ConfigError
from rewardzoo.rewards.vlm import unified_reward_edit as ure

from .test_vlm_edit_judges import CannedBackend, _edits

# Pref-GRPO 3e787f6, fastvideo/rewards/templates.py get_unifiedreward_edit_pairwise_template() (the release's
# edit_pairwise_rank.py prompt), the first and last lines.
RANK_FIRST = (
    "You are tasked with comparing two edited images and determining which one is better based on the given "
    "criteria.\n\nThe evaluation will consider how well each model executed the instructions"
)
RANK_LAST = (
    "### Final Output:\nBased on the above evaluation, determine which edited image is better.\n\nText instruction - "
)


def pref_grpo_scores(text):
    """Pref-GRPO's ``_parse_scores`` re-written from its description: the text as JSON (a dict; or a JSON string,
    unwrapped), else its first-{ to last-} span as JSON; its ``score`` list's first two values as floats; else
    [0, 0]."""
    text = text.strip()
    try:
        obj = json.loads(text)
        if isinstance(obj, str):
            text, obj = obj.strip(), None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        m = re.search(r"\{.*\}", text, re.DOTALL)
        try:
            obj = json.loads(m.group(0)) if m else None
        except ValueError:
            obj = None
    s = obj.get("score") if isinstance(obj, dict) else None
    try:
        return [float(s[0]), float(s[1])] if isinstance(s, list) and len(s) >= 2 else [0.0, 0.0]
    except (TypeError, ValueError):
        return [0.0, 0.0]


SC = [
    '{"reasoning": "ok", "score": [20, 15]}',
    'Sure. {"reasoning": "meh", "score": [12.5, -3]}',  # a minus sign JSON keeps
    '{\n\n"reasoning" : "x",\n"score" : [25, 25],\n}',  # the release's format, trailing comma: not JSON -> [0, 0]
    "no json at all",
]
PQ = [
    '{"reasoning": "a", "score": [10, 22.5]}',
    '{"reasoning": "b", "score": [24, 21]}',
    '{"score": [5]}',  # fewer than two -> [0, 0]
    '{"reasoning": "d", "score": ["7", 8]}',
]


def test_the_parse_is_pref_grpos():
    for text in SC + PQ + ['"{\\"score\\": [1, 2]}"', "{bad}", '{"score": [null, 2]}']:
        assert ure.pref_grpo_pair(text) == pref_grpo_scores(text)


def _dispatcher(sc, pq, if_weights, quality_weights, reward_weights, apply_gdpo):
    """Pref-GRPO 3e787f6 ``compute_weighted_advantages`` (``dispatcher.py`` 616-702) re-computed for one group
    (``use_group``): per reward ``(w0 adv0 + w1 adv1) / (w0 + w1)``, ``adv`` = ``(x - mean) / (unbiased std +
    1e-8)``, weighted by ``--reward_spec``; with ``apply_gdpo`` the sum renormalised over the (gathered) batch."""

    def adv(x):
        return (x - x.mean()) / (x.std(ddof=1) + 1e-8)

    following = (if_weights[0] * adv(sc[:, 0]) + if_weights[1] * adv(sc[:, 1])) / sum(if_weights)
    quality = (quality_weights[0] * adv(pq[:, 0]) + quality_weights[1] * adv(pq[:, 1])) / sum(quality_weights)
    total = reward_weights[0] * following + reward_weights[1] * quality
    return (total - total.mean()) / (total.std(ddof=1) + 1e-8) if apply_gdpo else total


@pytest.mark.parametrize(
    "preset, advantage, want_of",
    [
        # its code's defaults: EDIT_*_WEIGHT_* 1 / 1, both rewards weighted 1, no renormalisation
        ("pref_grpo_defaults", "sum", lambda sc, pq: _dispatcher(sc, pq, (1, 1), (1, 1), (1, 1), False)),
        # its script (lora_ur_edit_point_flux2_klein_edit.sh): 0.6 / 0.4 and 0.6 / 0.4, rewards 0.5 / 0.5, apply_gdpo
        ("pref_grpo", "pref_grpo", lambda sc, pq: _dispatcher(sc, pq, (0.6, 0.4), (0.6, 0.4), (0.5, 0.5), True)),
    ],
)
def test_pointwise_preset_gives_pref_grpos_advantage(vlm_dirs, preset, advantage, want_of):
    entry = {
        "name": "unified_reward_edit",
        "model_path": vlm_dirs["qwen2_5_vl"],
        "batch_size": 8,
        "kwargs": {"preset": preset, "max_new_tokens": 8},
    }
    proc = rewardzoo.RewardProcessor([entry], advantage=advantage)
    reward = proc.rewards["unified_reward_edit"]
    reward.backend = CannedBackend(SC + PQ)
    sources, edited = _edits(3, n=4)
    samples = [
        {"prompt": "add a hat", "image": e, "condition_images": [s], "group_id": 0} for s, e in zip(sources, edited)
    ]
    result = proc(samples)
    assert len(reward.backend.queries) == 8  # two answers per edit, once
    sc = np.array([pref_grpo_scores(t) for t in SC])
    pq = np.array([pref_grpo_scores(t) for t in PQ])
    np.testing.assert_allclose(result.advantages(), want_of(sc, pq), rtol=1e-5, atol=1e-5)
    streams = result.streams["unified_reward_edit"]
    np.testing.assert_allclose(streams["overedit"], sc[:, 1])
    np.testing.assert_allclose(streams["naturalness"], pq[:, 0])
    np.testing.assert_allclose(
        result.rewards["unified_reward_edit"], np.clip((sc.sum(1) + pq.sum(1)) / 4 / 2.5, 0, 10), rtol=1e-6
    )


def test_default_pointwise_reports_the_four_raw_numbers_as_streams(vlm_dirs):
    reward = rewardzoo.load_reward(
        {
            "name": "unified_reward_edit",
            "model_path": vlm_dirs["qwen2_5_vl"],
            "kwargs": {"max_new_tokens": 8, "on_failure": {"substitute": 0.0}},
        }
    )
    reward.backend = CannedBackend(SC[:2] + PQ[:2])
    sources, edited = _edits(4)
    out = reward(prompt=["a", "b"], image=edited, condition_images=[[s] for s in sources])
    assert list(out.extras["success"]) == [20, 12.5] and list(out.extras["artifacts"]) == [22.5, 21]
    assert list(out.extras["overedit"]) == [15, -3]  # the raw numbers, while the score substitutes the -3 answer


RANK_ANSWERS = [
    "<think>...</think><answer>Edited image 1 is better</answer>",
    "<answer>edited image 2 is better</answer>",
    "<answer>Both are fine</answer> but overall Edited image 2 is better",  # not in the tag: the whole answer
    "I cannot decide.",  # neither: a tie
]


def pref_grpo_rank(text):
    """Pref-GRPO's ``_pairwise_win_rate`` verdict for one answer (1: the first edit wins, 0: the second, 0.5)."""
    m = re.search(r"<answer>(.*?)</answer>", text, re.DOTALL | re.IGNORECASE)
    final = m.group(1).strip() if m else text.strip()
    if not final:
        return 0.5
    for where in (final, text):
        if "edited image 1 is better" in where.lower():
            return 1.0
        if "edited image 2 is better" in where.lower():
            return 0.0
    return 0.5


@pytest.mark.parametrize("text", [*RANK_ANSWERS, "", "<answer></answer> Edited image 1 is better"])
def test_rank_verdicts_are_pref_grpos(text):
    assert ure.rank_verdict(text) == pref_grpo_rank(text)


def test_pairwise_pref_grpo_preset_sends_the_rank_prompt_and_reads_the_verdict(vlm_dirs):
    proc = rewardzoo.RewardProcessor(
        [
            {
                "name": "pw",
                "reward_model": "unified_reward_edit_pairwise",
                "model_path": vlm_dirs["qwen2_5_vl"],
                "kwargs": {"preset": "pref_grpo", "max_new_tokens": 8},
            }
        ]
    )
    judge = proc.rewards["pw"].judge
    judge.backend = CannedBackend(RANK_ANSWERS[:3])
    sources, edited = _edits(7, n=3)
    samples = [{"prompt": "add a hat", "image": e, "condition_images": [sources[0]], "group_id": 0} for e in edited]
    res = proc(samples)
    # pairs (0, 1): 0 wins; (0, 2): 2 wins; (1, 2): 2 wins -> wins 1, 0, 2 over 2 comparisons each
    np.testing.assert_allclose(res.rewards["pw"], [0.5, 0.0, 1.0])
    text = judge.backend.queries[0].content[-1]
    assert text.startswith(RANK_FIRST) and text.endswith(RANK_LAST + "add a hat\n")


def test_pairwise_scores_are_read_with_their_sign_by_default_and_unsigned_by_the_release_preset():
    answer = "Edited image 1: -2.5, edited image 2: 1.5"
    assert ure.pairwise_verdict(answer) == 0.0  # -2.5 < 1.5
    assert ure.pairwise_verdict(answer, ure.DECIMAL) == 1.0  # the release reads 2.5 > 1.5
    with pytest.raises(ConfigError, match="preset"):
        ure.UnifiedRewardEditJudge(preset="pref")
