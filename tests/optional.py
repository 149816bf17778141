"""Optional backends for tests that also run in the core-only environment (no extra installed).

``torch`` is the module or None (parameter lists add torch cases with ``[...] if torch else []``);
``needs_torch`` skips a test without it. A test module that needs an
extra throughout uses ``pytest.importorskip`` at its top instead.
"""

from __future__ import annotations

import importlib.util

import pytest

torch = importlib.import_module("torch") if importlib.util.find_spec("torch") is not None else None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (core-only environment)")
