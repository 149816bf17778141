"""Audio test fixtures: synthetic signals, one DNSMOS instance per session, a tiny random-init CLAP."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def dnsmos():
    from rewardzoo.rewards.audio.dnsmos import DNSMOS

    return DNSMOS()


@pytest.fixture(scope="session")
def dnsmos_personalized():
    from rewardzoo.rewards.audio.dnsmos import DNSMOS

    return DNSMOS(personalized=True)


@pytest.fixture(scope="session")
def speechmos_run():
    """speechmos's own DNSMOS (librosa front end), the reference: x float (time,) at 16 kHz -> dict."""
    from speechmos import dnsmos as reference

    def run(x: np.ndarray, personalized: bool = False) -> dict:
        out = reference.run(
            np.asarray(x, dtype=np.float32), 16000, model_type="dnsmos_personalized" if personalized else "dnsmos"
        )
        return {"ovrl": out["ovrl_mos"], "sig": out["sig_mos"], "bak": out["bak_mos"], "p808": out["p808_mos"]}

    return run


@pytest.fixture(scope="session")
def tiny_clap_dir(tmp_path_factory):
    """A random-init ClapModel (tiny HTSAT + RoBERTa) and ClapProcessor saved like a hub checkpoint."""
    from rewardzoo.testing import tiny_clap_dir as build

    return str(build(tmp_path_factory.mktemp("tiny_clap"), seed=0))
