"""The incremental async runner against the synchronous processor on the same samples."""

from __future__ import annotations

import _thread
import signal
import threading
import time
import warnings

import numpy as np
import pytest

from rewardzoo import AsyncRewardRunner, InputError, RewardExecutionError, RewardProcessor, Sample
from rewardzoo.core.async_runner import RewardTimeoutError, _Streams

from .rewards import (
    Blocking,
    CardlessJpeg,
    CenteredValue,
    Failing,
    NumpyWork,
    Recorder,
    ScratchReward,
    path,
)

REC, CENT = path(Recorder), path(CenteredValue)


def _samples(n: int, seed: int = 0, groups: int = 5):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        img = rng.integers(0, 256, (int(rng.integers(8, 33)), 24, 3), dtype=np.uint8)
        img[::2] //= int(rng.integers(1, 6))
        gid = int(rng.integers(groups)) if i % 3 else f"g{int(rng.integers(groups))}"
        out.append(
            Sample(
                prompt="p" * int(rng.integers(1, 12)),
                image=img,
                group_id=gid,
                metadata={"value": float(rng.normal())},
                dataset=["t2i", "edit", "video"][i % 3],
            )
        )
    return out


def _specs(batch_size: int, workers: int):
    a = {"async_reward": True, "num_workers": workers}
    return [
        {
            "name": "rec",
            "reward_model": REC,
            "batch_size": batch_size,
            "applicable_datasets": ["t2i", "edit"],
            "weight": {"t2i": 1.0, "edit": -2.0},
            **a,
        },
        {"name": "jpeg", "reward_model": "jpeg_incompressibility", "batch_size": batch_size + 1, "weight": 0.01, **a},
        {"name": "centered", "reward_model": CENT, "applicable_datasets": ["t2i", "video"], **a},
        {"name": "numpy_sync", "reward_model": path(NumpyWork), "batch_size": 2, "weight": 0.5},
        {"name": "rec_sync", "reward_model": REC, "batch_size": batch_size, "kwargs": {"factor": 3.0}},
    ]


def assert_same_result(a, b):
    assert list(a.rewards) == list(b.rewards)
    for name in a.rewards:
        np.testing.assert_array_equal(a.rewards[name], b.rewards[name], err_msg=name)
        assert a.rewards[name].dtype == b.rewards[name].dtype == np.float32
    np.testing.assert_array_equal(a.total, b.total)
    assert a.applied == b.applied
    assert {k: set(v) for k, v in a.extras.items()} == {k: set(v) for k, v in b.extras.items()}
    for name, extras in a.extras.items():
        for key, values in extras.items():
            np.testing.assert_array_equal(values, b.extras[name][key], err_msg=f"{name}.{key}")


@pytest.mark.parametrize("batch_size", [1, 3, 7])
@pytest.mark.parametrize("rounds", [[23], [1] * 23, [4, 4, 4, 4, 4, 3], [5, 0, 11, 7]])
@pytest.mark.parametrize("workers", [1, 3])
def test_async_result_equals_the_synchronous_call(batch_size, rounds, workers):
    samples = _samples(sum(rounds), seed=batch_size)
    proc = RewardProcessor(_specs(batch_size, workers))
    expected = proc(samples)
    with proc.incremental(timeout=60) as runner:
        start = 0
        for size in rounds:
            got = runner.add(samples[start : start + size])
            assert got == range(start, start + size)
            start += size
        assert_same_result(runner.finalize(), expected)
    # the call sizes (Recorder's "call_size" extras) are compared too: the chunking is the synchronous one


