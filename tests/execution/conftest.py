"""Reset the records of the execution test rewards before each test."""

import pytest

from .rewards import Blocking, CenteredValue, Recorder, Rendezvous, ScratchReward


@pytest.fixture(autouse=True)
def _reset_records():
    Recorder.calls.clear()
    Recorder.threads.clear()
    CenteredValue.scored.clear()
    ScratchReward.active = ScratchReward.max_active = 0
    Blocking.release.clear()
    Blocking.started.clear()
    Rendezvous.intervals.clear()
    Rendezvous.barrier = None
    yield
    Rendezvous.barrier = None
    Blocking.release.set()  # never leave a worker thread waiting
