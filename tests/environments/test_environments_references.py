"""Reference rewards in their own environments, on tiny weights: the ``image-reward`` package (transformers 4;
the clash test's environment, built once per run) and the ``hpsv2`` package (its environment built from the
table of references: it pins pytest==7.2.0 and protobuf<4), each scored beside rewardzoo's implementation in
this process by ``compare_reference``."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("open_clip")

from PIL import Image

import rewardzoo.testing as rzt
from rewardzoo.core.resolve import parse_spec
from rewardzoo.environments.venvs import environment_dir
from rewardzoo.jobs.compare_reference import compare_reference
from rewardzoo.rewards.references import HPSV2
from rewardzoo.spec.config import parse_environment
from rewardzoo.spec.sample import Sample

from .conftest import needs_linux
from .test_environments_clash import environment  # noqa: F401  (the transformers-4 environment)

pytestmark = [needs_linux, pytest.mark.usefixtures("no_leftover_workers")]

PROMPTS = ["a photo of a red dog", "two cats on a table", "blue sky over the sea"]


def samples(size: tuple[int, int], seed: int) -> list[Sample]:
    rng = np.random.default_rng(seed)
    return [Sample(image=Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)), prompt=p) for p in PROMPTS]


def test_the_image_reward_package_in_its_environment_against_image_reward_here(environment, tmp_path):
    from tests.verifiers.image_reward_tiny import build_reference, reference_available, write_tiny_checkpoint

    state = write_tiny_checkpoint(tmp_path, seed=5)
    spec = parse_spec({"name": "ir", "reward_model": "image_reward", "model_path": str(tmp_path), "device": "cpu"})
    batch = samples((32, 32), seed=2)
    found = compare_reference(
        spec,
        batch,
        ["a", "b", "c"],
        {"reward_model": "tests.verifiers.image_reward_tiny:TinyReferenceImageReward", "environment": environment},
    )
    assert "requirements=[" in found.where and "transformers>=4.48,<4.50" in found.where
    assert found.max_abs_difference < 1e-5 and np.std(found.ours) > 1e-3
    if reference_available():  # the same package model, here (transformers 5, helpers supplied)
        model = build_reference(tmp_path, state)
        with torch.no_grad():
            direct = [model.score(s.prompt, s.image) for s in batch]
        np.testing.assert_allclose(found.reference, direct, atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def hps_weights(tmp_path_factory):
    root = tmp_path_factory.mktemp("hps_reference")
    clip_dir = rzt.tiny_open_clip_dir(root / "tiny-open-clip", seed=0)
    checkpoint, _ = rzt.hps_checkpoint(root / "HPS_v2.1_compressed.pt", seed=123)
    return clip_dir, checkpoint


def test_the_hpsv2_package_in_the_environment_the_table_names_against_hpsv2_here(hps_weights, tmp_path_factory):
    keep = os.environ.get("REWARDZOO_TEST_ENVS")  # a folder of its own: the clash test lists the worker-envs one
    root = Path(keep) / "reference-envs" if keep else tmp_path_factory.getbasetemp() / "reference-envs"
    clip_dir, checkpoint = hps_weights
    spec = parse_spec(
        {
            "name": "hps",
            "reward_model": "hpsv2",
            "model_path": str(checkpoint),
            "device": "cpu",
            "kwargs": {"clip_model": str(clip_dir)},
        }
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REWARDZOO_ENVS", str(root))
        batch = samples((64, 64), seed=3) + samples((80, 50), seed=4)  # at the model's size, and letterboxed
        found = compare_reference(
            spec,
            batch,
            [str(i) for i in range(len(batch))],
            {"reward_model": "tests.image.hpsv2_tiny:TinyReferenceHPSv2"},
        )
        site = environment_dir(parse_environment(HPSV2.environment()))
    assert f"requirements=[{', '.join(HPSV2.requirements)}]" in found.where  # the table's environment
    assert list(site.glob("lib/python*/site-packages/pytest-7.2.0.dist-info"))  # its pins, not this process's
    assert not pytest.__version__.startswith("7.2.")
    same_size, letterboxed = np.abs(found.difference[:3]), np.abs(found.difference[3:])
    assert same_size.max() < 1e-5 and np.std(found.ours) > 1e-4
    # rewardzoo resizes in torch, the package with PIL (as tests/image/test_image_hpsv2.py allows against open_clip)
    assert letterboxed.max() < 1e-3 and found.max_abs_difference == pytest.approx(letterboxed.max())
