"""verl-omni's own reward managers (``VisualRewardManager`` and ``MultiVisualRewardManager`` from the unmodified
snapshot in ../shared/clients/verl_omni_src, commit a1139baf) score with
``rewardzoo.integrations.verl_omni.compute_score`` in the verl test environment. The snapshot's package ``__init__``
needs ``vllm_omni`` (GPU only): its reward-loop modules are loaded under a ``verl_omni`` namespace module whose
``__init__`` is not run (see verl_omni_checks.py); none of its files is changed.

Checks: scores equal the in-process processor's on the same images and prompts; rewardzoo's
``jpeg_compressibility`` equals verl-omni's own scorer beside it in ``MultiVisualRewardManager``; a rewardzoo
error reaches verl-omni (never a 0.0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from rewardzoo.core.processor import RewardProcessor
from rewardzoo.core.resolve import load_config
from rewardzoo.spec.sample import Sample

from .trainer_envs import REPO, run_in, verl_python

SNAPSHOT = REPO.parent / "shared" / "clients" / "verl_omni_src"
if not (SNAPSHOT / "verl_omni" / "reward_loop").is_dir():
    SNAPSHOT = Path("/work/shared/clients/verl_omni_src")
pytestmark = pytest.mark.skipif(
    not (SNAPSHOT / "verl_omni" / "reward_loop").is_dir(),
    reason="the verl-omni snapshot (../shared/clients/verl_omni_src) is absent",
)

BRIGHT = {
    "name": "bright",
    "reward_model": "tests.environments.worker_rewards:Brightness",
    "batch_size": 4,
    "weight": 2.0,
}
JPEG = {"name": "jpeg", "reward_model": "jpeg_compressibility"}
PROMPTS = ["a red dog", "two cats", "blue sky", "a house", "the sea"]


@pytest.fixture(scope="module")
def python(tmp_path_factory):
    return verl_python(tmp_path_factory)


@pytest.fixture(scope="module")
def outcome(python):
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (len(PROMPTS), 3, 24, 32), dtype=np.uint8)
    images[1] //= 4  # darker, more compressible: scores that differ
    out = run_in(
        python,
        "verl_omni_checks.py",
        {
            "snapshot": str(SNAPSHOT),
            "images": images.tolist(),
            "prompts": PROMPTS,
            "reward_kwargs": {"rewards": [BRIGHT, JPEG], "max_wait_ms": 50},
            "multi_kwargs": {"rewards": [JPEG]},
            "needs_prompt": {"rewards": [BRIGHT]},
        },
    )
    return images, out


def test_visual_reward_manager_scores_as_the_processor(outcome):
    images, out = outcome
    with RewardProcessor(load_config({"rewards": [BRIGHT, JPEG]}).rewards) as processor:
        want = processor(
            [Sample(image=img.transpose(1, 2, 0), prompt=p, dataset="t2i") for img, p in zip(images, PROMPTS)]
        )
    got = out["visual"]
    np.testing.assert_allclose([o["reward_score"] for o in got], want.total, atol=1e-6, rtol=0)
    for name in ("bright", "jpeg"):
        np.testing.assert_allclose([o["reward_extra_info"][name] for o in got], want.rewards[name], atol=1e-6)
    np.testing.assert_allclose(
        [o["reward_extra_info"]["bright"] for o in got], images.mean(axis=(1, 2, 3)) / 255, atol=1e-6
    )


def test_jpeg_compressibility_equals_verl_omnis_own_scorer(outcome):
    _, out = outcome
    for o in out["multi"]:
        info = o["reward_extra_info"]
        assert info["reward/ours"] == pytest.approx(info["reward/theirs"], abs=1e-9)
        assert info["reward/ours/jpeg"] == pytest.approx(info["reward/theirs"], abs=1e-9)
        assert o["reward_score"] == pytest.approx(1.5 * info["reward/theirs"], abs=1e-9)
    assert len({round(o["reward_extra_info"]["reward/theirs"], 6) for o in out["multi"]}) > 1


def test_a_rewardzoo_error_reaches_verl_omni(outcome):
    _, out = outcome
    (visual,) = out["visual_missing_prompt"]
    assert visual.get("error") == "InputError" and "prompt" in visual["message"] and "bright" in visual["message"]
    (multi,) = out["multi_missing_prompt"]  # required: true -> verl-omni re-raises, with ours as the cause
    assert multi.get("error") == "RuntimeError" and multi["cause"] == "InputError" and "prompt" in multi["message"]
