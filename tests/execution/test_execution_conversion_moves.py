"""The last expected reader of a converted value takes it (issue 47: no protective copy of a 4K batch, nothing held
after its call), yet writing into it changes neither another reward's input nor the caller's data."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from PIL import Image

from rewardzoo.core.processor import RewardProcessor

from .rewards import Vandal


def _processor(names):
    return RewardProcessor([{"name": n, "reward_model": "tests.execution.rewards:Vandal"} for n in names])


def _means(images):
    return [float(np.asarray(im, dtype=np.float64).mean()) for im in images]


def test_two_readers_of_one_conversion_each_see_the_original_and_the_last_takes_it():
    images = [Image.fromarray(np.full((40, 50, 3), 10 * (i + 1), np.uint8)) for i in range(3)]
    Vandal.seen = []
    result = _processor(["a", "b"])([{"image": im} for im in images])
    want = _means(images)
    np.testing.assert_allclose(result.rewards["a"], want)
    np.testing.assert_allclose(result.rewards["b"], want)  # "a" zeroed its inputs: its own copies
    first, last = Vandal.seen[:3], Vandal.seen[3:]
    assert all(f.untyped_storage().data_ptr() != g.untyped_storage().data_ptr() for f, g in zip(first, last))


@pytest.mark.parametrize("kind", ["tensor", "array"])
def test_the_callers_own_memory_is_never_handed_over(kind):
    """A uint8 (3, H, W) tensor or a writeable (H, W, 3) array converts to a view of itself: still copied."""
    rng = np.random.default_rng(0)
    raw = [rng.integers(0, 256, (30, 20, 3), dtype=np.uint8) for _ in range(2)]
    given = [torch.from_numpy(r.copy()).permute(2, 0, 1).contiguous() for r in raw] if kind == "tensor" else raw
    kept = [np.array(g) for g in given]
    result = _processor(["a"])([{"image": g} for g in given])
    np.testing.assert_allclose(result.rewards["a"], [float(r.mean()) for r in raw], rtol=1e-6)
    assert all(np.array_equal(np.asarray(g), k) for g, k in zip(given, kept))


def test_a_converted_value_is_not_held_after_its_last_reader():
    from rewardzoo.core.engine import ConversionCache, ScoreTable, as_samples, score_specs

    proc = _processor(["a"])
    samples = as_samples([{"image": Image.fromarray(np.zeros((8, 8, 3), np.uint8))} for _ in range(4)])
    cache = ConversionCache(samples)
    score_specs(proc.specs, proc.rewards, ScoreTable(proc.specs, samples), cache)
    assert cache._values == {} and cache._reads == {}
