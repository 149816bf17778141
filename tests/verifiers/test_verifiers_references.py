"""The ImageReward reference wrapper in this process, on the tiny weights: its calls of the ``image-reward``
package's own ``score`` against the package model called directly and against rewardzoo's ``image_reward``, and
``rewardzoo compare-reference`` printing the per-sample differences and their maximum. (The same wrapper in the
reference's own environment: tests/environments/test_environments_references.py.)"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from PIL import Image

from rewardzoo.cli import main
from rewardzoo.rewards.image.image_reward import ImageReward

from .image_reward_tiny import (
    SIZE,
    TinyReferenceImageReward,
    build_reference,
    reference_available,
    write_tiny_checkpoint,
)

pytestmark = pytest.mark.skipif(not reference_available(), reason="pip install --no-deps image-reward fairscale")

TINY = "tests.verifiers.image_reward_tiny:TinyReferenceImageReward"
PROMPTS = ["a photo of a red dog", "two cats on a table", "blue sky over the sea"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("imagereward_reference")
    return path, write_tiny_checkpoint(path, seed=3)


@pytest.fixture(scope="module")
def package(checkpoint):
    """The package's model, called directly (not through the wrapper)."""
    return build_reference(*checkpoint)


def images(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8) for _ in PROMPTS]


def test_the_wrapper_scores_as_the_package_and_as_image_reward(checkpoint, package):
    arrays = images()
    got = np.asarray(TinyReferenceImageReward(str(checkpoint[0]))(image=arrays, prompt=PROMPTS).rewards)
    with torch.no_grad():
        direct = [package.score(p, Image.fromarray(a)) for p, a in zip(PROMPTS, arrays)]
    np.testing.assert_allclose(got, direct, atol=1e-6, rtol=0)
    ours = np.asarray(ImageReward(str(checkpoint[0]))(image=arrays, prompt=PROMPTS).rewards)
    np.testing.assert_allclose(got, ours, atol=1e-5, rtol=0)
    assert np.std(direct) > 1e-3


def test_compare_reference_prints_each_difference_and_the_maximum(checkpoint, package, tmp_path, capsys):
    arrays = images(seed=1)
    with open(tmp_path / "samples.jsonl", "w") as f:
        for i, (p, a) in enumerate(zip(PROMPTS, arrays)):
            Image.fromarray(a).save(tmp_path / f"{i}.png")
            f.write(json.dumps({"image": f"{i}.png", "prompt": p}) + "\n")
    (tmp_path / "cfg.yaml").write_text(
        f"rewards:\n  - name: ir\n    reward_model: image_reward\n    model_path: {checkpoint[0]}\n    device: cpu\n"
    )
    args = [
        "compare-reference",
        "ir",
        "--input",
        str(tmp_path / "samples.jsonl"),
        "--config",
        str(tmp_path / "cfg.yaml"),
        "--reference-model",
        TINY,
        "--in-process",
    ]
    assert main([*args, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    with torch.no_grad():
        reference = [package.score(p, Image.fromarray(a)) for p, a in zip(PROMPTS, arrays)]
    ours = np.asarray(ImageReward(str(checkpoint[0]))(image=arrays, prompt=PROMPTS).rewards, dtype=np.float64)
    rows = found["samples"]
    assert [r["sample"] for r in rows] == ["line 1", "line 2", "line 3"]
    np.testing.assert_allclose([r["reference"] for r in rows], reference, atol=1e-6, rtol=0)
    np.testing.assert_allclose([r["rewardzoo"] for r in rows], ours, atol=1e-6, rtol=0)
    diffs = [r["rewardzoo"] - r["reference"] for r in rows]
    np.testing.assert_allclose([r["difference"] for r in rows], diffs, atol=1e-12)
    assert found["max_abs_difference"] == pytest.approx(max(abs(d) for d in diffs), abs=1e-12)
    assert found["max_abs_difference"] < 1e-5 and found["reward"] == "ir"
    assert found["reference"] == f"{TINY} (in this process)"

    assert main(args) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == f"ir: rewardzoo vs {TINY} (in this process)"
    assert table[1].split() == ["sample", "rewardzoo", "reference", "difference"] and len(table) == 7
    assert table[-1].startswith("max |difference|: ") and table[-1].endswith("over 3 samples")
