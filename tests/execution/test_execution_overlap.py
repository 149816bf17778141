"""Streams that overlap inside one processor call: ``async_reward: true`` entries (and io-bound rewards) each on a
thread of their own while the others score on the caller's thread; the result is that of the calls one by one."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rewardzoo import InputError, RewardExecutionError, RewardProcessor, Sample
from rewardzoo.core.engine import ConversionCache, ScoreTable, score_specs
from rewardzoo.shared.device import DeviceStreams

from .rewards import CardlessJpeg, CenteredValue, NumpyWork, Recorder, Rendezvous, ScratchReward, overlapping, path
from .test_execution_async import _samples, _specs, assert_same_result

MEET = path(Rendezvous)


def one_by_one(proc: RewardProcessor, samples):
    """The processor's result with every stream called in turn on this thread (the engine without overlap)."""
    table = ScoreTable(proc.specs, samples, proc.advantage)
    score_specs(proc.specs, proc.rewards, table, ConversionCache(samples), overlap=False)
    return table.result()


def _prompts(*prompts: str):
    return [Sample(prompt=p) for p in prompts]


def test_two_async_entries_run_at_the_same_time_in_one_call():
    """Both on device 'cpu': the overlap is per entry (each its own thread), not per device. The barrier lets a
    call pass only while the other entry's call is in progress too, so one by one this call would fail."""
    proc = RewardProcessor(
        [
            {"name": "a", "reward_model": MEET, "async_reward": True, "device": "cpu", "kwargs": {"tag": "a"}},
            {
                "name": "b",
                "reward_model": MEET,
                "async_reward": True,
                "device": "cpu",
                "kwargs": {"factor": 2.0, "tag": "b"},
            },
        ]
    )
    samples = _prompts("x", "yyy", "zz")
    Rendezvous.barrier = threading.Barrier(2, timeout=20)
    result = proc(samples)
    a, b = (next(r for r in Rendezvous.intervals if r[0] == n) for n in ("a", "b"))
    assert overlapping(a, b) and a[3] != b[3]
    Rendezvous.barrier = None
    assert_same_result(result, one_by_one(proc, samples))
    np.testing.assert_array_equal(result.rewards["b"], [2.0, 6.0, 4.0])


def test_an_async_entry_overlaps_the_synchronous_ones_which_stay_on_the_callers_thread():
    proc = RewardProcessor(
        [
            {"name": "sync", "reward_model": MEET, "kwargs": {"tag": "sync"}},
            {"name": "async", "reward_model": MEET, "async_reward": True, "batch_size": 3, "kwargs": {"tag": "async"}},
        ]
    )
    Rendezvous.barrier = threading.Barrier(2, timeout=20)
    result = proc(_prompts("ab", "c", "def"))  # the sync call meets the async one
    by_name = {n: [r for r in Rendezvous.intervals if r[0] == n] for n in ("sync", "async")}
    assert by_name["sync"][0][3] == threading.current_thread().name
    assert by_name["async"][0][3] != threading.current_thread().name
    assert overlapping(by_name["sync"][0], by_name["async"][0])
    np.testing.assert_array_equal(result.rewards["async"], [2.0, 1.0, 3.0])


def test_a_lone_async_entry_runs_on_the_callers_thread_as_before():
    proc = RewardProcessor([{"name": "only", "reward_model": MEET, "async_reward": True, "kwargs": {"tag": "only"}}])
    np.testing.assert_array_equal(proc(_prompts("ab", "c")).rewards["only"], [2.0, 1.0])
    assert [r[3] for r in Rendezvous.intervals] == [threading.current_thread().name]


@pytest.mark.parametrize("batch_size", [1, 3, 7])
def test_a_mixed_config_gives_exactly_the_result_of_the_calls_one_by_one(batch_size):
    """Async pointwise and groupwise entries, dataset gating and per-dataset weights, extras: bit for bit."""
    proc = RewardProcessor(_specs(batch_size, workers=2))
    samples = _samples(23)
    assert_same_result(proc(samples), one_by_one(proc, samples))
    assert {t for t in Recorder.threads if t != threading.current_thread().name}  # 'rec' ran beside the caller


def test_a_not_thread_safe_reward_in_two_overlapping_entries_never_runs_twice_at_once():
    scratch = path(ScratchReward)
    proc = RewardProcessor(
        [
            {"name": "s1", "reward_model": scratch, "async_reward": True, "batch_size": 2},
            {"name": "s2", "reward_model": scratch, "async_reward": True, "batch_size": 3},
            {"name": "s3", "reward_model": scratch, "batch_size": 1},
        ]
    )
    samples = [Sample(prompt="prompt %d " % i * (i + 1)) for i in range(9)]
    result = proc(samples)
    assert ScratchReward.max_active == 1
    expected = [sum(s.prompt.encode()) / 1000 for s in samples]
    for name in ("s1", "s2", "s3"):
        np.testing.assert_allclose(result.rewards[name], np.float32(expected), err_msg=name)


