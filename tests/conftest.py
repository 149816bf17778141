"""Suite-wide settings: no hub access, small thread pools on the 2-core CI machine, and (under
``scripts/test``) a check that the tests run against the installed package, not the checkout."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


import sys
from pathlib import Path

import pytest


def pytest_configure(config):
    """``REWARDZOO_TEST_INSTALLED=1`` (set by ``scripts/test``): fail at once unless ``import rewardzoo`` finds
    the installed package; the checkout's copy would hide a file missing from the wheel."""
    if not os.environ.get("REWARDZOO_TEST_INSTALLED"):
        return
    import rewardzoo

    checkout = Path(__file__).resolve().parents[1]
    where = Path(rewardzoo.__file__).resolve()
    if checkout in where.parents:
        raise pytest.UsageError(
            f"REWARDZOO_TEST_INSTALLED is set but rewardzoo was imported from the checkout "
            f"({where}): run pytest with -P and --import-mode=append, as scripts/test does"
        )


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny models run fastest on one intra-op thread (no OpenMP spin-waits on the 2-core machine); the
    setting is restored after each module. Torch is only touched when a test module already imported it, so
    the core-only environment and the import-hygiene tests are unaffected."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
