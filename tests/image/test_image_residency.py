"""Residency (``offload: cpu|drop``): weights leave between phases and come back bit for bit.

Families here: open_clip (clip_score), transformers CLIP (pickscore), a groupwise wrapper over open_clip
(group_rank). Scores after a wake are compared with a processor over the same model that never sleeps.
"""

from __future__ import annotations

import numpy as np
import pytest

from rewardzoo import RewardProcessor, Sample
from rewardzoo.core.loader import RewardLoader
from rewardzoo.core.residency import reward_modules
from rewardzoo.errors import ConfigError

from .media import PROMPTS, make_images


def _samples(n=4, group=False):
    images = make_images(n, size=[(64, 64)], seed=3)
    return [
        Sample(image=im, prompt=PROMPTS[i % len(PROMPTS)], group_id=i // 2 if group else None)
        for i, im in enumerate(images)
    ]


def _entries(oc_dir, hf_dir):
    return {
        "clip_score": {"reward_model": "clip_score", "model_path": str(oc_dir)},
        "pickscore": {"reward_model": "pickscore", "model_path": str(hf_dir)},
        "group_rank": {
            "reward_model": "group_rank",
            "kwargs": {"base": {"reward_model": "clip_score", "model_path": str(oc_dir)}},
        },
    }


def _bytes(processor, name):
    return processor.loader.residency.weight_bytes(processor.rewards[name])


@pytest.mark.parametrize("family", ["clip_score", "pickscore", "group_rank"])
@pytest.mark.parametrize("mode", ["cpu", "drop"])
def test_scores_after_a_wake_equal_a_resident_models(oc_dir, hf_dir, family, mode):
    entry = _entries(oc_dir, hf_dir)[family]
    samples = _samples(group=family == "group_rank")
    resident = RewardProcessor([{"name": "r", "device": "cpu", **entry}])
    expected = resident(samples).rewards["r"]
    full = _bytes(resident, "r")
    assert full > 0 and reward_modules(resident.rewards["r"])

    sleeper = RewardProcessor([{"name": "r", "device": "cpu", "offload": mode, **entry}])
    residency, reward = sleeper.loader.residency, sleeper.rewards["r"]
    assert residency.is_asleep(reward)  # asleep from the start: the first call wakes it
    assert _bytes(sleeper, "r") == (0 if mode == "drop" else full)
    for _ in range(2):  # wake, score, sleep again: twice
        np.testing.assert_array_equal(sleeper(samples).rewards["r"], expected)
        assert residency.is_asleep(reward)
    with sleeper.awake():
        assert not residency.is_asleep(reward) and _bytes(sleeper, "r") == full
        np.testing.assert_array_equal(sleeper(samples).rewards["r"], expected)
        assert not residency.is_asleep(reward)  # held awake across the calls of the block
    assert residency.is_asleep(reward)
    sleeper.wake()
    assert not residency.is_asleep(reward)
    sleeper.close()


def test_a_model_shared_with_an_offload_none_entry_stays_awake(oc_dir):
    entry = {"reward_model": "clip_score", "model_path": str(oc_dir), "device": "cpu"}
    loader = RewardLoader()
    train = RewardProcessor([{"name": "t", "offload": "drop", **entry}], loader)
    evaluate = RewardProcessor([{"name": "e", **entry}], loader)
    assert train.rewards["t"] is evaluate.rewards["e"] and loader.constructions == 1
    train.sleep()
    assert not loader.residency.is_asleep(train.rewards["t"]) and _bytes(train, "t") > 0


def test_a_shared_model_sleeps_once(oc_dir):
    entry = {"reward_model": "clip_score", "model_path": str(oc_dir), "device": "cpu"}
    loader = RewardLoader()
    a = RewardProcessor([{"name": "a", "offload": "drop", **entry}], loader)
    b = RewardProcessor([{"name": "b", "offload": "drop", **entry}], loader)
    reward = a.rewards["a"]
    assert reward is b.rewards["b"] and loader.residency.is_asleep(reward)
    b.sleep()  # already asleep: nothing written again, one wake brings it back
    a.wake()
    assert not loader.residency.is_asleep(reward) and _bytes(b, "b") > 0


def test_offload_is_parsed_strictly_and_does_nothing_on_a_model_free_reward():
    with pytest.raises(ConfigError, match="entry 'j', field 'offload': must be one of none, cpu, drop, got 'gpu'"):
        RewardProcessor([{"name": "j", "reward_model": "jpeg_compressibility", "offload": "gpu"}])
    processor = RewardProcessor([{"name": "j", "reward_model": "jpeg_compressibility", "offload": "drop"}])
    assert not processor.loader.residency.is_asleep(processor.rewards["j"])
    assert np.isfinite(processor(_samples(2)).rewards["j"]).all()


def test_the_async_runner_wakes_a_round_and_sleeps_at_finalize(oc_dir):
    entry = {
        "name": "r",
        "reward_model": "clip_score",
        "model_path": str(oc_dir),
        "device": "cpu",
        "async_reward": True,
        "batch_size": 2,
    }
    samples = _samples()
    expected = RewardProcessor([entry])(samples).rewards["r"]
    processor = RewardProcessor([{**entry, "offload": "drop"}])
    reward, residency = processor.rewards["r"], processor.loader.residency
    runner = processor.incremental(timeout=60)
    runner.add(samples[:2])
    assert not residency.is_asleep(reward)  # woken before dispatch
    runner.add(samples[2:])
    result = runner.finalize()
    np.testing.assert_array_equal(result.rewards["r"], expected)
    assert residency.is_asleep(reward)


def test_a_reward_built_by_hand_over_a_sleeping_cached_model_wakes_it(oc_dir):
    """The open_clip model is cached across loaders: a reward built directly over it (no loader, so no wake hook
    on the reward) while a processor keeps it dropped still scores on the real weights (a forward pre-hook wakes
    the module), equal to the scores before the sleep."""
    from rewardzoo.rewards.image.clip_score import ClipScore

    samples = _samples()
    sleeper = RewardProcessor(
        [{"name": "r", "reward_model": "clip_score", "model_path": str(oc_dir), "device": "cpu", "offload": "drop"}]
    )
    expected = sleeper(samples).rewards["r"]
    assert sleeper.loader.residency.is_asleep(sleeper.rewards["r"])
    direct = ClipScore(model_path=str(oc_dir), device="cpu")
    out = direct(image=[s.image for s in samples], prompt=[s.prompt for s in samples])
    scores = np.asarray(out.rewards if hasattr(out, "rewards") else out, dtype=np.float32)
    np.testing.assert_array_equal(scores, expected)
    assert not sleeper.loader.residency.is_asleep(sleeper.rewards["r"])  # woken by the forward, not left half
