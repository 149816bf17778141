"""verl's own reward loop (verl 0.9.1, in its test environment: tests/integrations/trainer_envs.py) scores with
``rewardzoo.integrations.verl.compute_score``: ``RewardLoopWorker.compute_score_batch`` in process and
``RewardLoopManager`` with its Ray actors under a real local Ray, on a tiny text reward model
(``sequence_reward`` over a saved GPT-2 classifier) and a model-free reward; the scores equal the in-process
processor's on the same prompts and completions, and a failing sample's error reaches verl."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rewardzoo.core.processor import RewardProcessor
from rewardzoo.core.resolve import load_config
from rewardzoo.spec.sample import Sample

from .trainer_envs import run_in, verl_python

SAMPLES = [
    ("what is the answer", "the answer is yes", 0),
    ("what is the answer", "no", 0),
    ("how fast", "the cat ran fast because so", 1),
    ("how fast", "slow", 1),
    ("why", "because the dog sat on the mat", 2),
]


@pytest.fixture(scope="module")
def python(tmp_path_factory):
    return verl_python(tmp_path_factory)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from rewardzoo.testing.text import tiny_text_models

    return tiny_text_models(tmp_path_factory.mktemp("verl-text"))


def entries(models):
    return [
        {
            "name": "words",
            "reward_model": "tests.integrations.per_sample_rewards:Words",
            "batch_size": 4,
            "kwargs": {"fail_on": "question"},
        },  # a word of the tiny tokenizer
        {
            "name": "rm",
            "reward_model": "sequence_reward",
            "model_path": models["gpt2_cls"],
            "device": "cpu",
            "weight": 0.5,
        },
    ]


def job(models, mode, samples=SAMPLES, **kwargs):
    return {
        "tokenizer": models["gpt2_cls"],
        "mode": mode,
        "reward_kwargs": {"rewards": entries(models), "max_wait_ms": 50, **kwargs},
        "samples": [
            {"prompt": p, "response": r, "data_source": "qa", "extra_info": {"prompt": p, "index": i}}
            for p, r, i in samples
        ],
    }


def expected(models):
    """The in-process processor's scores (this environment's transformers) on the same prompt/completion pairs."""
    with RewardProcessor(load_config({"rewards": entries(models)}).rewards) as processor:
        return processor([Sample(prompt=p, completion=r, dataset="qa") for p, r, _ in SAMPLES])


def test_reward_loop_worker_scores_as_the_processor(python, models):
    out = run_in(python, "verl_checks.py", job(models, "worker"))
    want = expected(models)
    got = out["outputs"]
    np.testing.assert_allclose([o["reward_score"] for o in got], want.total, atol=1e-5, rtol=0)
    for name in ("words", "rm"):
        np.testing.assert_allclose([o["reward_extra_info"][name] for o in got], want.rewards[name], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(
        [o["reward_extra_info"]["words"] for o in got], [len(r.split()) for _, r, _ in SAMPLES]
    )
    assert np.std(want.rewards["rm"]) > 1e-4


def test_a_failing_sample_fails_the_batch_in_verl_with_rewardzoos_error(python, models):
    out = run_in(python, "verl_checks.py", job(models, "worker", SAMPLES[:2] + [("why", "a question", 2)]))
    assert out.get("error") == "RewardExecutionError" and "words" in out["message"] and "explodes" in out["message"]


def test_reward_loop_manager_under_ray(python, models):
    out = run_in(python, "verl_checks.py", job(models, "manager"))
    want = expected(models)
    np.testing.assert_allclose(np.sum(out["rm_scores"], axis=1), want.total, atol=1e-5, rtol=0)
    assert set(out["keys"]) == {"score", "words", "rm"}
    np.testing.assert_allclose(out["extra"]["rm"], want.rewards["rm"], atol=1e-5, rtol=0)
    assert out["driver_pid"] not in out["worker_pids"]  # scored in verl's Ray actor