def test_full_chunks_go_out_while_adding_and_tails_flush_at_finalize():
    proc = RewardProcessor(
        [{"name": "rec", "reward_model": REC, "batch_size": 4, "async_reward": True, "applicable_datasets": ["t2i"]}]
    )
    runner = proc.incremental(timeout=30)
    s = [Sample(prompt="ab", metadata={}, dataset=d) for d in ["t2i", "t2i", "video", "t2i"]]
    runner.add(s)  # 3 applicable: no full chunk yet
    _settle(runner)
    assert Recorder.calls == []
    runner.add(s)  # 6 applicable: one chunk of 4 goes out now
    _settle(runner)
    assert Recorder.calls == [4]
    result = runner.finalize()
    assert Recorder.calls == [4, 2]  # the tail, flushed by finalize
    assert result.applied == [["rec"], ["rec"], [], ["rec"]] * 2
    assert runner.num_samples == 0  # a fresh round
    runner.close()


def test_complete_groups_are_scored_before_finalize_when_group_size_is_known():
    proc = RewardProcessor([{"name": "centered", "reward_model": CENT, "async_reward": True}])
    samples = [
        Sample(metadata={"value": float(i * i)}, group_id=g) for i, g in enumerate(["1", 1, "1", 2, "1", 2, 1, 1])
    ]
    expected = proc(samples)
    CenteredValue.scored.clear()
    with proc.incremental(timeout=30, group_size=3) as runner:
        runner.add(samples[:5])  # group "1" is complete (3 members); 1 and 2 are not
        _settle(runner)
        assert [g for _, g in CenteredValue.scored] == [("1", "1", "1")]
        runner.add(samples[5:])
        _settle(runner)
        assert [g for _, g in CenteredValue.scored] == [("1", "1", "1"), (1, 1, 1)]
        assert_same_result(runner.finalize(), expected)  # group 2 (2 members) is scored at finalize


@pytest.mark.parametrize("rounds", [[3], [2, 1], [1, 1, 1]])
def test_a_group_larger_than_group_size_is_an_input_error(rounds):
    proc = RewardProcessor([{"name": "centered", "reward_model": CENT, "async_reward": True}])
    with proc.incremental(group_size=2) as runner:
        with pytest.raises(InputError, match="sample 2, field 'group_id', reward 'centered'.*more than group_size=2"):
            for size in rounds:
                runner.add([Sample(metadata={"value": 1}, group_id=4)] * size)


def test_worker_errors_surface_at_finalize_naming_the_reward_and_the_runner_stays_usable():
    proc = RewardProcessor(
        [
            {"name": "flaky", "reward_model": path(Failing), "async_reward": True, "batch_size": 2},
            {"name": "rec", "reward_model": REC, "async_reward": True, "batch_size": 2},
        ]
    )
    runner = proc.incremental(timeout=30)
    runner.add([Sample(prompt=p, metadata={}) for p in ["ok", "fine", "boom", "x"]])  # does not raise here
    with pytest.raises(RewardExecutionError, match=r"reward 'flaky': ValueError: the prompt said boom") as info:
        runner.finalize()
    assert isinstance(info.value.__cause__, ValueError)
    good = [Sample(prompt=p, metadata={"value": 2.0}) for p in ["a", "bcd", "ef"]]
    runner.add(good)
    assert_same_result(runner.finalize(), proc(good))
    runner.close()


def test_bad_media_in_a_worker_is_reported_with_the_index_in_the_round():
    proc = RewardProcessor(
        [{"name": "q", "reward_model": "jpeg_compressibility", "async_reward": True, "batch_size": 2, "num_workers": 2}]
    )
    with proc.incremental(timeout=30) as runner:
        runner.add([Sample(image=np.zeros((8, 8, 3), np.uint8))] * 3)
        runner.add([Sample(image=np.zeros((8, 8, 3))), Sample(image=-np.ones((8, 8, 3)))])
        with pytest.raises(InputError) as info:
            runner.finalize()
    assert (info.value.reward, info.value.field, info.value.sample) == ("q", "image", 4)


