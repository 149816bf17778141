"""Bad environments and failing workers: each a typed error naming the entry, the environment and the worker's
last stderr lines; no worker left running (the process table is checked after every test)."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from rewardzoo.core.loader import RewardLoader
from rewardzoo.core.resolve import load_config
from rewardzoo.errors import ConfigError, RewardExecutionError, WorkerError

from .conftest import HERE, alive, gone_within, here_env, needs_linux, worker_pids

pytestmark = [needs_linux, pytest.mark.usefixtures("no_leftover_workers")]


def _load(cls: str, **env):
    config = load_config(
        {"rewards": [{"name": "broken", "reward_model": cls, "device": "cpu", "environment": here_env(**env)}]}
    )
    return RewardLoader().load(config.rewards[0]), config.rewards[0].environment


def _names_all(exc: WorkerError, env, stderr_line: str) -> None:
    assert exc.entry == "broken" and exc.environment == env.describe()
    assert "'broken'" in str(exc) and env.describe() in str(exc) and stderr_line in str(exc)
    assert stderr_line in exc.stderr


def test_an_interpreter_that_does_not_exist_or_is_not_python(tmp_path):
    with pytest.raises(ConfigError, match="does not exist") as err:
        RewardLoader().load(
            {
                "name": "broken",
                "reward_model": f"{HERE}:Length",
                "environment": {"python": str(tmp_path / "nowhere" / "python")},
            }
        )
    assert (err.value.entry, err.value.field) == ("broken", "environment")
    assert str(tmp_path / "nowhere") in str(err.value)
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'I am a shell script'\n")
    fake.chmod(0o755)
    with pytest.raises(ConfigError, match="is not a Python 3 interpreter.*shell script") as err:
        RewardLoader().load({"name": "broken", "reward_model": f"{HERE}:Length", "environment": {"python": str(fake)}})
    assert err.value.entry == "broken" and f"python={fake}" in str(err.value)


def test_a_worker_that_crashes_at_import():
    with pytest.raises(WorkerError, match="died") as err:
        _load("tests.environments.crash_at_import:Reward")
    _names_all(
        err.value,
        load_config({"rewards": [{"name": "x", "environment": here_env()}]}).rewards[0].environment,
        "crash_at_import: aborting the interpreter",
    )
    assert "exit status 3" in str(err.value)


def test_a_worker_that_hangs_at_start_is_stopped_after_start_timeout_s():
    with pytest.raises(WorkerError, match="longer than start_timeout_s=3 s") as err:
        _load(f"{HERE}:HangsAtStart", start_timeout_s=3)
    assert "HangsAtStart: loading forever" in err.value.stderr and err.value.entry == "broken"
    assert worker_pids() == set()


def _hangs_in_first_call(tmp_path, **env):
    config = load_config(
        {
            "rewards": [
                {
                    "name": "broken",
                    "reward_model": f"{HERE}:HangsInFirstCall",
                    "device": "cpu",
                    "kwargs": {"marker": str(tmp_path / "calls")},
                    "environment": here_env(**env),
                }
            ]
        }
    )
    return RewardLoader().load(config.rewards[0]), config.rewards[0].environment, tmp_path / "calls"


def test_a_worker_that_hangs_in_a_call_is_killed_after_call_timeout_s_and_the_call_is_not_retried(tmp_path):
    reward, env, calls = _hangs_in_first_call(tmp_path, call_timeout_s=2)
    first, helper = reward.worker.pid, None
    try:
        start = time.monotonic()
        with pytest.raises(
            WorkerError,
            match=r"longer than call_timeout_s=2 s to answer 'score' \(it was killed; "
            r"the call is not retried",
        ) as err:
            reward(prompt=["a", "b"])
        elapsed = time.monotonic() - start
        helper = int(re.search(r"helper pid (\d+)", err.value.stderr).group(1))
        _names_all(err.value, env, "HangsInFirstCall: hanging in the call")
        assert 2.0 <= elapsed < 2.0 + 10.0  # one wait of call_timeout_s, then the kill
        assert calls.read_text().split() == [str(first)]  # called once: not retried
        assert worker_pids() == set() and reward.worker.pid is None
        assert gone_within(helper, 5.0), "the process the reward started outlived its killed worker"
        assert reward.worker.restarts == 0
        out = reward(prompt=["a", "b"])  # a fresh worker, counted as a restart
        second = reward.worker.pid
        assert list(out.rewards) == [1.0, 1.0] and second not in (None, first) and reward.worker.restarts == 1
        assert calls.read_text().split() == [str(first), str(second)]
    finally:
        if helper is not None and alive(helper):
            os.kill(helper, signal.SIGKILL)
        reward.close()


def test_a_worker_killed_after_a_call_timeout_restarts_within_max_restarts(tmp_path):
    reward, env, calls = _hangs_in_first_call(tmp_path, call_timeout_s=1, max_restarts=0)
    with pytest.raises(WorkerError, match="longer than call_timeout_s=1 s"):
        reward(prompt=["a"])
    with pytest.raises(
        WorkerError,
        match=r"killed after a call ran past call_timeout_s; it was restarted 0 "
        r"time\(s\) already \(max_restarts: 0\)",
    ) as err:
        reward(prompt=["a"])
    assert err.value.entry == "broken" and env.describe() in str(err.value)
    assert len(calls.read_text().split()) == 1 and reward.worker.pid is None
    reward.close()


def test_a_worker_that_dies_in_every_call_fails_after_one_restart_and_retry():
    reward, env = _load(f"{HERE}:AlwaysDies")
    with pytest.raises(WorkerError, match="died .*again when the call was retried") as err:
        reward(prompt=["a"])
    _names_all(err.value, env, "AlwaysDies: segfault-like exit")
    assert reward.worker.restarts == 1
    reward.close()
    reward, env = _load(f"{HERE}:AlwaysDies", max_restarts=0)
    with pytest.raises(WorkerError, match=r"restarted 0 time\(s\) already \(max_restarts: 0\)") as err:
        reward(prompt=["a"])
    _names_all(err.value, env, "AlwaysDies")
    reward.close()


def test_a_malformed_answer_stops_the_worker():
    reward, env = _load(f"{HERE}:Malformed")
    with pytest.raises(WorkerError, match="malformed") as err:
        reward(prompt=["a"])
    _names_all(err.value, env, "Malformed: answering nonsense")
    assert reward.worker.pid is None and worker_pids() == set()
    reward.close()


def test_a_reward_that_raises_is_its_own_error_and_the_worker_lives_on():
    reward, env = _load(f"{HERE}:Raises")
    with pytest.raises(RewardExecutionError, match="the reward's own bug") as err:
        reward(prompt=["a"])
    assert not isinstance(err.value, WorkerError) and env.describe() in str(err.value)
    assert reward.worker.pid is not None and reward.worker.restarts == 0
    reward.close()


def test_an_unknown_reward_in_the_worker_names_the_entry():
    from rewardzoo.errors import RegistryError

    with pytest.raises(RegistryError, match="no_such_module") as err:
        _load("no_such_module:Reward")
    assert err.value.entry == "broken"


def test_a_requirement_that_does_not_resolve_is_a_config_error_with_pips_last_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("REWARDZOO_ENVS", str(tmp_path / "envs"))
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "15")
    entry = {
        "name": "broken",
        "reward_model": f"{HERE}:Length",
        "environment": {"requirements": ["rewardzoo-test-no-such-distribution==9.9.9"], "system_site_packages": True},
    }
    with pytest.raises(ConfigError, match="building the environment .* failed") as err:
        RewardLoader().load(entry)
    assert (err.value.entry, err.value.field) == ("broken", "environment")
    assert "rewardzoo-test-no-such-distribution" in str(err.value)
    assert "No matching distribution" in str(err.value) or "Could not find a version" in str(err.value)
    assert [p.name for p in (tmp_path / "envs").iterdir() if p.is_dir()] == []  # the half-built venv is gone
