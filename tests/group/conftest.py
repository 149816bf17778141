"""Fixtures of the group tests; the test-local base rewards live in rewards.py (registered on import)."""

from __future__ import annotations

import numpy as np
import pytest

from . import rewards  # noqa: F401  (registers the group_test_* rewards)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