def test_a_missing_field_is_reported_by_add_with_the_index_in_the_round():
    proc = RewardProcessor([{"name": "rec", "reward_model": REC, "async_reward": True}])
    with proc.incremental() as runner:
        runner.add([Sample(prompt="a", metadata={})] * 2)
        with pytest.raises(InputError) as info:
            runner.add([Sample(prompt="a", metadata={}), Sample(metadata={})])
    assert (info.value.reward, info.value.field, info.value.sample) == ("rec", "prompt", 3)


def test_timeout_raises_instead_of_hanging_and_the_runner_recovers():
    proc = RewardProcessor(
        [
            {"name": "stuck", "reward_model": path(Blocking), "async_reward": True},
            {"name": "rec", "reward_model": REC, "async_reward": True},
        ]
    )
    runner = proc.incremental(timeout=0.5)
    runner.add([Sample(prompt="a", metadata={})] * 3)
    start = time.monotonic()
    with pytest.raises(RewardTimeoutError, match=r"reward 'stuck'.*timeout of 0.5 s") as info:
        runner.finalize()
    assert time.monotonic() - start < 5
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, RewardExecutionError)
    Blocking.release.set()
    samples = [Sample(prompt="abc", metadata={})] * 2
    runner.add(samples)
    assert_same_result(runner.finalize(), proc(samples))
    runner.close()