def test_an_overlapping_entry_that_fails_names_the_reward_and_the_samples():
    proc = RewardProcessor(
        [
            {"name": "local", "reward_model": path(NumpyWork)},
            {
                "name": "flaky",
                "reward_model": MEET,
                "async_reward": True,
                "batch_size": 2,
                "kwargs": {"fail_on": "boom"},
            },
        ]
    )
    with pytest.raises(RewardExecutionError, match=r"reward 'flaky': ValueError: the prompt said boom") as info:
        proc(_prompts("a", "b", "c", "boom"))
    assert info.value.samples == (2, 3) and isinstance(info.value.__cause__, ValueError)


def test_the_error_raised_is_the_first_in_config_order_as_one_by_one():
    """An async entry later in the config fails too (on its own thread, maybe first): the earlier entry's error
    is raised, as when the entries are called in turn; a later entry's missing field does not win either."""
    specs = [
        {"name": "first", "reward_model": MEET, "kwargs": {"fail_on": "boom"}},
        {"name": "second", "reward_model": MEET, "async_reward": True, "kwargs": {"fail_on": "o"}},
        {"name": "third", "reward_model": path(Recorder)},
    ]  # needs metadata, which the samples lack
    proc = RewardProcessor(specs)
    samples = _prompts("x", "boom")
    for run in (proc, lambda s: one_by_one(proc, s)):
        with pytest.raises(RewardExecutionError, match="reward 'first'") as info:
            run(samples)
        assert info.value.samples == (0, 1)  # the failing call's samples
    # without the first failure, the async entry's error comes next, then the missing field
    with pytest.raises(RewardExecutionError, match="reward 'second'"):
        proc(_prompts("x", "o"))
    with pytest.raises(InputError, match="reward 'third'") as missing:
        proc(_prompts("x", "y"))
    assert missing.value.field == "metadata" and missing.value.sample == 0


def test_a_groupwise_async_entry_overlaps_and_scores_each_group():
    proc = RewardProcessor(
        [
            {"name": "meet", "reward_model": MEET},
            {"name": "centered", "reward_model": path(CenteredValue), "async_reward": True},
            {"name": "meet_async", "reward_model": MEET, "async_reward": True},
        ]
    )
    samples = [Sample(prompt="p" * (i + 1), metadata={"value": float(i)}, group_id=i % 2) for i in range(6)]
    Rendezvous.barrier = threading.Barrier(2, timeout=20)  # the caller's 'meet' meets 'meet_async'
    result = proc(samples)
    Rendezvous.barrier = None
    assert_same_result(result, one_by_one(proc, samples))
    np.testing.assert_array_equal(result.rewards["centered"], [-2.0, -2.0, 0.0, 0.0, 2.0, 2.0])


def test_overlapped_cuda_entries_run_on_their_devices_side_stream(monkeypatch):
    """Dispatch only (this machine has no GPU): an async entry on cuda:1 runs through the side-stream wrapper,
    after an event recorded on the caller's thread; a synchronous cuda entry and the CPU entries do not."""
    import rewardzoo.core.loader

    calls, recorded = [], []
    monkeypatch.setattr(rewardzoo.core.loader, "check_device", lambda device: device)  # pretend the devices exist

    def fake_events(devices):
        recorded.append((tuple(devices), threading.current_thread().name))
        return {d: f"event-{d}" for d in devices}

    def fake_call(self, fn, device, event):
        calls.append((device, event, threading.current_thread().name))
        return fn()

    monkeypatch.setattr(DeviceStreams, "ready_events", staticmethod(fake_events))
    monkeypatch.setattr(DeviceStreams, "call", fake_call)
    jpeg = path(CardlessJpeg)
    proc = RewardProcessor(
        [
            {"name": "gpu1", "reward_model": jpeg, "device": "cuda:1", "batch_size": 2, "async_reward": True},
            {"name": "gpu0_sync", "reward_model": jpeg, "device": "cuda:0"},
            {"name": "cpu_async", "reward_model": MEET, "async_reward": True},
        ]
    )
    samples = [Sample(prompt="p", image=np.full((8, 8, 3), i * 20, np.uint8)) for i in range(5)]
    result = proc(samples)
    me = threading.current_thread().name
    assert recorded == [(("cuda:1",), me)]
    assert [c[:2] for c in calls] == [("cuda:1", "event-cuda:1")] * 3 and all(c[2] != me for c in calls)
    assert_same_result(result, one_by_one(proc, samples))


def test_the_gpu_check_script_runs_its_steps_on_the_cpu_and_skips_without_cuda():
    import json
    import subprocess
    import sys
    from pathlib import Path

    import torch

    script = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check_overlap.py"
    dry = subprocess.run(
        [sys.executable, str(script), "--cpu-dry-run", "--ms", "50", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(dry.stdout)
    assert dry.returncode == 0 and report["ok"] and report["intervals_overlap"] and report["scores_identical"]
    if not torch.cuda.is_available():
        bare = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
        assert bare.returncode == 0 and "skipped" in json.loads(bare.stdout)
