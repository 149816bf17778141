"""Generation judges: parsing tables against the references' own rules (re-implemented here from their published
source), Pref-GRPO's pairwise counting, the failure policy, and the real tiny model end to end."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import pytest

import rewardzoo
from rewardzoo.errors import ConfigError, RewardOutputError
from rewardzoo.rewards.models.vlm.judging import Failure, FailurePolicy, RegexScore, tagged, yes_probability


def flow_grpo_unifiedreward(texts):
    """flow_grpo's unifiedreward_score_sglang after the server: its _extract_scores, then / 5."""
    scores = []
    for text in texts:
        match = re.search(r"Final Score:\s*([1-5](?:\.\d+)?)", text)
        scores.append(float(match.group(1)) if match else 0.0)
    return [s / 5.0 for s in scores]


def pref_grpo_win_rate(n, responses, better_1="Image 1 is better", better_2="Image 2 is better"):
    """Pref-GRPO's _pairwise_win_rate (fastvideo/rewards/unifiedreward_think.py), without its rounding."""
    wins, compares = defaultdict(float), defaultdict(int)
    for (i, j), text in responses:
        compares[i] += 1
        compares[j] += 1
        m = re.search(r"<answer>(.*?)</answer>", text, re.DOTALL)
        final = m.group(1).strip() if m else None
        if final:
            if better_1 in final:
                wins[i] += 1
            elif better_2 in final:
                wins[j] += 1
            else:
                wins[i] += 0.5
                wins[j] += 0.5
        else:
            wins[i] += 0.5
            wins[j] += 0.5
    return [wins[i] / compares[i] if compares[i] else 0.0 for i in range(n)]


class Scripted:
    """A backend that answers with given texts in order (to test parsing and counting, not the model)."""

    def __init__(self, answers):
        self.kind = "openai"
        self.answers = list(answers)
        self.calls = []

    def generate(self, queries, *, max_new_tokens):
        self.calls.append(len(queries))
        out, self.answers = self.answers[: len(queries)], self.answers[len(queries) :]
        return out

    def answer_probs(self, queries, answers):
        out, self.answers = self.answers[: len(queries)], self.answers[len(queries) :]
        return out


UNIFIED_TABLE = [
    "The image matches well. Final Score: 4",
    "Alignment is poor.\nFinal Score:3.5 because of artefacts",
    "Final Score: 10",  # one digit is read: 1 -> 0.2, as in flow_grpo
    "final score: 4",  # case matters: no match
    "Final Score: five",
    "",
    "Final Score: 2 ... later Final Score: 4",
    "Final Score: 0",  # 0 is not in [1-5]: no match
    "I'm sorry, I can't evaluate this image.",
    "Final Score: 5.5",  # matched, but off the 1-5 scale
]


@pytest.fixture(scope="module")
def unified(vlm_dir):
    return rewardzoo.load_reward(
        {
            "name": "unified_reward",
            "model_path": vlm_dir,
            "kwargs": {"on_failure": {"substitute": 0.0}, "max_new_tokens": 8},
        }
    )


def test_unified_reward_parses_as_flow_grpo_on_a_table_of_answers(unified, images):
    expected = flow_grpo_unifiedreward(UNIFIED_TABLE)
    unified.backend, before = Scripted(UNIFIED_TABLE), unified.substitutions
    out = unified(prompt=["a cat"] * len(UNIFIED_TABLE), image=(images * 2)[: len(UNIFIED_TABLE)])
    off_scale = [i for i, t in enumerate(UNIFIED_TABLE) if t.endswith("5.5")]
    agree = [i for i in range(len(UNIFIED_TABLE)) if i not in off_scale]
    np.testing.assert_allclose(out.rewards[agree], np.array(expected)[agree])
    assert expected[off_scale[0]] == pytest.approx(1.1) and out.rewards[off_scale[0]] == 0.0
    failed = [i for i, e in enumerate(expected) if e == 0.0] + off_scale
    assert list(np.flatnonzero(out.extras["substituted"])) == sorted(failed)
    assert out.extras["judgement"] == UNIFIED_TABLE
    assert "no match" in out.extras["failure"][3] and out.extras["failure"][0] == ""
    assert unified.substitutions - before == len(failed)


