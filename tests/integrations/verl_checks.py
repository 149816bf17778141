"""Run in the verl test environment (tests/integrations/test_verl.py starts it): verl's own reward loop scores a
batch with ``rewardzoo.integrations.verl.compute_score`` as ``reward.custom_reward_function``.

stdin: ``{"tokenizer": DIR, "reward_kwargs": {...}, "samples": [{prompt, response, data_source, extra_info}],
"mode": "worker" | "manager"}``. ``worker``: ``RewardLoopWorker.compute_score_batch`` on this process's event loop
(a failure is answered as ``{"error": type, "message": ...}``); ``manager``: ``RewardLoopManager`` with its Ray
actors under a local Ray (2 CPUs), ``compute_rm_score``. stdout (last line): JSON.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl import DataProto


def config(tokenizer: str, reward_kwargs: dict, num_workers: int = 1):
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": tokenizer, "tokenizer_path": None}},
            "reward": {
                "num_workers": num_workers,
                "reward_model": {"enable": False, "enable_resource_pool": False, "model_path": None},
                "custom_reward_function": {
                    "path": "pkg://rewardzoo.integrations.verl",
                    "name": "compute_score",
                    "reward_kwargs": reward_kwargs,
                },
                "reward_manager": {"source": "register", "name": "naive"},
                "sandbox_fusion": None,
            },
        }
    )


def batch(tokenizer_dir: str, samples: list[dict]) -> DataProto:
    """A rollout batch as verl's agent loop leaves it: left-padded prompts, right-padded responses."""
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    prompts = [tok(s["prompt"])["input_ids"] for s in samples]
    responses = [tok(s["response"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for s in samples]
    p_len, r_len = max(map(len, prompts)), max(map(len, responses)) + 2
    pad = tok.pad_token_id
    prompt_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    mask = torch.tensor(
        [
            [0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r))
            for p, r in zip(prompts, responses)
        ]
    )
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_ids,
            "responses": response_ids,
            "attention_mask": mask,
            "input_ids": torch.cat([prompt_ids, response_ids], 1),
        },
        non_tensors={
            "data_source": np.array([s["data_source"] for s in samples], dtype=object),
            "reward_model": np.array([{"ground_truth": s.get("ground_truth", "")} for s in samples], dtype=object),
            "extra_info": np.array([dict(s["extra_info"]) for s in samples], dtype=object),
        },
    )


def plain(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    return value


def main() -> None:
    job = json.load(sys.stdin)
    data = batch(job["tokenizer"], job["samples"])
    cfg = config(job["tokenizer"], job["reward_kwargs"], job.get("num_workers", 1))
    if job["mode"] == "worker":
        from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
        from verl.utils.ray_utils import get_event_loop

        worker = RewardLoopWorker(cfg)
        try:
            outputs = get_event_loop().run_until_complete(worker.compute_score_batch(data))
        except Exception as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
            return
        print(
            json.dumps(
                {
                    "outputs": [
                        {
                            "reward_score": plain(o["reward_score"]),
                            "reward_extra_info": {k: plain(v) for k, v in o["reward_extra_info"].items()},
                        }
                        for o in outputs
                    ]
                }
            )
        )
        return
    import ray
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"], "HF_HUB_OFFLINE": "1"}},
    )
    try:
        manager = RewardLoopManager(cfg)
        out = manager.compute_rm_score(data)
        pids = ray.get([w.__ray_call__.remote(lambda self: os.getpid()) for w in manager.reward_loop_workers])
    finally:
        ray.shutdown()
    print(
        json.dumps(
            {
                "rm_scores": out.batch["rm_scores"].tolist(),
                "keys": out.meta_info["reward_extra_keys"],
                "extra": {k: [plain(v) for v in out.non_tensor_batch[k]] for k in out.meta_info["reward_extra_keys"]},
                "worker_pids": pids,
                "driver_pid": os.getpid(),
            }
        )
    )


if __name__ == "__main__":
    main()
