"""Reset the call counters of the test rewards in tests/no_extras/rewards.py before each test."""

import pytest

from .rewards import CenteredLength, PromptLength


@pytest.fixture(autouse=True)
def _reset_counters():
    PromptLength.calls.clear()
    PromptLength.seen_fields.clear()
    CenteredLength.groups.clear()
    yield