def test_unparseable_answers_are_errors_naming_the_reward_samples_and_answer_by_default(vlm_dir, images):
    proc = rewardzoo.RewardProcessor([{"name": "unified_reward", "model_path": vlm_dir, "batch_size": 2}])
    reward = proc.loader.instances[0]
    reward.backend = Scripted(["Final Score: 3", "Final Score: 2", "Final Score: 4", "no verdict at all"])
    with pytest.raises(RewardOutputError) as exc:
        proc([{"image": im, "prompt": "a cat"} for im in images[:4]])
    assert exc.value.samples == (3,) and exc.value.reward == "unified_reward"
    assert "'no verdict at all'" in str(exc.value) and "unparseable" in str(exc.value)


def test_substitutions_are_counted_in_the_result(vlm_dir, images):
    proc = rewardzoo.RewardProcessor(
        [{"name": "unified_reward", "model_path": vlm_dir, "kwargs": {"on_failure": {"substitute": 0.0}}}]
    )
    proc.loader.instances[0].backend = Scripted(["Final Score: 3", "???", "Final Score: 5"])
    result = proc([{"image": im, "prompt": "a cat"} for im in images[:3]])
    np.testing.assert_allclose(result.rewards["unified_reward"], [0.6, 0.0, 1.0])
    assert result.substitutions == {"unified_reward": 1}
    np.testing.assert_array_equal(result.extras["unified_reward"]["substituted"], [0, 1, 0])
    assert result.extras["unified_reward"]["judgement"][1] == "???"


THINK_TABLE = [  # the 6 pairs of a group of 4, in order (0,1) (0,2) (0,3) (1,2) (1,3) (2,3)
    "<think>...</think><answer>Image 1 is better</answer>",
    "<think>...</think>\n<answer> Image 2 is better </answer>",
    "<think>both are fine</think><answer>They are equally good</answer>",  # a tie
    "<think>no verdict, the answer is cut by the token limit",  # unparseable
    "<answer>Image 1 is better and Image 2 is better</answer>",  # the first string wins
    "<answer>\nImage 2 is better\n</answer> trailing",
]


def think_reward(vlm_dir, **kwargs):
    return rewardzoo.load_reward({"name": "unified_reward_think", "model_path": vlm_dir, "kwargs": kwargs})


def test_pairwise_judgements_reproduce_pref_grpo_counting(vlm_dir, images):
    reward = think_reward(vlm_dir, on_failure={"substitute": 0.5})
    reward.judge.backend = Scripted(THINK_TABLE)
    out = reward(prompt=["a cat"] * 4, image=images[:4], group_id=[7] * 4)
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    np.testing.assert_allclose(out.rewards, pref_grpo_win_rate(4, list(zip(pairs, THINK_TABLE))))
    assert reward.judge.backend.calls == [6]  # one batch for the group's pairs
    np.testing.assert_array_equal(out.extras["substituted"], [0, 1, 1, 0])  # pair (1, 2)
    np.testing.assert_array_equal(out.extras["tie"], [1, 0, 0, 1])  # pair (0, 3)
    assert reward.substitutions == 1


def test_max_batch_chunks_the_pairs_of_a_group_without_changing_the_counting(vlm_dir, images):
    reward = think_reward(vlm_dir, on_failure={"substitute": 0.5}, max_batch=4)
    reward.judge.backend = Scripted(THINK_TABLE)
    reward.judge.backend.kind = "transformers"
    out = reward(prompt=["a cat"] * 4, image=images[:4], group_id=[7] * 4)
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    np.testing.assert_allclose(out.rewards, pref_grpo_win_rate(4, list(zip(pairs, THINK_TABLE))))
    assert reward.judge.backend.calls == [4, 2]


def test_two_groups_are_judged_separately_and_a_lone_sample_scores_half(vlm_dir, images):
    reward = think_reward(vlm_dir)
    reward.judge.backend = Scripted(["<answer>Image 2 is better</answer>"])
    out = reward(prompt=["a", "b", "a"], image=images[:3], group_id=["g", "h", "g"])
    np.testing.assert_allclose(out.rewards, [0.0, 0.5, 1.0])


def test_an_unparseable_pairwise_answer_is_an_error_naming_both_samples_by_default(vlm_dir, images):
    reward = think_reward(vlm_dir)
    reward.judge.backend = Scripted(
        ["<answer>Image 1 is better</answer>", "I cannot decide.", "<answer>Image 1 is better</answer>"]
    )
    with pytest.raises(RewardOutputError, match="'I cannot decide.'") as exc:
        reward(prompt=["a"] * 3, image=images[:3], group_id=[1] * 3)
    assert exc.value.inputs == (0, 2) and "pairs of samples 0-2" in str(exc.value)


