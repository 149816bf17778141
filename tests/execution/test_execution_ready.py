"""Results as they are ready: the runner's ready() / results(ordered=True) against finalize()."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rewardzoo import RewardExecutionError, RewardProcessor, Sample
from rewardzoo.core.engine import RewardResult
from rewardzoo.errors import RewardTimeoutError, RunnerStateError

from .rewards import Blocking, CenteredValue, Failing, NumpyWork, Recorder, path
from .test_execution_async import _samples, _settle, assert_same_result

REC, CENT = path(Recorder), path(CenteredValue)
DATASETS = ["t2i", "edit", "video"]


def _random_specs(rng: np.random.Generator) -> list[dict]:
    """A random mix of pointwise / groupwise, async / synchronous, gated / ungated streams."""
    pool = [
        {"reward_model": REC, "kwargs": {"factor": float(rng.integers(1, 4))}},
        {"reward_model": "jpeg_incompressibility", "weight": 0.01},
        {"reward_model": CENT},
        {"reward_model": path(NumpyWork), "weight": 0.5},
        {"reward_model": REC, "kwargs": {"delay": 0.002}},
    ]
    specs = []
    for k in rng.choice(len(pool), size=int(rng.integers(1, 6)), replace=False):
        spec = {**pool[k], "name": f"s{k}", "batch_size": int(rng.integers(1, 6))}
        if rng.random() < 0.6:
            spec.update(async_reward=True, num_workers=int(rng.integers(1, 4)))
        if rng.random() < 0.5:
            spec["applicable_datasets"] = sorted(rng.choice(DATASETS, size=int(rng.integers(1, 3)), replace=False))
        specs.append(spec)
    return specs


def _stack(rows: dict[int, RewardResult], n: int) -> RewardResult:
    """The rows, in index order, as one result (an extra a row lacks is NaN / None there)."""
    order = [rows[i] for i in range(n)]
    first = order[0]
    extras: dict[str, dict[str, np.ndarray]] = {}
    for name in {k for r in order for k in r.extras}:
        for key in {kk for r in order for kk in r.extras.get(name, {})}:
            values = [r.extras.get(name, {}).get(key) for r in order]
            text = any(v is not None and v.dtype == object for v in values)
            missing = np.array([None], dtype=object) if text else np.array([np.nan], dtype=np.float32)
            extras.setdefault(name, {})[key] = np.concatenate([missing if v is None else v for v in values])
    return RewardResult(
        rewards={k: np.concatenate([r.rewards[k] for r in order]) for k in first.rewards},
        total=np.concatenate([r.total for r in order]),
        applied=[r.applied[0] for r in order],
        extras=extras,
        weights={k: np.concatenate([r.weights[k] for r in order]) for k in first.weights},
        group_ids=[r.group_ids[0] for r in order],
        advantage_mode=first.advantage_mode,
    )


def _check_rows(rows: dict[int, RewardResult], expected: RewardResult) -> None:
    stacked = _stack(rows, len(expected))
    assert_same_result(stacked, expected)
    for name, extras in expected.extras.items():  # only a key no call of that sample reported may be missing
        for key, values in extras.items():
            for i, row in rows.items():
                if key not in row.extras.get(name, {}):
                    assert values[i] is None or np.isnan(values[i]), (name, key, i)
    assert stacked.weights.keys() == expected.weights.keys()
    for name in expected.weights:
        np.testing.assert_array_equal(stacked.weights[name], expected.weights[name])
    assert stacked.group_ids == expected.group_ids


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("ordered", [False, True])
def test_what_the_iterators_yield_is_finalizes_result_bit_for_bit(seed, ordered):
    rng = np.random.default_rng(seed)
    specs = _random_specs(rng)
    n = int(rng.integers(1, 30))
    samples = _samples(n, seed=seed, groups=4)
    proc = RewardProcessor(specs)
    expected = proc(samples)
    group_size = None if seed % 2 else n + 1  # a known group size: complete groups go out while adding
    with proc.incremental(timeout=60, group_size=group_size) as runner:
        cuts = sorted(rng.integers(0, n + 1, size=3).tolist())
        for a, b in zip([0, *cuts], [*cuts, n]):
            runner.add(samples[a:b])
        indices, rows = [], {}
        for index, row in runner.results(ordered=ordered):
            assert len(row) == 1
            indices.append(index)
            rows[index] = row
        assert sorted(indices) == list(range(n))  # each sample exactly once
        if ordered:
            assert indices == list(range(n))
        _check_rows(rows, expected)
        assert_same_result(runner.finalize(), expected)  # after the iteration: the same full result
        assert runner.num_samples == 0


def test_samples_a_slow_stream_does_not_apply_to_come_while_it_is_still_running():
    proc = RewardProcessor(
        [
            {"name": "rec", "reward_model": REC, "async_reward": True, "batch_size": 2},
            {"name": "slow", "reward_model": path(Blocking), "async_reward": True, "applicable_datasets": ["slow"]},
        ]
    )
    datasets = ["fast", "fast", "slow", "fast", "fast", "fast"]
    samples = [Sample(prompt="p" * (i + 1), metadata={}, dataset=d) for i, d in enumerate(datasets)]
    with proc.incremental(timeout=30) as runner:
        runner.add(samples)
        ready = runner.ready()
        got = [next(ready)[0] for _ in range(5)]  # every fast sample, while "slow" blocks
        assert sorted(got) == [0, 1, 3, 4, 5]
        assert Blocking.started.wait(10) and not Blocking.release.is_set()  # really still running
        Blocking.release.set()
        assert [i for i, _ in ready] == [2]
        assert_same_result(runner.finalize(), proc(samples))


def test_ordered_results_yield_the_prefix_before_a_slow_sample_and_wait_there():
    proc = RewardProcessor(
        [
            {"name": "rec", "reward_model": REC, "async_reward": True, "batch_size": 1},
            {"name": "slow", "reward_model": path(Blocking), "async_reward": True, "applicable_datasets": ["slow"]},
        ]
    )
    datasets = ["fast", "fast", "slow", "fast"]
    samples = [Sample(prompt="ab", metadata={}, dataset=d) for d in datasets]
    with proc.incremental(timeout=30) as runner:
        runner.add(samples)
        results = runner.results(ordered=True)
        assert [next(results)[0], next(results)[0]] == [0, 1]
        timer = threading.Timer(0.3, Blocking.release.set)
        timer.start()
        start = time.monotonic()
        assert [i for i, _ in results] == [2, 3]  # 3 was ready long before; it waits for 2
        assert time.monotonic() - start >= 0.2
        timer.join()


def test_a_group_comes_once_its_call_is_done_its_members_together():
    proc = RewardProcessor([{"name": "centered", "reward_model": CENT, "async_reward": True, "num_workers": 2}])
    gids = [3, 1, 3, 2, 1, 3, 2, 2, 1, "x"]
    samples = [Sample(metadata={"value": float(i)}, group_id=g) for i, g in enumerate(gids)]
    with proc.incremental(timeout=30, group_size=3) as runner:
        runner.add(samples)
        order = [i for i, _ in runner.ready()]
        runner.finalize()
    blocks, start = [], 0
    while start < len(order):  # consecutive members of one group
        gid = gids[order[start]]
        end = start
        while end < len(order) and gids[order[end]] == gid:
            end += 1
        blocks.append(sorted(order[start:end]))
        start = end
    assert sorted(blocks) == sorted([[i for i, g in enumerate(gids) if g == k] for k in (3, 1, 2, "x")])


def test_synchronous_streams_are_scored_on_the_callers_thread_between_rows():
    proc = RewardProcessor([{"name": "rec_sync", "reward_model": REC, "batch_size": 2}])
    samples = [Sample(prompt="a" * (i + 1), metadata={}) for i in range(6)]
    with proc.incremental() as runner:
        runner.add(samples)
        results = runner.results(ordered=True)
        assert Recorder.calls == []  # nothing is scored before the first row is asked for
        assert next(results)[0] == 0
        assert Recorder.calls == [2]  # the first chunk only
        assert [i for i, _ in results] == [1, 2, 3, 4, 5]
        assert Recorder.calls == [2, 2, 2] and Recorder.threads == {threading.current_thread().name}
        assert_same_result(runner.finalize(), proc(samples))


@pytest.mark.parametrize("async_reward", [True, False])
def test_a_failed_chunk_raises_at_its_samples_the_earlier_ones_still_come(async_reward):
    spec = {"name": "flaky", "reward_model": path(Failing), "batch_size": 2}
    if async_reward:
        spec.update(async_reward=True, num_workers=2)
    proc = RewardProcessor([spec, {"name": "rec", "reward_model": REC, "async_reward": True, "batch_size": 3}])
    prompts = ["a", "bb", "ccc", "dd", "boom", "e", "ff", "g"]  # chunk 2 (samples 4, 5) fails
    samples = [Sample(prompt=p, metadata={}) for p in prompts]
    runner = proc.incremental(timeout=30)
    runner.add(samples)
    got = []
    with pytest.raises(
        RewardExecutionError, match=r"reward 'flaky': ValueError: the prompt said boom \(samples 4, 5\)"
    ):
        for index, _ in runner.results(ordered=True):
            got.append(index)
    assert got == [0, 1, 2, 3]
    runner.add(samples)  # the round ended with the error; the runner takes the next one
    got = []
    with pytest.raises(RewardExecutionError, match="reward 'flaky'") as info:
        for index, _ in runner.ready():
            got.append(index)
    assert info.value.samples == (4, 5) and not {4, 5} & set(got)
    good = samples[:4]
    runner.add(good)
    assert_same_result(runner.finalize(), proc(good))
    runner.close()


def test_a_stuck_stream_times_out_in_the_iteration_and_the_runner_recovers():
    proc = RewardProcessor(
        [
            {"name": "rec", "reward_model": REC, "async_reward": True, "batch_size": 1},
            {"name": "stuck", "reward_model": path(Blocking), "async_reward": True, "applicable_datasets": ["slow"]},
        ]
    )
    samples = [Sample(prompt="ab", metadata={}, dataset=d) for d in ["fast", "slow", "fast"]]
    runner = proc.incremental(timeout=0.5)
    runner.add(samples)
    got = []
    start = time.monotonic()
    with pytest.raises(RewardTimeoutError, match=r"reward 'stuck'.*timeout of 0.5 s"):
        for index, _ in runner.ready():
            got.append(index)
    assert time.monotonic() - start < 5
    assert sorted(got) == [0, 2]
    Blocking.release.set()
    runner.add(samples)
    assert [i for i, _ in runner.results()] == [0, 1, 2]
    assert_same_result(runner.finalize(), proc(samples))
    runner.close()


def test_add_is_refused_once_the_round_is_read_until_finalize():
    proc = RewardProcessor([{"name": "rec", "reward_model": REC, "async_reward": True, "batch_size": 4}])
    samples = [Sample(prompt="x" * (i + 1), metadata={"value": i}) for i in range(5)]
    with proc.incremental(timeout=30) as runner:
        runner.add(samples)
        results = runner.results()  # seals the round at once, before the first row is asked for
        with pytest.raises(RunnerStateError, match=r"add\(\) after ready\(\)/results\(\).*finalize\(\)"):
            runner.add(samples)
        assert runner.num_samples == 5  # the refused samples were not added
        _settle(runner)
        assert Recorder.calls == [4, 1]  # the tail went out when the round was sealed
        assert [i for i, _ in results] == list(range(5))
        assert_same_result(runner.finalize(), proc(samples))
        runner.add(samples[:2])  # the next round
        assert_same_result(runner.finalize(), proc(samples[:2]))


def test_several_iterators_each_yield_the_whole_round_and_finalize_completes_a_partial_one():
    proc = RewardProcessor(
        [
            {"name": "rec", "reward_model": REC, "async_reward": True, "batch_size": 2},
            {"name": "centered", "reward_model": CENT},
        ]
    )
    samples = _samples(9, seed=4)
    expected = proc(samples)
    with proc.incremental(timeout=30) as runner:
        runner.add(samples)
        first = runner.results()
        assert next(first)[0] == 0  # left after one row
        again = dict(runner.results())
        assert sorted(again) == list(range(9))
        assert sorted(i for i, _ in runner.ready()) == list(range(9))
        _check_rows(again, expected)
        assert_same_result(runner.finalize(), expected)
        with pytest.raises(RunnerStateError, match="finalized"):
            next(first)  # an iterator of the finished round does not read the next one
        runner.add(samples[:3])
        partial = runner.ready()
        next(partial)
        assert_same_result(runner.finalize(), proc(samples[:3]))  # the rest is scored by finalize


def test_an_empty_round_and_samples_no_stream_applies_to():
    proc = RewardProcessor([{"name": "rec", "reward_model": REC, "async_reward": True, "applicable_datasets": ["t2i"]}])
    with proc.incremental() as runner:
        assert list(runner.ready()) == []
        assert len(runner.finalize()) == 0
        runner.add([Sample(prompt="a", metadata={}, dataset="video")])
        [(index, row)] = list(runner.results())
        assert index == 0 and row.applied == [[]] and np.isnan(row.total[0])
