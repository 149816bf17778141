"""TRL's real GRPOTrainer: rewardzoo's reward functions against TRL's own reward-model path, and in training."""

from __future__ import annotations

import inspect
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl", reason="TRL is not installed (the dev extra brings it)")
datasets = pytest.importorskip("datasets")

from rewardzoo.integrations import trl_reward_funcs
from rewardzoo.testing import tiny_text_models, word_tokenizer

from ..no_extras.rewards import PromptLength, path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tiny_text_models(tmp_path_factory.mktemp("trl_models"))


def _trainer(models, reward_funcs, tmp_path, *, processing_classes=None, steps=2, dataset=None):
    from transformers import AutoModelForCausalLM

    tokenizer = word_tokenizer()
    tokenizer.padding_side = "left"
    policy = AutoModelForCausalLM.from_pretrained(models["gpt2_policy"])
    dataset = dataset or datasets.Dataset.from_dict({"prompt": ["the cat sat", "a dog ran", "the mat", "one two"]})
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=4,
        max_steps=steps,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        bf16=False,
        seed=0,
        disable_tqdm=True,
    )
    return trl.GRPOTrainer(
        model=policy,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        reward_processing_classes=processing_classes,
    )


def _spy(func, calls: list, key):
    """``func`` recording ``(name, key(kwargs), output)`` of each call in ``calls``."""

    def wrapped(**kwargs):
        out = func(**kwargs)
        calls.append((func.__name__, key(kwargs), out))
        return out

    wrapped.__name__ = func.__name__
    return wrapped


def _classifier_config(models):
    return {
        "rewards": [
            {
                "name": "rm",
                "reward_model": "sequence_reward",
                "model_path": models["gpt2_cls"],
                "device": "cpu",
                "kwargs": {"add_special_tokens": False},
            }
        ]
    }


@pytest.mark.parametrize("conversational", [False, True], ids=["standard", "conversational"])
def test_scores_equal_trls_own_reward_model_path(models, tmp_path, conversational):
    from transformers import AutoModelForSequenceClassification

    tokenizer = word_tokenizer()
    classifier = AutoModelForSequenceClassification.from_pretrained(models["gpt2_cls"]).eval()
    funcs, _ = trl_reward_funcs(_classifier_config(models), tokenizer=tokenizer)
    trainer = _trainer(models, [classifier, funcs[0]], tmp_path, processing_classes=[tokenizer, None])
    if conversational:
        prompts = [
            [{"role": "system", "content": "good answer"}, {"role": "user", "content": "what is one"}],
            [{"role": "user", "content": "the cat"}],
        ]
        completions = [[{"role": "assistant", "content": "one two"}], [{"role": "assistant", "content": "sat"}]]
    else:
        prompts, completions = ["what is one", "the cat"], [" one two", " sat on the mat"]
    inputs = [{"prompt": p} for p in prompts]
    rewards = trainer._calculate_rewards(inputs, prompts, completions, [[1], [2]])
    theirs, ours = rewards[:, 0].numpy(), rewards[:, 1].numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert np.ptp(theirs) > 0  # two different texts: the comparison is not vacuous


def test_two_grpo_steps_with_a_groupwise_reward_and_logged_extras(models, tmp_path):
    config = {
        "rewards": [
            {"name": "rank", "reward_model": "group_rank", "kwargs": {"base": path(PromptLength)}},
            {"name": "rm", "reward_model": "sequence_reward", "model_path": models["gpt2_cls"], "device": "cpu"},
        ]
    }
    calls = []
    funcs, weights = trl_reward_funcs(config, group_by="prompt")
    trainer = _trainer(models, [_spy(f, calls, lambda kwargs: len(kwargs["prompts"])) for f in funcs], tmp_path)
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


def _timed(func, calls):
    """An async wrapper of a concurrent reward function recording (name, step, start, end) of each call."""

    async def wrapped(**kwargs):
        start = time.monotonic()
        out = await func(**kwargs)
        calls.append((func.__name__, kwargs["trainer_state"].global_step, start, time.monotonic()))
        return out

    wrapped.__name__ = func.__name__
    return wrapped


def test_concurrent_functions_overlap_a_served_and_a_local_slow_reward_in_each_step(models, tmp_path):
    from ..serve.helpers import Server

    slow = "tests.serve.rewards:SlowLength"
    (tmp_path / "slow.yaml").write_text(
        f"rewards:\n  - name: slow\n    reward_model: {slow}\n    kwargs: {{delay: 0.5}}\n"
    )
    server = Server(tmp_path / "slow.yaml").start()
    try:
        config = {
            "rewards": [
                {"name": "served", "reward_model": "remote", "kwargs": {"url": server.url, "rewards": ["slow"]}},
                {"name": "local", "reward_model": slow, "kwargs": {"delay": 0.5}},
            ]
        }
        funcs, weights = trl_reward_funcs(config, concurrent=True)
        assert all(inspect.iscoroutinefunction(f) for f in funcs)
        calls: list = []
        trainer = _trainer(models, [_timed(f, calls) for f in funcs], tmp_path)
        trainer.args.reward_weights = weights
        trainer.train()
    finally:
        server.stop()
    assert trainer.state.global_step == 2
    served = [c for c in calls if c[0] == "served"]
    local = [c for c in calls if c[0] == "local"]
    assert len(served) == len(local) >= 2
    for (_, step_a, start_a, end_a), (_, step_b, start_b, end_b) in zip(served, local):
        assert step_a == step_b
        assert max(start_a, start_b) < min(end_a, end_b), (served, local)  # the two calls ran at the same time
    logged = [entry for entry in trainer.state.log_history if "rewards/served/mean" in entry]
    # SlowLength scores len(prompt) both served and locally: the two functions agree in every step
    assert logged and all(e["rewards/served/mean"] == e["rewards/local/mean"] > 0 for e in logged), logged


