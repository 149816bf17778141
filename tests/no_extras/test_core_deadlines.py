"""Per-entry deadlines (``timeout_s``) and optional rewards: a hung call returns at the deadline, a required entry
fails naming itself, an optional one abstains (NaN, out of the total, counted), the stuck thread is bounded."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rewardzoo import RewardMonitor, RewardProcessor, Sample
from rewardzoo.core.deadlines import stuck_calls
from rewardzoo.errors import ConfigError, DeadlineError
from rewardzoo.rewards.base import Inputs, PointwiseReward
from rewardzoo.spec.config import parse_config

from .rewards import PromptLength, path

LEN = path(PromptLength)
TIMEOUT = 0.3


class Blocking(PointwiseReward):
    """Scores 1.0 per sample; a call holding a prompt 'hang' blocks until :attr:`release` is set."""

    inputs = Inputs(("prompt",))
    modality = "text"
    release = threading.Event()
    calls = 0

    def __call__(self, prompt, **_):
        type(self).calls += 1
        if "hang" in prompt:
            type(self).release.wait(30)  # bounded: a broken test never hangs the suite
        return [1.0] * len(prompt)


BLOCK = f"{__name__}:Blocking"


@pytest.fixture
def blocking():
    Blocking.release = threading.Event()
    Blocking.calls = 0
    yield Blocking
    Blocking.release.set()
    deadline = time.monotonic() + 5
    while stuck_calls() and time.monotonic() < deadline:  # the stuck thread returns once released
        time.sleep(0.01)


def _specs(optional: bool, batch_size: int = 2):
    return [
        {"name": "len", "reward_model": LEN, "weight": 2.0},
        {"name": "slow", "reward_model": BLOCK, "timeout_s": TIMEOUT, "optional": optional, "batch_size": batch_size},
    ]


def test_required_entry_fails_at_its_deadline_naming_itself_and_the_stuck_thread_is_bounded(blocking):
    proc = RewardProcessor(_specs(optional=False))
    samples = [Sample(prompt="ab"), Sample(prompt="hang")]
    start = time.monotonic()
    with pytest.raises(DeadlineError, match=r"reward 'slow'.*timeout_s=0.3") as info:
        proc(samples)
    assert TIMEOUT <= time.monotonic() - start < TIMEOUT + 1.0  # returned at the deadline, not with the hung call
    assert info.value.reward == "slow" and info.value.samples == (0, 1)
    assert stuck_calls() == 1
    # while the hung call runs, the reward is not called again: the next call misses at once (one stuck thread)
    start = time.monotonic()
    with pytest.raises(DeadlineError, match="still running"):
        proc([Sample(prompt="ab")])
    assert time.monotonic() - start < TIMEOUT and Blocking.calls == 1 and stuck_calls() == 1
    blocking.release.set()
    deadline = time.monotonic() + 5
    while stuck_calls() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stuck_calls() == 0
    assert proc([Sample(prompt="ab")]).rewards["slow"].tolist() == [1.0]  # called again once it returned


def test_optional_entry_abstains_for_the_calls_past_its_deadline(blocking):
    proc = RewardProcessor(_specs(optional=True, batch_size=2))
    prompts = ["ab", "abc", "hang", "abcd"]  # calls: [0, 1] on time, [2, 3] hangs
    result = proc([Sample(prompt=p) for p in prompts])
    lengths = np.array([len(p) for p in prompts], dtype=np.float32)
    np.testing.assert_array_equal(result.rewards["len"], lengths)
    assert result.rewards["slow"][:2].tolist() == [1.0, 1.0] and np.isnan(result.rewards["slow"][2:]).all()
    assert result.applied == [["len", "slow"], ["len", "slow"], ["len"], ["len"]]
    # the total: the weighted sum over the rewards that scored each sample
    np.testing.assert_allclose(result.total, 2.0 * lengths + np.array([1, 1, 0, 0]), rtol=1e-6)
    assert result.weights["slow"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert result.abstentions == {"slow": 2} and result.abstained == {"slow": [2, 3]}
    assert result.extras["slow"]["abstained"][2:].tolist() == [1.0, 1.0]
    assert np.isfinite(result.advantages(group_by=[0, 0, 0, 0])).all()

    monitor = RewardMonitor()
    metrics = monitor.update(result, step=0)
    assert metrics["train/slow/abstained"] == 2.0 and "train/len/abstained" not in metrics
    monitor.update(result, step=1)
    assert monitor.abstentions == {"train/slow": 4}

    # the incremental runner: the async entry's call is guarded on its worker thread too
    blocking.release.set()
    while stuck_calls():
        time.sleep(0.01)
    blocking.release.clear()
    runner = RewardProcessor(
        [{**_specs(optional=True)[1], "async_reward": True}, _specs(optional=True)[0]]
    ).incremental(timeout=10)
    with runner:
        runner.add([Sample(prompt="hang"), Sample(prompt="xy")])
        runner.add([Sample(prompt="abc")])
        row = runner.finalize()
    # [0, 1] hangs; the tail [2] comes while that call is still stuck, so it is not started: it abstains at once
    assert row.abstained == {"slow": [0, 1, 2]} and np.isnan(row.rewards["slow"]).all()
    np.testing.assert_allclose(row.total, [8.0, 4.0, 6.0])


@pytest.mark.parametrize("value", [0, -1.5, "soon", True, float("nan")])
def test_a_deadline_that_is_not_a_positive_number_is_a_config_error(value):
    with pytest.raises(ConfigError) as info:
        parse_config({"rewards": [{"name": "len", "reward_model": LEN, "timeout_s": value}]})
    assert info.value.entry == "len" and info.value.field == "timeout_s"


def test_optional_needs_a_deadline_and_both_reach_the_spec():
    with pytest.raises(ConfigError, match="timeout_s") as info:
        parse_config({"rewards": [{"name": "len", "reward_model": LEN, "optional": True}]})
    assert info.value.field == "optional"
    spec = parse_config({"rewards": [{"name": "len", "timeout_s": "2.5", "optional": True}]}).rewards[0]
    assert (spec.timeout_s, spec.optional) == (2.5, True)


class _Response:
    """A Ray Serve response that never answers in time (the deployment hangs): ``result`` raises TimeoutError
    (Ray's GetTimeoutError is one) when given a bound; ``cancel`` is recorded."""

    def __init__(self) -> None:
        self.timeouts: list[float | None] = []
        self.cancelled = False

    def result(self, timeout_s=None):
        self.timeouts.append(timeout_s)
        raise TimeoutError("no answer")

    def cancel(self):
        self.cancelled = True


def test_a_ray_serve_deployment_past_the_deadline_has_its_request_cancelled():
    from types import SimpleNamespace

    from rewardzoo.serve.ray_rewards import DeploymentLoader

    response = _Response()
    handle = SimpleNamespace(score=SimpleNamespace(remote=lambda name, fields: response))
    facts = PromptLength().info, PromptLength.inputs
    handle.describe = SimpleNamespace(
        remote=lambda: SimpleNamespace(
            result=lambda: {"slow": {"kind": "pointwise", "inputs": facts[1], "info": facts[0], "device": "cpu"}}
        )
    )
    proc = RewardProcessor(
        [
            {"name": "slow", "reward_model": LEN, "timeout_s": 0.5, "optional": True},
            {"name": "len", "reward_model": LEN},
        ],
        loader=DeploymentLoader([(["slow"], handle)]),
    )
    result = proc([Sample(prompt="ab")])
    assert result.abstained == {"slow": [0]} and result.applied == [["len"]] and result.total.tolist() == [2.0]
    assert response.cancelled and 0 < response.timeouts[0] <= 0.5 and stuck_calls() == 0
