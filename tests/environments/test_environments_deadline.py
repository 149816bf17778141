"""An entry's deadline in a worker process: past ``timeout_s`` the worker is killed (with what its reward started)
and restarted by the next call; a required entry fails naming itself, an optional one abstains."""

from __future__ import annotations

import os
import re
import signal
import time

import numpy as np
import pytest

from rewardzoo import RewardProcessor, Sample
from rewardzoo.core.deadlines import stuck_calls
from rewardzoo.errors import DeadlineError

from .conftest import HERE, alive, gone_within, here_env, needs_linux, worker_pids

pytestmark = [needs_linux, pytest.mark.usefixtures("no_leftover_workers")]


def _entries(tmp_path, optional: bool) -> list[dict]:
    return [
        {
            "name": "hangs",
            "reward_model": f"{HERE}:HangsInFirstCall",
            "device": "cpu",
            "kwargs": {"marker": str(tmp_path / "calls")},
            "environment": here_env(call_timeout_s=600),
            "timeout_s": 1.0,
            "optional": optional,
        },
        {"name": "len", "reward_model": f"{HERE}:Length", "device": "cpu"},
    ]


@pytest.mark.parametrize("optional", [True, False], ids=["optional", "required"])
def test_a_worker_past_the_entry_deadline_is_killed_and_restarted(tmp_path, optional):
    proc = RewardProcessor(_entries(tmp_path, optional))
    worker = proc.rewards["hangs"].worker
    first, helper = worker.pid, None
    samples = [Sample(prompt="ab", completion="x"), Sample(prompt="abc", completion="yz")]
    try:
        start = time.monotonic()
        if optional:
            result = proc(samples)
            assert result.abstained == {"hangs": [0, 1]} and np.isnan(result.rewards["hangs"]).all()
            assert result.applied == [["len"], ["len"]] and np.isfinite(result.total).all()
        else:
            with pytest.raises(DeadlineError, match=r"reward 'hangs'.*deadline.*killed") as err:
                proc(samples)
            assert err.value.reward == "hangs" and err.value.samples == (0, 1)
        assert 1.0 <= time.monotonic() - start < 1.0 + 10.0  # the deadline, not call_timeout_s
        assert stuck_calls() == 0  # nothing left running here: the worker was killed instead
        stderr = worker.stderr_tail or (tmp_path / "calls").read_text()
        found = re.search(r"helper pid (\d+)", stderr)
        helper = int(found.group(1)) if found else None
        assert worker.pid is None and worker_pids() == set()
        if helper is not None:
            assert gone_within(helper, 5.0), "the process the reward started outlived its killed worker"
        result = proc(samples)  # a fresh worker, counted as a restart
        assert result.rewards["hangs"].tolist() == [1.0, 1.0] and worker.pid not in (None, first)
        assert worker.restarts == 1 and result.abstained == {}
    finally:
        if helper is not None and alive(helper):
            os.kill(helper, signal.SIGKILL)
        proc.close()
