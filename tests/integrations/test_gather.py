"""Per-sample calls gathered into batches (rewardzoo.integrations.gather): each caller gets its own sample's
scores, batches never exceed the entry's batch_size, errors reach the calls they belong to, groups are scored
complete or fail naming their missing members, and calls of different steps are never mixed."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from rewardzoo.core.resolve import load_config
from rewardzoo.errors import InputError, RewardExecutionError
from rewardzoo.integrations.gather import BatchedScorer
from rewardzoo.spec.sample import Sample

from .per_sample_rewards import words

WORDS = "tests.integrations.per_sample_rewards:Words"
CENTRED = "tests.integrations.per_sample_rewards:CentredWords"


def scorer(entries, **options) -> BatchedScorer:
    return BatchedScorer(load_config({"rewards": entries}).rewards, **options)


async def _gather(scorer_, samples, steps=None, members=None):
    steps = steps or [None] * len(samples)
    members = members or [None] * len(samples)
    return await asyncio.gather(
        *[scorer_.score(s, st, m) for s, st, m in zip(samples, steps, members)], return_exceptions=True
    )


def test_concurrent_calls_share_batches_of_at_most_batch_size():
    texts = [" ".join(["w"] * (i % 7 + 1)) for i in range(20)]
    s = scorer([{"name": "words", "reward_model": WORDS, "batch_size": 8, "weight": 0.5}], max_wait_s=0.5)
    rows = asyncio.run(_gather(s, [Sample(completion=t) for t in texts]))
    for text, row in zip(texts, rows):
        assert len(row) == 1 and row.applied == [["words"]]
        assert row.rewards["words"][0] == words(text) and row.total[0] == pytest.approx(0.5 * words(text))
    sizes = sorted(int(r.extras["words"]["batch"][0]) for r in rows)
    assert s.calls == {"words": 3} and sorted(set(sizes)) == [4, 8]  # 8 + 8 + the tail of 4


def test_an_error_reaches_only_its_own_call():
    texts = ["one two", "boom here", "three words here", "four"]
    s = scorer([{"name": "words", "reward_model": WORDS, "batch_size": 4}], max_wait_s=0.5)
    rows = asyncio.run(_gather(s, [Sample(completion=t) for t in texts]))
    assert isinstance(rows[1], RewardExecutionError) and "words" in str(rows[1])
    assert "explodes" in str(rows[1])
    assert [rows[i].rewards["words"][0] for i in (0, 2, 3)] == [2.0, 3.0, 1.0]
    missing = asyncio.run(_gather(s, [Sample(prompt="no completion"), Sample(completion="a b")]))
    assert isinstance(missing[0], InputError) and missing[0].field == "completion"
    assert missing[1].rewards["words"][0] == 2.0


def test_groups_are_scored_complete_and_interleaved_calls_find_their_group():
    texts = {"g1": ["a", "a b c", "a b c d e"], "g2": ["x x", "x", "x x x x x x"]}
    order = [("g1", 0), ("g2", 0), ("g2", 1), ("g1", 1), ("g2", 2), ("g1", 2)]
    s = scorer([{"name": "centred", "reward_model": CENTRED}], group_size=3, group_timeout_s=30)
    rows = asyncio.run(_gather(s, [Sample(completion=texts[g][i], group_id=g) for g, i in order]))
    for (g, i), row in zip(order, rows):
        counts = np.array([words(t) for t in texts[g]])
        assert row.rewards["centred"][0] == pytest.approx(counts[i] - counts.mean())
    assert s.calls == {"centred": 2}


def test_an_incomplete_group_fails_naming_its_missing_members():
    s = scorer([{"name": "centred", "reward_model": CENTRED}], group_size=4, group_timeout_s=0.3)
    rows = asyncio.run(_gather(s, [Sample(completion="a b", group_id="u7") for _ in range(3)], members=[0, 1, 3]))
    for row in rows:
        assert isinstance(row, InputError)
        assert "'u7'" in str(row) and "3 of its 4" in str(row) and "missing members [2]" in str(row)
        assert row.reward == "centred"


def test_calls_of_different_steps_are_not_mixed_and_read_their_weights():
    s = scorer(
        [
            {
                "name": "words",
                "reward_model": WORDS,
                "batch_size": 8,
                "weight": {"schedule": "linear", "start": 0.0, "end": 1.0, "steps": 10},
            }
        ],
        max_wait_s=0.3,
    )
    samples = [Sample(completion="a b c d") for _ in range(6)]
    rows = asyncio.run(_gather(s, samples, steps=[2, 5, 2, 5, 2, 5]))
    for row, step in zip(rows, [2, 5, 2, 5, 2, 5]):
        assert row.step == step and row.weights["words"][0] == pytest.approx(step / 10)
        assert row.total[0] == pytest.approx(4 * step / 10) and row.extras["words"]["batch"][0] == 3
    assert s.calls == {"words": 2}


def test_from_threads_too():
    import concurrent.futures as cf

    s = scorer([{"name": "words", "reward_model": WORDS, "batch_size": 16}], max_wait_s=0.5)
    with cf.ThreadPoolExecutor(8) as pool:
        rows = list(pool.map(lambda i: s.score_sync(Sample(completion="w " * i), timeout=30), range(1, 9)))
    assert [r.rewards["words"][0] for r in rows] == list(range(1, 9))


def test_trl_functions_read_a_scheduled_weight_at_trainer_state_global_step():
    """TRL's reward_weights are fixed: a scheduled entry gets 1 there and its function returns score x weight(step)."""
    from types import SimpleNamespace

    from rewardzoo.integrations.trl import trl_reward_funcs

    config = {
        "rewards": [
            {
                "name": "words",
                "reward_model": WORDS,
                "weight": {"schedule": "cosine", "start": 1.0, "end": 0.0, "steps": 8, "after": 2},
            },
            {"name": "fixed", "reward_model": WORDS, "weight": 3.0},
        ]
    }
    (scheduled, fixed), weights = trl_reward_funcs(config)
    assert weights == [1.0, 3.0]
    completions = ["a b", "a b c d"]
    for step in (0, 4, 6, 10, 50):
        state = SimpleNamespace(global_step=step)
        frac = min(max((step - 2) / 8, 0.0), 1.0)
        w = 0.0 + (1.0 - 0.0) * (1 + np.cos(np.pi * frac)) / 2
        assert scheduled(prompts=["p", "p"], completions=completions, trainer_state=state) == pytest.approx(
            [2 * w, 4 * w]
        )
        assert fixed(prompts=["p", "p"], completions=completions, trainer_state=state) == [2.0, 4.0]


def test_the_scoring_thread_wakes_per_batch_not_per_call_and_a_batch_reaches_the_loop_at_once():
    s = scorer([{"name": "words", "reward_model": WORDS, "batch_size": 32}], max_wait_s=5.0)
    gatherer = s.gatherers["words"]
    takes, handoffs = [], []
    take, call_soon = gatherer._take, asyncio.BaseEventLoop.call_soon_threadsafe

    def counted_take():
        takes.append(1)
        return take()

    def counted_call_soon(loop, *args, **kwargs):
        handoffs.append(1)
        return call_soon(loop, *args, **kwargs)

    gatherer._take = counted_take
    asyncio.BaseEventLoop.call_soon_threadsafe = counted_call_soon
    try:
        rows = asyncio.run(_gather(s, [Sample(completion="w " * (i + 1)) for i in range(64)]))
    finally:
        asyncio.BaseEventLoop.call_soon_threadsafe = call_soon
    assert [r.rewards["words"][0] for r in rows] == [float(i + 1) for i in range(64)]
    assert s.calls == {"words": 2}  # two full batches: nothing waited for max_wait_s
    # woken when a batch opens and when it is due (not by each of its 32 calls); one hand-off per batch
    assert len(takes) <= 8 and len(handoffs) == 2
