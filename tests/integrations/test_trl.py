"""TRL's real GRPOTrainer: rewardzoo's reward functions against TRL's own reward-model path, and in training."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl", reason="TRL is not installed (the dev extra brings it)")
datasets = pytest.importorskip("datasets")

from rewardzoo.integrations import trl_reward_funcs  # noqa: E402
from rewardzoo.testing import tiny_text_models, word_tokenizer  # noqa: E402

from ..core.rewards import PromptLength, path  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tiny_text_models(tmp_path_factory.mktemp("trl_models"))


def _trainer(models, reward_funcs, tmp_path, *, processing_classes=None, steps=2, dataset=None):
    from transformers import AutoModelForCausalLM

    tokenizer = word_tokenizer()
    tokenizer.padding_side = "left"
    policy = AutoModelForCausalLM.from_pretrained(models["gpt2_policy"])
    dataset = dataset or datasets.Dataset.from_dict({"prompt": ["the cat sat", "a dog ran", "the mat", "one two"]})
    args = trl.GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                          max_completion_length=4, max_steps=steps, logging_steps=1, report_to="none",
                          use_cpu=True, save_strategy="no", bf16=False, seed=0, disable_tqdm=True)
    return trl.GRPOTrainer(model=policy, reward_funcs=reward_funcs, args=args, train_dataset=dataset,
                           processing_class=tokenizer, reward_processing_classes=processing_classes)


def _classifier_config(models):
    return {"rewards": [{"name": "rm", "reward_model": "sequence_reward", "model_path": models["gpt2_cls"],
                         "device": "cpu", "kwargs": {"add_special_tokens": False}}]}


@pytest.mark.parametrize("conversational", [False, True], ids=["standard", "conversational"])
def test_scores_equal_trls_own_reward_model_path(models, tmp_path, conversational):
    from transformers import AutoModelForSequenceClassification

    tokenizer = word_tokenizer()
    classifier = AutoModelForSequenceClassification.from_pretrained(models["gpt2_cls"]).eval()
    funcs, _ = trl_reward_funcs(_classifier_config(models), tokenizer=tokenizer)
    trainer = _trainer(models, [classifier, funcs[0]], tmp_path, processing_classes=[tokenizer, None])
    if conversational:
        prompts = [[{"role": "system", "content": "good answer"}, {"role": "user", "content": "what is one"}],
                   [{"role": "user", "content": "the cat"}]]
        completions = [[{"role": "assistant", "content": "one two"}], [{"role": "assistant", "content": "sat"}]]
    else:
        prompts, completions = ["what is one", "the cat"], [" one two", " sat on the mat"]
    inputs = [{"prompt": p} for p in prompts]
    rewards = trainer._calculate_rewards(inputs, prompts, completions, [[1], [2]])
    theirs, ours = rewards[:, 0].numpy(), rewards[:, 1].numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert np.ptp(theirs) > 0  # two different texts: the comparison is not vacuous


def test_two_grpo_steps_with_a_groupwise_reward_and_logged_extras(models, tmp_path):
    config = {"rewards": [
        {"name": "rank", "reward_model": "group_rank", "kwargs": {"base": path(PromptLength)}},
        {"name": "rm", "reward_model": "sequence_reward", "model_path": models["gpt2_cls"], "device": "cpu"},
    ]}
    calls = []
    funcs, weights = trl_reward_funcs(config, group_by="prompt")

    def spy(func):
        def wrapped(**kwargs):
            out = func(**kwargs)
            calls.append((func.__name__, len(kwargs["prompts"]), out))
            return out

        wrapped.__name__ = func.__name__
        return wrapped

    trainer = _trainer(models, [spy(f) for f in funcs], tmp_path)
    trainer.args.reward_weights = weights
    trainer.train()
    assert trainer.state.global_step == 2
    ranks = [out for name, _, out in calls if name == "rank"]
    assert ranks and all(v is not None and 0.0 <= v <= 1.0 for out in ranks for v in out)
    # groups of num_generations=2 completions of one prompt: ranks come in pairs summing to 1 (0 and 1, or ties)
    for out in ranks:
        pairs = np.asarray(out).reshape(-1, 2)
        np.testing.assert_allclose(pairs.sum(axis=1), 1.0)
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert any(k.endswith("rank/base_score") for k in logged), logged
    assert any(k.endswith("rm/num_tokens") for k in logged), logged


def test_multimodal_content_and_images_column():
    from PIL import Image

    from rewardzoo.integrations.trl import trl_samples

    img = Image.new("RGB", (4, 4))
    prompts = [[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "describe it"}]}]]
    samples = trl_samples(prompts, [[{"role": "assistant", "content": "a cat"}]], {"images": [[img]]})
    assert samples[0].prompt == "describe it" and samples[0].completion == "a cat"
    assert samples[0].condition_images == [img]


def test_group_by_prompt_makes_groups_and_rejects_other_values():
    from rewardzoo.errors import ConfigError
    from rewardzoo.integrations.trl import trl_samples

    samples = trl_samples(["a", "b", "a"], ["x", "y", "z"], {}, group_by="prompt")
    assert samples[0].group_id == samples[2].group_id != samples[1].group_id
    with pytest.raises(ConfigError, match="group_by"):
        trl_reward_funcs({"rewards": [{"name": "l", "reward_model": path(PromptLength)}]}, group_by="completion")
