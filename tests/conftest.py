"""Suite-wide settings: no hub access, and small thread pools on the 2-core CI machine."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


import sys  # noqa: E402

import pytest  # noqa: E402


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