def test_the_think_judge_runs_the_real_model_with_both_images_then_the_prompt(vlm_dir, images):
    proc = rewardzoo.RewardProcessor(
        [
            {
                "name": "unified_reward_think",
                "model_path": vlm_dir,
                "kwargs": {"max_new_tokens": 5, "on_failure": {"substitute": 0.5}},
            }
        ]
    )
    result = proc([{"image": im, "prompt": "a cat", "group_id": 0} for im in images[:3]])
    # a random model writes no <answer> tags: every comparison is substituted, visibly
    np.testing.assert_allclose(result.rewards["unified_reward_think"], [0.5, 0.5, 0.5])
    assert result.substitutions == {"unified_reward_think": 6}  # 3 pairs, each counted for both samples
    judge = proc.loader.instances[0].judge
    query = judge.queries_of(["P"], [[images[0], images[1]]])[0]
    text = judge.backend.backbone.render(query)
    assert text.count("<|image_pad|>") == 2 and text.index("<|image_pad|>") < text.index("P<|im_end|>")


VERDICTS = [
    ("<answer>Video 1 is better</answer>", 1.0),
    ("<answer>Video 2 is better</answer>", 0.0),
    ("<answer>Image 1 is better</answer>", 0.5),
]


@pytest.mark.parametrize("text,expected", VERDICTS)
def test_video_verdicts_read_video_labels(text, expected):
    from rewardzoo.rewards.vlm.unified_reward_think import verdict

    assert verdict(text, "video") == expected


def test_the_video_think_judge_sends_the_frames_of_both_videos_as_images(vlm_dir, video_frames):
    reward = think_reward(vlm_dir, media="video", num_frames=4, max_new_tokens=3, on_failure={"substitute": 0.5})
    assert reward.inputs.fields[:2] == ("prompt", "video") and reward.inputs.num_frames == 4
    out = reward(prompt=["a"] * 2, video=video_frames, group_id=[0, 0])
    np.testing.assert_allclose(out.rewards, [0.5, 0.5])


# -------------------------------------------------------------------------------------------- vlm_judge


def test_vlm_judge_yes_no_equals_vqascore_with_the_same_template(vlm_dir, images, prompts):
    template = 'Does this figure show "{prompt}"? Please answer Yes or No.'
    judge = rewardzoo.load_reward(
        {"name": "vlm_judge", "model_path": vlm_dir, "kwargs": {"template": template, "parse": "yes_no"}}
    )
    vq = rewardzoo.load_reward({"name": "vqascore", "model_path": vlm_dir})
    np.testing.assert_allclose(judge(prompt=prompts, image=images).rewards, vq(prompt=prompts, image=images).rewards)


REGEX_TABLE = [
    ("Score: 7", 6 / 9),
    ("Score:10 great", 1.0),
    ("Score: 1", 0.0),
    ("Score: 11", None),
    ("score 5", None),
    ("Score: 3.5", 2.5 / 9),
    ("Score: -2", None),
]


def test_vlm_judge_regex_rule_maps_the_number_to_0_1_and_refuses_out_of_range(vlm_dir, images):
    judge = rewardzoo.load_reward(
        {
            "name": "vlm_judge",
            "model_path": vlm_dir,
            "kwargs": {
                "template": "Rate {prompt} from 1 to 10. End with 'Score: N'.",
                "parse": {"regex": r"Score:\s*(-?\d+(?:\.\d+)?)", "low": 1, "high": 10},
                "on_failure": {"substitute": 0.0},
            },
        }
    )
    judge.backend = Scripted([t for t, _ in REGEX_TABLE])
    out = judge(prompt=["x"] * len(REGEX_TABLE), image=(images * 2)[: len(REGEX_TABLE)])
    for (text, expected), got, sub in zip(REGEX_TABLE, out.rewards, out.extras["substituted"]):
        assert (sub == 1.0) == (expected is None), text
        assert got == pytest.approx(0.0 if expected is None else expected), text


