"""The trainers' own code, from the unmodified snapshots in ``../shared/clients`` (see its README).

``client("flow_grpo")`` puts a snapshot on ``sys.path`` and returns its folder; a test that needs a client
that is missing or does not import skips with the reason, it never imitates the client.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared" / "clients"
FOLDERS = {"flow_grpo": "flow_grpo_src", "flow_factory": "flow_factory_src/src", "ddpo_pytorch": "ddpo_pytorch_src"}


def client_module(package: str, module: str):
    """Import ``module`` from the snapshot of ``package``; skip the test when it cannot be imported."""
    root = SHARED / FOLDERS[package]
    if not root.is_dir():
        pytest.skip(f"the {package} snapshot is missing ({root})")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.skip(f"{package}'s own code does not import here: {exc}")
