"""group_rank, pairwise_winrate, group_normalized: formulas, grouping, base sharing, bad input.

References: hand-computed groups, scipy.stats.rankdata (ranks), a double loop over pairs with
math.exp (Bradley-Terry win rate), torch.std (group normalisation), PIL JPEG sizes (real base).
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
import torch
from PIL import Image
from scipy.stats import rankdata

from rewardzoo import load_reward
from rewardzoo.core.loader import RewardLoader
from rewardzoo.core.processor import RewardProcessor
from rewardzoo.errors import ConfigError, InputError, RegistryError, RewardExecutionError, RewardOutputError

from .judges import MetaJudge
from .rewards import meta_samples


def run(spec: dict, samples, loader=None):
    proc = RewardProcessor([{"name": "g", **spec}], loader or RewardLoader())
    return proc, proc(samples)


def scores(spec: dict, groups):
    return run(spec, meta_samples(groups))[1].rewards["g"].astype(np.float64)


RANK = {"reward_model": "group_rank", "kwargs": {"base": "group_test_meta"}}
WIN = {"reward_model": "pairwise_winrate", "kwargs": {"base": "group_test_meta"}}
NORM = {"reward_model": "group_normalized", "kwargs": {"base": "group_test_meta"}}


def with_kwargs(spec, **kw):
    return {**spec, "kwargs": {**spec["kwargs"], **kw}}


# ---------------------------------------------------------------- hand-computed groups
@pytest.mark.parametrize(
    "values, expected",
    [
        ([3.0, 1.0, 2.0], [1.0, 0.0, 0.5]),
        ([1.0, 2.0, 2.0, 3.0], [0.0, 0.5, 0.5, 1.0]),  # tie: ranks 1 and 2 -> 1.5 each, / 3
        ([5.0, 5.0, 1.0, 5.0], [2 / 3, 2 / 3, 0.0, 2 / 3]),  # three-way tie for ranks 1..3 -> 2, / 3
        ([7.0], [0.5]),  # group of one
        ([2.0, 2.0, 2.0], [0.5, 0.5, 0.5]),  # equal scores
    ],
)
def test_group_rank_hand(values, expected):
    got = scores(RANK, [(0, v) for v in values])
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize(
    "values, expected",
    [
        ([3.0, 1.0, 2.0], [1.0, 0.0, 0.5]),
        ([1.0, 1.0, 2.0], [0.25, 0.25, 1.0]),  # tie = 0.5 win each: (0.5 + 0) / 2
        ([4.0, 4.0, 4.0, 4.0], [0.5] * 4),
        ([9.0], [0.5]),
        ([0.0, 10.0, 5.0, 5.0], [0.0, 1.0, 0.5, 0.5]),
    ],
)
def test_pairwise_winrate_hard_hand(values, expected):
    got = scores(WIN, [(0, v) for v in values])
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_pairwise_winrate_soft_hand():
    # scores 0, ln 3 with temperature 1: P(second beats first) = sigmoid(ln 3) = 3/4
    got = scores(with_kwargs(WIN, mode="soft"), [(0, 0.0), (0, math.log(3.0))])
    np.testing.assert_allclose(got, [0.25, 0.75], rtol=1e-6)
    # temperature 2 halves the logit: sigmoid(ln 3 / 2) = sqrt3 / (1 + sqrt3)
    got = scores(with_kwargs(WIN, mode="soft", temperature=2.0), [(0, 0.0), (0, math.log(3.0))])
    p = math.sqrt(3) / (1 + math.sqrt(3))
    np.testing.assert_allclose(got, [1 - p, p], rtol=1e-6)


@pytest.mark.parametrize(
    "ddof, eps, values, expected",
    [
        (0, 1e-4, [1.0, 2.0, 3.0], [-1 / (math.sqrt(2 / 3) + 1e-4), 0.0, 1 / (math.sqrt(2 / 3) + 1e-4)]),
        (1, 1e-8, [1.0, 2.0, 3.0], [-1 / (1 + 1e-8), 0.0, 1 / (1 + 1e-8)]),
        (0, 1e-4, [2.0, 2.0, 2.0], [0.0, 0.0, 0.0]),  # equal scores
        (0, 1e-4, [4.0], [0.0]),  # group of one
        (1, 1e-8, [4.0], [0.0]),  # ddof 1: no spread defined -> 0
        (0, 1e-4, [0.0, 4.0], [-2 / (2 + 1e-4), 2 / (2 + 1e-4)]),
    ],
)
def test_group_normalized_hand(ddof, eps, values, expected):
    got = scores(with_kwargs(NORM, ddof=ddof, eps=eps), [(0, v) for v in values])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- independent references, mixed batches
def random_batch(rng, sizes, ties=False):
    """Interleaved groups of the given sizes (group ids 10, 11, ...), shuffled across the batch."""
    items = []
    for g, n in enumerate(sizes):
        vals = rng.integers(0, 4, n).astype(float) if ties else rng.normal(size=n)
        items += [(10 + g, float(v)) for v in vals]
    order = rng.permutation(len(items))
    return [items[i] for i in order]


def per_group(items, fn):
    out = np.empty(len(items))
    for g in {gid for gid, _ in items}:
        idx = [i for i, (gid, _) in enumerate(items) if gid == g]
        out[idx] = fn(np.array([items[i][1] for i in idx]))
    return out


def ref_rank(v):
    return np.full(1, 0.5) if len(v) == 1 else (rankdata(v, method="average") - 1) / (len(v) - 1)


def ref_winrate(v, temperature=1.0, soft=False):
    n = len(v)
    if n == 1:
        return np.full(1, 0.5)
    out = []
    for i in range(n):
        wins = 0.0
        for j in range(n):
            if i == j:
                continue
            if soft:
                wins += 1 / (1 + math.exp(-(v[i] - v[j]) / temperature))
            else:
                wins += 1.0 if v[i] > v[j] else 0.5 if v[i] == v[j] else 0.0
        out.append(wins / (n - 1))
    return np.array(out)


def ref_norm(v, ddof, eps):
    t = torch.tensor(v, dtype=torch.float64)
    if len(v) <= ddof:
        return np.zeros(len(v))
    return ((t - t.mean()) / (t.std(correction=ddof) + eps)).numpy()


SIZES = [[4, 1, 7], [16, 3, 2, 5], [1, 1, 9]]


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("ties", [False, True])
def test_rank_matches_scipy(rng, sizes, ties):
    items = random_batch(rng, sizes, ties)
    np.testing.assert_allclose(scores(RANK, items), per_group(items, ref_rank), rtol=1e-6)


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("mode, temperature", [("hard", 1.0), ("soft", 1.0), ("soft", 0.3)])
def test_winrate_matches_pair_loop(rng, sizes, mode, temperature):
    items = random_batch(rng, sizes, ties=(mode == "hard"))
    got = scores(with_kwargs(WIN, mode=mode, temperature=temperature), items)
    ref = per_group(items, lambda v: ref_winrate(v, temperature, soft=(mode == "soft")))
    np.testing.assert_allclose(got, ref, rtol=1e-5)


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("ddof, eps", [(0, 1e-4), (1, 1e-8)])
def test_normalized_matches_torch(rng, sizes, ddof, eps):
    items = random_batch(rng, sizes)
    got = scores(with_kwargs(NORM, ddof=ddof, eps=eps), items)
    np.testing.assert_allclose(got, per_group(items, lambda v: ref_norm(v, ddof, eps)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec", [RANK, WIN, NORM], ids=["rank", "winrate", "norm"])
def test_output_follows_input_order(rng, spec):
    items = random_batch(rng, [5, 3, 6])
    base = scores(spec, items)
    for _ in range(3):
        perm = rng.permutation(len(items))
        np.testing.assert_allclose(scores(spec, [items[i] for i in perm]), base[perm], rtol=1e-6)


@pytest.mark.parametrize("spec", [RANK, WIN, NORM], ids=["rank", "winrate", "norm"])
def test_group_ids_int_and_str_are_distinct_groups(spec):
    a = scores(spec, [(1, 0.0), ("1", 5.0), (1, 1.0), ("1", 4.0)])
    b = scores(spec, [(1, 0.0), (2, 5.0), (1, 1.0), (2, 4.0)])
    np.testing.assert_allclose(a, b)


def test_direct_call_with_several_groups_matches_processor(rng):
    items = random_batch(rng, [4, 2, 3])
    reward = load_reward("group_rank", base="group_test_meta")
    out = reward(metadata=[json.dumps({"score": s}) for _, s in items], group_id=[g for g, _ in items])
    np.testing.assert_allclose(out.rewards, per_group(items, ref_rank))
    np.testing.assert_allclose(out.extras["base_score"], [s for _, s in items])


# ---------------------------------------------------------------- base evaluations, sharing, conversion
@pytest.mark.parametrize("spec", [RANK, WIN, NORM], ids=["rank", "winrate", "norm"])
@pytest.mark.parametrize("sizes", [[4], [16, 1, 5], [64, 7]])
def test_base_evaluated_once_per_sample(rng, spec, sizes):
    proc, _ = run(spec, meta_samples(random_batch(rng, sizes)))
    base = proc.rewards["g"].base
    assert sorted(base.calls) == sorted(sizes)  # one call per group, n inputs each (not n^2)


def test_base_batch_size_chunks_calls(rng):
    spec = with_kwargs(WIN, base={"reward_model": "group_test_meta", "batch_size": 4})
    items = random_batch(rng, [10, 3])
    proc, res = run(spec, meta_samples(items))
    assert sorted(proc.rewards["g"].base.calls) == [2, 3, 4, 4]
    np.testing.assert_allclose(res.rewards["g"], per_group(items, ref_winrate), rtol=1e-6)


def test_base_shares_instance_with_other_streams():
    loader = RewardLoader()
    proc = RewardProcessor(
        [
            {"name": "meta", "reward_model": "group_test_meta", "kwargs": {"offset": 1.0}},
            {
                "name": "rank",
                "reward_model": "group_rank",
                "kwargs": {"base": {"reward_model": "group_test_meta", "kwargs": {"offset": 1.0}}},
            },
            {
                "name": "win",
                "reward_model": "pairwise_winrate",
                "kwargs": {"base": {"reward_model": "group_test_meta", "kwargs": {"offset": 1.0}}},
            },
            {"name": "other", "reward_model": "group_normalized", "kwargs": {"base": "group_test_meta"}},
        ],
        loader,
    )
    meta = proc.rewards["meta"]
    assert proc.rewards["rank"].base is meta and proc.rewards["win"].base is meta
    assert proc.rewards["other"].base is not meta  # different kwargs, different identity
    assert loader.constructions == 5  # two bases + three wrappers
    res = proc(meta_samples([(0, 1.0), (0, 3.0)]))
    np.testing.assert_allclose(res.rewards["meta"], [2.0, 4.0])
    np.testing.assert_allclose(res.rewards["rank"], [0.0, 1.0])


def test_base_inherits_device_and_dtype_unless_set():
    loader = RewardLoader()
    inherit = loader.load(
        {
            "name": "a",
            "reward_model": "group_rank",
            "dtype": "bfloat16",
            "device": "cpu",
            "kwargs": {"base": "group_test_meta"},
        }
    )
    assert inherit.base.dtype_name == "bfloat16" and inherit.base.device == "cpu"
    own = loader.load(
        {
            "name": "b",
            "reward_model": "group_rank",
            "dtype": "bfloat16",
            "kwargs": {"base": {"reward_model": "group_test_meta", "dtype": "float16"}},
        }
    )
    assert own.base.dtype_name == "float16"


def test_wrapper_mirrors_base_conversion(rng):
    # the tensor-only base would raise on PIL input: the processor must convert for it
    images = [Image.fromarray((rng.random((8, 8, 3)) * 255).astype(np.uint8)) for _ in range(5)]
    proc, res = run(
        {"reward_model": "group_rank", "kwargs": {"base": "group_test_tensor_mean"}},
        [{"image": im, "group_id": 0} for im in images],
    )
    wrapper = proc.rewards["g"]
    assert wrapper.inputs.images == "float" and wrapper.inputs.fields == ("image", "group_id")
    means = np.array([np.asarray(im, dtype=np.float64).mean() / 255 for im in images])
    np.testing.assert_allclose(res.rewards["g"], ref_rank(means), rtol=1e-6)


def test_class_metadata_is_not_the_instance_view():
    from rewardzoo.rewards.group.ranking import GroupRank

    assert GroupRank.inputs.fields == ("group_id",)
    assert load_reward("group_rank", base="group_test_meta").inputs.fields == ("metadata", "group_id")


def test_real_base_jpeg_incompressibility(rng):
    # detail varies with the noise amplitude, so the JPEG sizes (and the ranks) differ
    images = [
        Image.fromarray(np.clip(128 + rng.normal(size=(32, 32, 3)) * a, 0, 255).astype(np.uint8))
        for a in (0, 40, 5, 80, 20, 10)
    ]
    groups = [0, 1, 0, 1, 0, 1]

    def kb(im):
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=95)
        return len(buf.getvalue()) / 1000

    _, res = run(
        {"reward_model": "group_rank", "kwargs": {"base": "jpeg_incompressibility"}},
        [{"image": im, "group_id": g} for im, g in zip(images, groups)],
    )
    items = [(g, kb(im)) for im, g in zip(images, groups)]
    np.testing.assert_allclose(res.rewards["g"], per_group(items, ref_rank), rtol=1e-6)


def test_lower_is_better_base_is_flipped():
    items = [(0, 3.0), (0, 1.0), (0, 2.0)]
    lower = {"base": "group_test_meta_lower"}
    np.testing.assert_allclose(scores({"reward_model": "group_rank", "kwargs": lower}, items), [0.0, 1.0, 0.5])
    np.testing.assert_allclose(scores({"reward_model": "pairwise_winrate", "kwargs": lower}, items), [0.0, 1.0, 0.5])
    np.testing.assert_allclose(
        scores({"reward_model": "group_normalized", "kwargs": lower}, items),
        -np.array([1, -1, 0]) / (math.sqrt(2 / 3) + 1e-4),
        rtol=1e-5,
        atol=1e-7,
    )


def test_groupwise_base_is_allowed():
    # group_normalized over pairwise_winrate: hard win rates [1, 0, 0.5] -> mean 0.5, std sqrt(1/6)
    spec = {
        "reward_model": "group_normalized",
        "kwargs": {"base": {"reward_model": "pairwise_winrate", "kwargs": {"base": "group_test_meta"}}},
    }
    proc, res = run(spec, meta_samples([(0, 3.0), (0, 1.0), (0, 2.0), (1, 5.0)]))
    assert proc.rewards["g"].inputs.fields == ("metadata", "group_id")
    s = 0.5 / (math.sqrt(1 / 6) + 1e-4)
    np.testing.assert_allclose(res.rewards["g"], [s, -s, 0.0, 0.0], rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- user pairwise judge
def test_user_judge_class_from_path_called_once_per_pair(rng):
    items = random_batch(rng, [5, 1, 3], ties=True)
    proc, res = run(
        {"reward_model": "pairwise_winrate", "kwargs": {"judge": "tests.group.judges:MetaJudge"}}, meta_samples(items)
    )
    judge = proc.rewards["g"].judge
    assert isinstance(judge, MetaJudge) and judge.device == "cpu"  # device passed to a constructor that takes it
    assert len(judge.pairs) == 5 * 4 / 2 + 0 + 3 * 2 / 2
    assert len({frozenset(p) for p in judge.pairs}) <= len(judge.pairs)
    np.testing.assert_allclose(res.rewards["g"], per_group(items, ref_winrate), rtol=1e-6)


def test_user_judge_soft_mode_and_kwargs():
    # P(first beats second) = 0.5 + (a - b) / 10; soft: expected wins
    spec = {
        "reward_model": "pairwise_winrate",
        "kwargs": {"judge": "tests.group.judges:MetaJudge", "judge_kwargs": {"soft": True}, "mode": "soft"},
    }
    got = scores(spec, [(0, 0.0), (0, 2.0), (0, 5.0)])
    p01, p02, p12 = 0.3, 0.0, 0.2
    np.testing.assert_allclose(got, [(p01 + p02) / 2, (1 - p01 + p12) / 2, (2 - p02 - p12) / 2], rtol=1e-6)
    # hard mode on the same judge counts discrete wins
    spec["kwargs"]["mode"] = "hard"
    np.testing.assert_allclose(scores(spec, [(0, 0.0), (0, 2.0), (0, 5.0)]), [0.0, 0.5, 1.0])


def test_user_judge_callable_from_python():
    calls = []

    def judge(first, second):
        calls.append(1)
        return json.loads(first["metadata"])["score"] > json.loads(second["metadata"])["score"]

    spec = {"reward_model": "pairwise_winrate", "kwargs": {"judge": judge, "fields": ["metadata"]}}
    np.testing.assert_allclose(scores(spec, [(0, 1.0), (0, 3.0), (0, 2.0), (0, 0.0)]), [1 / 3, 1.0, 2 / 3, 0.0])
    assert len(calls) == 6


@pytest.mark.parametrize("p", [1.5, -0.1, float("nan"), "yes", "0.5", None, [0.5, 0.5]])
def test_user_judge_out_of_range_is_an_error(p):
    spec = {
        "reward_model": "pairwise_winrate",
        "kwargs": {"judge": "tests.group.judges:constant_judge", "fields": ["metadata"]},
    }
    samples = [{"metadata": {"p": p}, "group_id": 0}, {"metadata": {"p": p}, "group_id": 0}]
    with pytest.raises(
        RewardOutputError, match=r"pairwise_winrate.*judge 'tests.group.judges:constant_judge'.*\[0, 1\]"
    ):
        run(spec, samples)


# ---------------------------------------------------------------- bad input and configuration
@pytest.mark.parametrize("spec", [RANK, WIN, NORM], ids=["rank", "winrate", "norm"])
def test_missing_group_id_names_field_and_sample(spec):
    samples = meta_samples([(0, 1.0), (0, 2.0)]) + [{"metadata": {"score": 3.0}}]
    with pytest.raises(InputError) as info:
        run(spec, samples)
    assert (info.value.field, info.value.sample, info.value.reward) == ("group_id", 2, "g")


def test_direct_call_without_group_id():
    with pytest.raises(InputError, match="group_id"):
        load_reward("group_normalized", base="group_test_meta")(metadata=['{"score": 1}'])


def test_base_input_error_is_located_in_the_batch():
    spec = with_kwargs(RANK, base={"reward_model": "group_test_meta", "batch_size": 2})
    samples = meta_samples([(0, 1.0), (1, 2.0), (0, 3.0), (0, 4.0)])
    samples[3]["metadata"]["bad"] = True
    with pytest.raises(InputError) as info:
        run(spec, samples)
    assert (info.value.sample, info.value.field, info.value.reward) == (3, "metadata", "g")
    assert "group_test_meta" in str(info.value)


def test_base_nan_names_wrapper_and_base():
    with pytest.raises(RewardOutputError, match="group_rank -> base 'group_test_nan'.*non-finite"):
        run({"reward_model": "group_rank", "kwargs": {"base": "group_test_nan"}}, meta_samples([(0, 1.0)]))


@pytest.mark.parametrize(
    "spec, error, match",
    [
        ({"reward_model": "group_rank"}, ConfigError, "group_rank needs kwargs 'base'"),  # the card name, not the class
        ({"reward_model": "pairwise_winrate"}, ConfigError, "Bradley-Terry judge needs kwargs 'base'"),
        ({"reward_model": "group_rank", "kwargs": {"base": "no_such_reward"}}, RegistryError, "unknown reward"),
        ({"reward_model": "group_rank", "kwargs": {"base": {"model_path": "x"}}}, ConfigError, "reward_model"),
        (
            {"reward_model": "group_rank", "kwargs": {"base": {"reward_model": "group_test_meta", "weight": 2}}},
            ConfigError,
            "unknown key",
        ),
        (
            {"reward_model": "group_rank", "kwargs": {"base": {"reward_model": "group_test_meta", "dtype": "int3"}}},
            ConfigError,
            "dtype",
        ),
        (
            {"reward_model": "group_rank", "kwargs": {"base": {"reward_model": "group_test_meta", "batch_size": 0}}},
            ConfigError,
            "batch_size",
        ),
        ({"reward_model": "group_rank", "kwargs": {"base": 3}}, ConfigError, "reward name or a mapping"),
        (
            {"reward_model": "group_rank", "model_path": "/w", "kwargs": {"base": "group_test_meta"}},
            ConfigError,
            "inside 'base'",
        ),
        (
            {"reward_model": "group_rank", "kwargs": {"base": {"reward_model": "group_test_meta", "kwargs": {"x": 1}}}},
            ConfigError,
            "no option 'x'",
        ),
        ({"reward_model": "group_normalized", "kwargs": {"base": "group_test_meta", "ddof": -1}}, ConfigError, "ddof"),
        ({"reward_model": "group_normalized", "kwargs": {"base": "group_test_meta", "eps": 0}}, ConfigError, "eps"),
        (
            {"reward_model": "group_normalized", "kwargs": {"base": "group_test_meta", "eps": "tiny"}},
            ConfigError,
            "eps",
        ),
        (
            {"reward_model": "group_normalized", "kwargs": {"base": "group_test_meta", "eps": float("inf")}},
            ConfigError,
            "eps",
        ),
        (
            {"reward_model": "pairwise_winrate", "kwargs": {"base": "group_test_meta", "mode": "fuzzy"}},
            ConfigError,
            "mode",
        ),
        (
            {"reward_model": "pairwise_winrate", "kwargs": {"base": "group_test_meta", "temperature": 0}},
            ConfigError,
            "temperature",
        ),
        (
            {
                "reward_model": "pairwise_winrate",
                "kwargs": {"base": "group_test_meta", "judge": "tests.group.judges:MetaJudge"},
            },
            ConfigError,
            "not both",
        ),
        ({"reward_model": "pairwise_winrate", "kwargs": {"judge": "llm"}}, ConfigError, "Python path"),
        (
            {"reward_model": "pairwise_winrate", "kwargs": {"judge": "tests.group.judges:constant_judge"}},
            ConfigError,
            "which fields",
        ),
        (
            {
                "reward_model": "pairwise_winrate",
                "kwargs": {"judge": "tests.group.judges:constant_judge", "fields": ["pic"]},
            },
            ConfigError,
            "unknown judge field",
        ),
        (
            {
                "reward_model": "pairwise_winrate",
                "kwargs": {
                    "judge": "tests.group.judges:constant_judge",
                    "fields": ["metadata"],
                    "judge_kwargs": {"a": 1},
                },
            },
            ConfigError,
            "judge class",
        ),
        (
            {"reward_model": "pairwise_winrate", "kwargs": {"base": "group_test_meta", "fields": ["prompt"]}},
            ConfigError,
            "user judge only",
        ),
        (
            {
                "reward_model": "group_rank",
                "kwargs": {
                    "base": {"reward_model": "group_normalized", "batch_size": 2, "kwargs": {"base": "group_test_meta"}}
                },
            },
            ConfigError,
            "groupwise",
        ),
    ],
)
def test_bad_configuration(spec, error, match):
    with pytest.raises(error, match=match):
        RewardLoader().load({"name": "g", **spec})


def test_backend_failure_in_base_names_the_stream():
    spec = {"reward_model": "group_rank", "kwargs": {"base": "group_test_tensor_mean"}}
    from rewardzoo.rewards.group.ranking import GroupRank

    reward = RewardLoader().load({"name": "g", **spec})
    assert isinstance(reward, GroupRank)
    from rewardzoo.core.engine import call_reward

    with pytest.raises(RewardExecutionError, match="reward 'g': TypeError"):
        call_reward("g", reward, {"image": ["not a tensor"], "group_id": [0]}, [0])


def test_audio_base_gets_sample_rate_and_conversion_settings():
    reward = load_reward("group_normalized", base="group_test_audio_peak", ddof=1, eps=1e-8)
    assert (reward.inputs.sample_rate, reward.inputs.mono, reward.inputs.fields) == (
        16000,
        False,
        ("audio", "group_id"),
    )
    audio = [np.full((1, 100), a, dtype=np.float32) for a in (0.1, 0.3, 0.2)]
    out = reward(audio=audio, audio_sample_rate=[16000, 16000, 8000], group_id=[0, 0, 0])
    base = np.array([1.6, 4.8, 1.6])
    np.testing.assert_allclose(out.extras["base_score"], base, rtol=1e-6)
    np.testing.assert_allclose(out.rewards, ref_norm(base, 1, 1e-8), rtol=1e-5)


def test_not_thread_safe_base_is_never_called_concurrently():
    from concurrent.futures import ThreadPoolExecutor

    from rewardzoo.core.engine import call_reward

    loader = RewardLoader()
    base = loader.load({"name": "base", "reward_model": "group_test_unsafe"})
    rank = loader.load({"name": "rank", "reward_model": "group_rank", "kwargs": {"base": "group_test_unsafe"}})
    norm = loader.load({"name": "norm", "reward_model": "group_normalized", "kwargs": {"base": "group_test_unsafe"}})
    assert rank.base is base and norm.base is base and rank.thread_safe  # the wrapper relies on the base lock
    meta = [json.dumps({"score": float(i)}) for i in range(4)]
    gid = [0, 0, 1, 1]

    def job(k):
        reward, fields = [
            (base, {"metadata": meta}),
            (rank, {"metadata": meta, "group_id": gid}),
            (norm, {"metadata": meta, "group_id": gid}),
        ][k % 3]
        return call_reward(reward.name, reward, fields, list(range(4)))

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(job, range(24)))
    assert len(base.calls) == 24 and base.max_active == 1


def test_yaml_exponent_without_dot_is_accepted():
    import yaml

    from rewardzoo.core.resolve import load_config

    cfg = load_config(
        yaml.safe_load(
            "rewards: [{name: g, reward_model: group_normalized, kwargs: {base: group_test_meta, ddof: 1, eps: 1e-8}}]"
        )
    )
    assert cfg.rewards[0].kwargs["eps"] == "1e-8"  # PyYAML's YAML 1.1 reading
    assert RewardLoader().load(cfg.rewards[0]).eps == 1e-8


def test_a_wrapper_is_io_bound_when_what_it_calls_is():
    """The engine overlaps io-bound entries with the local ones: a wrapper over a served base or judge waits on
    that server, so it says so; over a local base it does not."""
    from rewardzoo import load_reward
    from rewardzoo.rewards.base import PointwiseReward
    from rewardzoo.rewards.group.ranking import GroupRank

    class Served(PointwiseReward):
        io_bound = True

        def __call__(self, **fields):
            return [0.0] * len(next(iter(fields.values())))

    assert GroupRank(base=Served()).io_bound is True
    assert load_reward("group_rank", base="group_test_meta").io_bound is False