def test_concurrent_functions_log_the_numbers_of_the_plain_ones(models, tmp_path):
    config = {
        "rewards": [
            {"name": "rank", "reward_model": "group_rank", "kwargs": {"base": path(PromptLength)}},
            {"name": "rm", "reward_model": "sequence_reward", "model_path": models["gpt2_cls"], "device": "cpu"},
        ]
    }
    histories = {}
    for concurrent in (False, True):
        funcs, weights = trl_reward_funcs(config, group_by="prompt", concurrent=concurrent)
        assert all(inspect.iscoroutinefunction(f) == concurrent for f in funcs)
        trainer = _trainer(models, funcs, tmp_path / str(concurrent))
        trainer.args.reward_weights = weights
        trainer.train()
        histories[concurrent] = [
            {k: v for k, v in entry.items() if not _is_timing(k)} for entry in trainer.state.log_history
        ]
    assert histories[True] == histories[False]
    keys = {k for entry in histories[True] for k in entry}
    assert {"reward", "rewards/rank/mean", "rewards/rm/mean"} <= keys, keys
    assert any(k.endswith("rank/base_score") for k in keys) and any(k.endswith("rm/num_tokens") for k in keys), keys


def _is_timing(key: str) -> bool:
    return any(word in key for word in ("runtime", "per_second", "time", "profiling"))


def test_concurrent_functions_score_groups_split_across_two_ranks(tmp_path):
    pytest.importorskip("torch.distributed")
    from ..ranks import launch_ranks, load_result
    from .trl_dist_worker import CONFIG, batch

    codes, logs, files = launch_ranks("tests.integrations.trl_dist_worker", tmp_path, timeout=120)
    assert codes == [0, 0], "\n".join(logs)
    funcs, _ = trl_reward_funcs(CONFIG, group_by="prompt")  # one process, every group whole
    single = [f(**batch()) for f in funcs]
    for rank, (file, log) in enumerate(zip(files, logs)):
        got = load_result(file, log)
        assert got["concurrent"] == got["plain"] == [out[rank::2] for out in single]
    assert len({v for out in single for v in out}) > 3  # distinct scores: the comparison is not vacuous


def test_a_monitor_fed_by_trls_real_training_steps(models, tmp_path):
    import json

    from rewardzoo import RewardMonitor

    config = {
        "rewards": [
            {"name": "rank", "reward_model": "group_rank", "kwargs": {"base": path(PromptLength)}, "weight": 0.5},
            {"name": "rm", "reward_model": "sequence_reward", "model_path": models["gpt2_cls"], "device": "cpu"},
        ]
    }
    log = tmp_path / "monitor.jsonl"
    monitor = RewardMonitor(config, settings={"log": str(log)})
    calls = []
    funcs, weights = trl_reward_funcs(config, group_by="prompt", monitor=monitor)
    trainer = _trainer(
        models, [_spy(f, calls, lambda kwargs: kwargs["trainer_state"].global_step) for f in funcs], tmp_path
    )
    trainer.args.reward_weights = weights
    trainer.train()
    monitor.close()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1]
    for line in lines:
        step = line["step"]
        rank = np.array([v for name, s, out in calls if name == "rank" and s == step for v in out], np.float32)
        rm = np.array([v for name, s, out in calls if name == "rm" and s == step for v in out], np.float32)
        m = line["metrics"]
        assert m["train/rank/mean"] == np.mean(rank.astype(np.float64))
        assert m["train/rm/std"] == np.std(rm.astype(np.float64))
        total = (np.float32(0.5) * rank.astype(np.float64) + rm.astype(np.float64)).astype(np.float32)
        assert m["train/total/mean"] == pytest.approx(np.mean(total.astype(np.float64)), rel=1e-6)
        assert m["train/rank/group_std"] == pytest.approx(np.mean(np.std(rank.astype(np.float64).reshape(-1, 2), 1)))
    logged = [entry for entry in trainer.state.log_history if "monitor/train/rank/mean" in entry]
    assert [entry["monitor/train/rank/mean"] for entry in logged] == pytest.approx(
        [line["metrics"]["train/rank/mean"] for line in lines]
    )


def test_an_offloaded_reward_sleeps_between_grpo_steps_and_scores_as_a_resident_one(models, tmp_path):
    from transformers import TrainerCallback

    from rewardzoo import RewardLoader, RewardProcessor
    from rewardzoo.integrations.trl import trl_samples

    entry = {**_classifier_config(models)["rewards"][0], "offload": "drop"}
    loader = RewardLoader()
    funcs, _ = trl_reward_funcs({"rewards": [entry]}, loader=loader, tokenizer=word_tokenizer())
    calls, between = [], []

    class Residency(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            reward = loader.instances[0]
            between.append((loader.residency.is_asleep(reward), loader.residency.weight_bytes(reward)))

    trainer = _trainer(models, [_spy(funcs[0], calls, lambda kw: (kw["prompts"], kw["completions"]))], tmp_path)
    trainer.add_callback(Residency())
    trainer.train()
    assert trainer.state.global_step == 2 and between == [(True, 0), (True, 0)]  # off the device between steps
    resident = RewardProcessor([{k: v for k, v in entry.items() if k != "offload"}])
    for _, (prompts, completions), out in calls:
        expected = resident(trl_samples(prompts, completions, {}, tokenizer=word_tokenizer())).rewards["rm"]
        assert np.asarray(out, dtype=np.float32).tobytes() == expected.tobytes()
