"""Load coordination: one construction per model identity per process, and no trainer preparation."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np
import pytest

import rewardzoo
from rewardzoo import DistributedRewardProcessor, RewardLoader, Sample
from rewardzoo.core.distributed import rank_ordered

from .rewards import Recorder, SlowInit, path


@pytest.fixture(autouse=True)
def _clear_built():
    SlowInit.built.clear()


def test_train_and_eval_specs_share_each_model_and_async_runs_construct_nothing():
    cfg = rewardzoo.load_config(
        {
            "rewards": [
                {"name": "slow", "reward_model": path(SlowInit), "kwargs": {"seconds": 0.0}, "async_reward": True},
                {"name": "rec", "reward_model": path(Recorder), "async_reward": True, "num_workers": 2},
                "jpeg_compressibility",
            ],
            "eval_rewards": [
                {
                    "name": "slow_eval",
                    "reward_model": path(SlowInit),
                    "kwargs": {"seconds": 0.0},
                    "batch_size": 3,
                    "applicable_datasets": ["x"],
                },
                {"name": "rec_x3", "reward_model": path(Recorder), "kwargs": {"factor": 3.0}},
                {"name": "jpeg", "reward_model": "jpeg_compressibility", "weight": 2.0},
            ],
        }
    )
    loader = RewardLoader()
    train, evaluate = rewardzoo.build_processors(cfg, loader)
    assert loader.constructions == 4  # SlowInit, Recorder, Recorder(factor=3), JPEG
    assert len(SlowInit.built) == 1
    assert train.rewards["slow"] is evaluate.rewards["slow_eval"]
    assert train.rewards["jpeg_compressibility"] is evaluate.rewards["jpeg"]
    assert train.rewards["rec"] is not evaluate.rewards["rec_x3"]
    samples = [Sample(prompt="ab", metadata={}, image=np.zeros((8, 8, 3), np.uint8), dataset="x")] * 5
    for proc in (train, evaluate, DistributedRewardProcessor(cfg.rewards, loader)):
        with proc.incremental() as runner:
            runner.add(samples)
            runner.finalize()
    assert loader.constructions == 4 and len(SlowInit.built) == 1


def test_concurrent_loads_of_one_identity_construct_it_once():
    loader = RewardLoader()
    spec = {"name": "slow", "reward_model": path(SlowInit), "kwargs": {"seconds": 0.2}}
    got = []
    threads = [threading.Thread(target=lambda: got.append(loader.load(spec))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(got) == 4 and all(r is got[0] for r in got)
    assert loader.constructions == 1 and len(SlowInit.built) == 1


def test_rank_ordered_without_a_process_group_just_runs_the_block():
    ran = []
    with rank_ordered():
        ran.append(1)
    assert ran == [1]
    with pytest.raises(KeyError), rank_ordered():
        raise KeyError("inside")


# calls a reward must never make on itself (a trainer prepares its policy, never the reward models)
FORBIDDEN = re.compile(
    r"\.prepare\(|\bimport accelerate\b|\bfrom accelerate\b|DistributedDataParallel\("
    r"|FullyShardedDataParallel\(|\bfully_shard\(|deepspeed\.initialize|prepare_model\("
)


@pytest.mark.parametrize(
    "source",
    sorted(str(p.relative_to(Path(rewardzoo.__file__).parent)) for p in Path(rewardzoo.__file__).parent.rglob("*.py")),
)
def test_no_reward_or_engine_module_prepares_itself_for_a_trainer(source):
    text = (Path(rewardzoo.__file__).parent / source).read_text()
    text = re.sub(r"\nif TYPE_CHECKING:\n(    [^\n]*\n|\n)+", "\n", text)  # annotations only, never run
    code = "\n".join(line.split("#")[0] for line in text.splitlines())
    assert not FORBIDDEN.search(code), f"{source} calls trainer/accelerator preparation: {FORBIDDEN.search(code)[0]}"