@pytest.fixture
def ctrl_c():
    """Ctrl-C's handler for the test, as in an interactive run: a suite started in the background by a shell
    inherits SIGINT ignored, and ``interrupt_main`` then does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_keyboard_interrupt_cancels_queued_calls_and_stops_the_threads(ctrl_c):
    proc = RewardProcessor(
        [{"name": "rec", "reward_model": REC, "async_reward": True, "batch_size": 1, "kwargs": {"delay": 0.3}}]
    )
    runner = proc.incremental()
    runner.add([Sample(prompt="a", metadata={})] * 30)  # 30 queued calls of 0.3 s: 9 s unless cancelled
    timer = threading.Timer(0.25, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        runner.finalize()
    timer.join()
    deadline = time.monotonic() + 3
    while any(t.name.startswith("rewardzoo-rec") for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("rewardzoo-rec")]
    assert len(Recorder.calls) < 10  # the queued calls were cancelled, not run
    samples = [Sample(prompt="abcd", metadata={"value": 1.0})]
    runner.add(samples)
    assert_same_result(runner.finalize(), proc(samples))  # usable again, with fresh threads
    runner.close()


def test_four_workers_on_thread_safe_rewards_give_deterministic_results():
    specs = [
        {"name": "numpy", "reward_model": path(NumpyWork), "batch_size": 2},
        {"name": "jpeg", "reward_model": "jpeg_compressibility", "batch_size": 3},
        {"name": "rec", "reward_model": REC, "batch_size": 1},
    ]
    proc = RewardProcessor([{**s, "async_reward": True, "num_workers": 4} for s in specs])
    samples = _samples(48, seed=3)
    expected = RewardProcessor(specs)(samples)
    with proc.incremental(timeout=60) as runner:
        for _ in range(3):
            for k in range(0, 48, 5):
                runner.add(samples[k : k + 5])
            assert_same_result(runner.finalize(), expected)
    assert len({t for t in Recorder.threads if t.startswith("rewardzoo-rec")}) > 1  # really ran in parallel


def test_a_reward_that_is_not_thread_safe_never_runs_on_two_threads():
    specs = [
        {
            "name": "scratch_a",
            "reward_model": path(ScratchReward),
            "async_reward": True,
            "num_workers": 4,
            "batch_size": 1,
            "applicable_datasets": ["a"],
        },
        {
            "name": "scratch_b",
            "reward_model": path(ScratchReward),
            "async_reward": True,
            "num_workers": 4,
            "batch_size": 2,
            "applicable_datasets": ["b"],
        },
    ]
    with pytest.warns(RuntimeWarning, match="not thread-safe") as record:
        proc = RewardProcessor(specs)
        runner = proc.incremental(timeout=60)
    assert len(record) == 2  # once per stream
    assert proc.rewards["scratch_a"] is proc.rewards["scratch_b"]  # one shared instance
    rng = np.random.default_rng(5)
    prompts = ["".join(chr(c) for c in rng.integers(97, 123, int(rng.integers(1, 60)))) for _ in range(60)]
    samples = [Sample(prompt=p, dataset="ab"[i % 2]) for i, p in enumerate(prompts)]
    for k in range(0, 60, 7):
        runner.add(samples[k : k + 7])
    result = runner.finalize()
    expected = np.array([sum(p.encode()) / 1000 for p in prompts], dtype=np.float32)
    np.testing.assert_array_equal(
        np.where(np.isnan(result.rewards["scratch_a"]), result.rewards["scratch_b"], result.rewards["scratch_a"]),
        expected,
    )
    assert ScratchReward.max_active == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proc.incremental().close()  # the same streams do not warn again
    runner.close()


def test_no_cuda_stream_logic_for_cpu_rewards(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("CUDA stream logic used for a CPU reward")

    monkeypatch.setattr(_Streams, "stream", forbidden)
    monkeypatch.setattr(_Streams, "ready_events", staticmethod(forbidden))
    proc = RewardProcessor(_specs(2, 2))
    samples = _samples(9)
    with AsyncRewardRunner(proc, timeout=30) as runner:
        runner.add(samples)
        assert_same_result(runner.finalize(), proc(samples))


def test_a_config_without_async_specs_is_scored_at_finalize():
    specs = [{"name": "rec", "reward_model": REC, "batch_size": 2}, {"name": "centered", "reward_model": CENT}]
    proc = RewardProcessor(specs)
    samples = _samples(7)
    with proc.incremental() as runner:
        runner.add(samples[:3])
        assert Recorder.calls == []
        runner.add(samples[3:])
        assert_same_result(runner.finalize(), proc(samples))


def test_closed_runner_refuses_work_and_bad_arguments_are_rejected():
    proc = RewardProcessor([{"name": "rec", "reward_model": REC}])
    runner = proc.incremental()
    runner.close()
    with pytest.raises(RuntimeError, match="closed"):
        runner.add([Sample(prompt="a", metadata={})])
    with pytest.raises(ValueError, match="timeout"):
        AsyncRewardRunner(proc, timeout=0)
    with pytest.raises(ValueError, match="group_size"):
        AsyncRewardRunner(proc, group_size=0)


def _settle(runner, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while runner.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)


def test_cuda_rewards_run_through_one_stream_per_device_after_the_samples_are_ready(monkeypatch):
    """Dispatch only (this machine has no GPU): a reward on cuda:1 goes through the stream wrapper with
    the event recorded when its samples were added; a CPU reward in the same config does not."""
    import rewardzoo.core.loader

    calls = []
    monkeypatch.setattr(rewardzoo.core.loader, "check_device", lambda device: device)  # pretend cuda:1 exists
    monkeypatch.setattr(_Streams, "ready_events", staticmethod(lambda devices: {d: f"event-{d}" for d in devices}))

    def fake_call(self, fn, device, event):
        calls.append((device, event))
        return fn()

    monkeypatch.setattr(_Streams, "call", fake_call)
    specs = [
        {
            "name": "gpu_jpeg",
            "reward_model": path(CardlessJpeg),
            "device": "cuda:1",
            "batch_size": 2,
            "async_reward": True,
            "num_workers": 2,
        },
        {"name": "rec", "reward_model": REC, "async_reward": True, "batch_size": 2},
    ]
    proc = RewardProcessor(specs)
    samples = _samples(5)
    with proc.incremental() as runner:
        runner.add(samples)
        result = runner.finalize()
    assert calls == [("cuda:1", "event-cuda:1")] * 3  # 2 full chunks + the tail; none for the CPU reward
    assert_same_result(result, proc(samples))
