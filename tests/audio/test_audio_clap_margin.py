"""``clap_score`` with ``mode: retrieval_margin`` (UniRL's composite CLAP reward) on a tiny random-init ClapModel,
against the model's own forward: cosines from ``logits_per_audio / exp(logit_scale_a)``, then the formula
``w_cos * cos(a, t) + w_margin * (cos(a, t) - max_j cos(a, n_j))`` recomputed here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rewardzoo import RewardProcessor, load_config
from rewardzoo.errors import ConfigError, InputError
from rewardzoo.rewards.audio.clap import ClapScore
from rewardzoo.spec.sample import Sample

from .signals import noise, speech_like, tone

RATE = 48000
PROMPTS = ["a dog barking", "rain on a roof", "a dog barking", "birds singing at dawn"]


@pytest.fixture(scope="module")
def clips():
    """Four 10 s clips (the checkpoint's clip length: no crop, no padding on either side)."""
    return [
        tone(RATE, 10.0, freq=440).astype(np.float32),
        noise(RATE, 10.0, amp=0.1, seed=1).astype(np.float32),
        speech_like(RATE, 10.0, seed=2).astype(np.float32),
        tone(RATE, 10.0, freq=1250).astype(np.float32),
    ]


@pytest.fixture(scope="module")
def cosines(tiny_clap_dir, clips):
    """cos(clip, caption) for every clip and each caption any test uses, from ClapModel.forward."""
    from transformers import ClapModel, ClapProcessor

    captions = sorted({*PROMPTS, "bird song", "thunder", "a car horn"})
    model, processor = ClapModel.from_pretrained(tiny_clap_dir).eval(), ClapProcessor.from_pretrained(tiny_clap_dir)
    inputs = processor(text=captions, audio=clips, sampling_rate=RATE, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model(**inputs)
    matrix = (out.logits_per_audio / model.logit_scale_a.exp()).detach().numpy()
    return lambda i, caption: float(matrix[i, captions.index(caption)])


def _expected(cos, negatives, w_cos=1.0, w_margin=1.0):
    rows = []
    for i, (prompt, negs) in enumerate(zip(PROMPTS, negatives)):
        matched, neg = cos(i, prompt), [cos(i, n) for n in negs]
        rows.append((w_cos * matched + w_margin * (matched - max(neg)), matched, np.mean(neg), matched - max(neg)))
    return np.array(rows)


@pytest.fixture(scope="module")
def margin(tiny_clap_dir):
    return ClapScore(model_path=tiny_clap_dir, mode="retrieval_margin", batch_negatives=True)


def _check(out, expected):
    np.testing.assert_allclose(out.rewards, expected[:, 0], atol=1e-5)
    np.testing.assert_allclose(out.extras["matched_cosine"], expected[:, 1], atol=1e-5)
    np.testing.assert_allclose(out.extras["mismatched_cosine"], expected[:, 2], atol=1e-5)
    np.testing.assert_allclose(out.extras["retrieval_margin"], expected[:, 3], atol=1e-5)
    np.testing.assert_array_equal(out.extras["retrieval_top1"], (expected[:, 3] > 0).astype(np.float32))


def test_batch_prompts_are_the_negatives(margin, clips, cosines):
    out = margin(audio=clips, prompt=PROMPTS, audio_sample_rate=[RATE] * 4)
    distinct = list(dict.fromkeys(PROMPTS))
    negatives = [[q for q in distinct if q != p] for p in PROMPTS]  # the repeated prompt is not its own negative
    expected = _expected(cosines, negatives)
    _check(out, expected)
    hardest = expected[:, 1] - expected[:, 3]
    assert not np.allclose(hardest, expected[:, 2], atol=1e-4)  # max over the negatives, not their mean
    cosine = ClapScore(model_path=margin.model_path)(audio=clips, prompt=PROMPTS, audio_sample_rate=[RATE] * 4)
    np.testing.assert_allclose(out.extras["matched_cosine"], cosine, atol=1e-6)  # the cosine mode's score


def test_weights_and_per_sample_negatives(tiny_clap_dir, clips, cosines):
    reward = ClapScore(
        model_path=tiny_clap_dir,
        mode="retrieval_margin",
        cosine_weight=0.5,
        margin_weight=2.0,
        negatives_key="negs",
        batch_negatives=True,
    )
    metadata = [
        # cleaned as UniRL: stripped, empty and own-prompt entries dropped, duplicates once
        {"negs": ["bird song", " thunder ", "a dog barking", "", "bird song"]},
        {},  # no key: the call's other distinct prompts
        {"negs": ["a car horn"], "other": 1},
        {"negs": None},  # None counts as absent
    ]
    out = reward(audio=clips, prompt=PROMPTS, audio_sample_rate=[RATE] * 4, metadata=metadata)
    distinct = list(dict.fromkeys(PROMPTS))
    negatives = [
        ["bird song", "thunder"],
        [q for q in distinct if q != PROMPTS[1]],
        ["a car horn"],
        [q for q in distinct if q != PROMPTS[3]],
    ]
    _check(out, _expected(cosines, negatives, 0.5, 2.0))
    assert reward.info.score_range == (-4.5, 4.5) and "metadata" in reward.inputs.fields


def test_retrieval_prompts_are_a_fixed_candidate_set(tiny_clap_dir, clips, cosines):
    candidates = ["a dog barking", "rain on a roof", "birds singing at dawn", "thunder"]
    reward = ClapScore(model_path=tiny_clap_dir, mode="retrieval_margin", retrieval_prompts=candidates)
    out = reward(audio=clips, prompt=PROMPTS, audio_sample_rate=[RATE] * 4)
    _check(out, _expected(cosines, [[c for c in candidates if c != p] for p in PROMPTS]))
    with pytest.raises(InputError, match="retrieval_prompts") as info:
        reward(audio=clips[:2], prompt=["a dog barking", "a car horn"], audio_sample_rate=[RATE] * 2)
    assert (info.value.field, info.value.sample) == ("prompt", 1)


def test_bad_negatives_name_the_field_and_sample(margin, tiny_clap_dir, clips):
    with pytest.raises(InputError, match="no other distinct prompt") as info:
        margin(audio=clips[:2], prompt=["rain", "rain"], audio_sample_rate=[RATE] * 2)
    assert (info.value.field, info.value.sample) == ("prompt", 0)
    keyed = ClapScore(model_path=tiny_clap_dir, mode="retrieval_margin", negatives_key="negs")
    two = {"audio": clips[:2], "prompt": ["rain", "thunder"], "audio_sample_rate": [RATE] * 2}
    for meta, match in [
        ({"negs": ["rain", " "]}, "no caption other than the prompt"),
        ({"negs": "thunder"}, "must be a list"),
        ({"negs": ["thunder", 3]}, "must hold strings"),
        ([1, 2], "must be a mapping"),
    ]:
        with pytest.raises(InputError, match=match) as info:
            keyed(**two, metadata=[meta, {}])
        assert (info.value.field, info.value.sample) == ("metadata", 0)
    # through the processor the error names the entry too
    entry = {
        "name": "clap_score",
        "model_path": tiny_clap_dir,
        "kwargs": {"mode": "retrieval_margin", "batch_negatives": True},
    }
    processor = RewardProcessor(load_config({"rewards": [entry]}).rewards)
    samples = [Sample(audio=c, audio_sample_rate=RATE, prompt="rain") for c in clips[:2]]
    with pytest.raises(InputError, match="negative captions") as info:
        processor(samples)
    assert (info.value.reward, info.value.field, info.value.sample) == ("clap_score", "prompt", 0)
    scored = processor([Sample(audio=c, audio_sample_rate=RATE, prompt=p) for c, p in zip(clips, PROMPTS)])
    assert set(scored.extras["clap_score"]) >= {"matched_cosine", "retrieval_margin"}


def test_without_batch_negatives_a_sample_must_bring_its_own_as_unirl_requires(tiny_clap_dir, clips, cosines):
    strict = ClapScore(model_path=tiny_clap_dir, mode="retrieval_margin")
    with pytest.raises(InputError, match="batch_negatives") as info:
        strict(audio=clips, prompt=PROMPTS, audio_sample_rate=[RATE] * 4)
    assert (info.value.field, info.value.sample) == ("prompt", 0)
    keyed = ClapScore(model_path=tiny_clap_dir, mode="retrieval_margin", negatives_key="negs")
    metadata = [{"negs": ["thunder"]}, {}, {"negs": ["a car horn"]}, {"negs": ["thunder", "bird song"]}]
    with pytest.raises(InputError, match="has no 'negs'") as info:
        keyed(audio=clips, prompt=PROMPTS, audio_sample_rate=[RATE] * 4, metadata=metadata)
    assert (info.value.field, info.value.sample) == ("metadata", 1)
    metadata[1] = {"negs": ["bird song"]}  # every sample listing its own: the same scores whatever the batch
    whole = keyed(audio=clips, prompt=PROMPTS, audio_sample_rate=[RATE] * 4, metadata=metadata)
    alone = keyed(audio=clips[1:2], prompt=PROMPTS[1:2], audio_sample_rate=[RATE], metadata=metadata[1:2])
    np.testing.assert_allclose(alone.rewards, whole.rewards[1:2], atol=1e-6)
    _check(whole, _expected(cosines, [m["negs"] for m in metadata]))


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "retrieval_margin", "cosine_weight": 0.0, "margin_weight": 0.0},
        {"mode": "retrieval_margin", "margin_weight": -1.0},
        {"negatives_key": "negs"},  # the cosine mode has no negatives
        {"batch_negatives": True},
        {"mode": "retrieval_margin", "retrieval_prompts": ["a", "b"], "negatives_key": "negs"},
        {"mode": "retrieval_margin", "retrieval_prompts": ["a", " a"]},
        {"mode": "retrieval_margin", "retrieval_prompts": ["a"]},
        {"mode": "margin"},
    ],
)
def test_bad_options_are_config_errors(options):
    with pytest.raises(ConfigError):
        ClapScore.Options.from_kwargs(options, "ClapScore")