def test_video_vlm_judge_runs_on_frames(vlm_dir, video_frames):
    judge = rewardzoo.load_reward(
        {
            "name": "video_vlm_judge",
            "model_path": vlm_dir,
            "kwargs": {
                "template": "Is the motion of {prompt} plausible? Yes or No.",
                "parse": "yes_no",
                "mode": "relative",
                "num_frames": 4,
            },
        }
    )
    out = judge(prompt=["a cat", "a dog"], video=video_frames)
    assert np.all((out.rewards > 0) & (out.rewards < 1)) and out.rewards[0] != out.rewards[1]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"parse": "yes_no"}, "set kwargs.template"),
        ({"template": "x {prompt}"}, "set kwargs.template"),
        ({"template": "x {prompt}", "parse": "number"}, "must be 'yes_no' | mapping | null, got 'number'"),
        ({"template": "x {prompt}", "parse": {"regex": "(", "low": 0, "high": 1}}, "not a regular expression"),
        ({"template": "x {prompt}", "parse": {"regex": "no group", "low": 0, "high": 1}}, "no group 1"),
        ({"template": "x {prompt}", "parse": {"regex": "(\\d)", "low": 3, "high": 1}}, "low < high"),
        ({"template": "x {prompt}", "parse": "yes_no", "on_failure": {"substitute": float("nan")}}, "finite number"),
        ({"template": "x {prompt}", "parse": "yes_no", "on_failure": "zero"}, "on_failure must be"),
        ({"template": "x {prompt}", "parse": "yes_no", "backend": "vllm"}, "must be 'transformers' or 'openai'"),
        ({"template": "x {prompt}", "parse": "yes_no", "endpoint": {"url": "http://x"}}, "needs backend: openai"),
        ({"template": "x {prompt}", "parse": "yes_no", "backend": "openai"}, "needs kwargs.endpoint"),
        (
            {
                "template": "x {prompt}",
                "parse": "yes_no",
                "backend": "openai",
                "max_pixels": 10,
                "endpoint": {"url": "http://x", "model": "m"},
            },
            "apply to backend 'transformers' only",
        ),
        (
            {
                "template": "x {prompt}",
                "parse": "yes_no",
                "backend": "openai",
                "endpoint": {"url": "http://x", "model": "m", "tokens": 3},
            },
            "unknown key",
        ),
    ],
)
def test_vlm_judge_configuration_errors_name_the_option(vlm_dir, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        rewardzoo.load_reward({"name": "vlm_judge", "model_path": vlm_dir, "kwargs": kwargs})


# ------------------------------------------------------------------------------------------ the rules


def test_failure_policy_reads_on_failure():
    assert FailurePolicy.from_option(None, owner="x").substitute is None
    assert FailurePolicy.from_option("error", owner="x").substitute is None
    assert FailurePolicy.from_option({"substitute": 0}, owner="x").substitute == 0.0
    with pytest.raises(ConfigError, match="within"):
        FailurePolicy.from_option({"substitute": 2}, owner="x", score_range=(0, 1))
    scores, extras = FailurePolicy(0.25).resolve([0.5, Failure("http", "down"), 1.0], reward="r")
    np.testing.assert_array_equal(scores, [0.5, 0.25, 1.0])
    np.testing.assert_array_equal(extras["substituted"], [0, 1, 0])
    assert extras["failure"] == ["", "http: down", ""]


def test_yes_probability_and_tags():
    assert yes_probability([0.2, 0.6]) == 0.2
    assert yes_probability([0.2, 0.6], mode="relative") == pytest.approx(0.25)
    assert isinstance(yes_probability([0.0, 0.0], mode="relative"), Failure)
    assert tagged("a <answer>\n x </answer> <answer>y</answer>", "answer") == "x"
    assert tagged("<answer>open", "answer") is None
    assert RegexScore(r"(\d+)", low=0, high=4, normalize=True)("got 3 points") == 0.75


def test_the_judge_plugs_into_pairwise_winrate_by_its_python_path(vlm_dir, images):
    reward = rewardzoo.load_reward(
        {
            "name": "pairwise_winrate",
            "kwargs": {
                "judge": "rewardzoo.rewards.vlm.unified_reward_think:UnifiedRewardThinkJudge",
                "judge_kwargs": {"model_path": vlm_dir, "max_new_tokens": 3, "on_failure": {"substitute": 0.5}},
            },
        }
    )
    assert reward.inputs.fields == ("prompt", "image", "group_id") and reward.thread_safe
    reward.judge.backend = Scripted(["<answer>Image 1 is better</answer>"] * 3)
    out = reward(prompt=["a"] * 3, image=images[:3], group_id=[0] * 3)
    np.testing.assert_allclose(out.rewards, [1.0, 0.5, 0.0])
    assert reward.judge.backend.calls == [3]
