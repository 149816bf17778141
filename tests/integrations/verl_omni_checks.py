"""Run in the verl test environment (tests/integrations/test_verl_omni.py starts it): verl-omni's own reward managers
(``VisualRewardManager``, ``MultiVisualRewardManager``, from the unmodified snapshot in ../shared/clients) call
``rewardzoo.integrations.verl_omni.compute_score``.

verl-omni's package ``__init__`` imports its rollout adapters, which need ``vllm_omni`` (GPU only, not installable
here): ``verl_omni`` is registered as a namespace module over the snapshot's folder, so its ``__init__`` is not
run and its reward-loop modules import as they are (none of its files is changed).

stdin: ``{"snapshot": DIR, "images": [[C][H][W] uint8 lists], "prompts": [...], "reward_kwargs": {...}}``.
stdout (last line): JSON with each manager's per-sample reward_score and reward_extra_info, and the errors raised
for a sample without a prompt.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf


def load_verl_omni(snapshot: str):
    package = types.ModuleType("verl_omni")
    package.__path__ = [str(Path(snapshot) / "verl_omni")]  # a namespace over the snapshot: __init__ not run
    sys.modules["verl_omni"] = package
    from verl_omni.reward_loop.reward_manager import MultiVisualRewardManager, VisualRewardManager

    return VisualRewardManager, MultiVisualRewardManager


def config(reward_kwargs: dict, reward_functions: dict | None = None):
    pipeline = {"output_type": "image"}
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"rollout": {"pipeline": pipeline, "val_kwargs": {"pipeline": pipeline}}},
            "reward": {
                "reward_model": {"model_path": None},
                "custom_reward_function": {
                    "path": "pkg://rewardzoo.integrations.verl_omni",
                    "name": "compute_score",
                    "reward_kwargs": reward_kwargs,
                },
                "reward_functions": reward_functions,
            },
        }
    )


def batch(images: np.ndarray, prompts: list):
    from verl import DataProto

    n = len(images)
    return DataProto.from_dict(
        tensors={"responses": torch.from_numpy(images)},
        non_tensors={
            "data_source": np.array(["t2i"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": ""}] * n, dtype=object),
            "extra_info": np.array([{"prompt": p} if p is not None else {} for p in prompts], dtype=object),
        },
    )


def plain(value):
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and np.isnan(value) else value


def run_all(manager, data):
    async def run():
        return await asyncio.gather(
            *[manager.run_single(data[i : i + 1]) for i in range(len(data))], return_exceptions=True
        )

    outputs = manager.loop.run_until_complete(run())
    out = []
    for o in outputs:
        if isinstance(o, BaseException):
            out.append(
                {
                    "error": type(o).__name__,
                    "message": str(o),
                    "cause": type(o.__cause__).__name__ if o.__cause__ else None,
                }
            )
        else:
            out.append(
                {
                    "reward_score": plain(o["reward_score"]),
                    "reward_extra_info": {k: plain(v) for k, v in o["reward_extra_info"].items()},
                }
            )
    return out


def main() -> None:
    job = json.load(sys.stdin)
    visual_cls, multi_cls = load_verl_omni(job["snapshot"])
    from verl.trainer.ppo.reward import get_custom_reward_fn

    images = np.array(job["images"], dtype=np.uint8)
    data = batch(images, job["prompts"])
    cfg = config(job["reward_kwargs"])
    visual = visual_cls(cfg, None, get_custom_reward_fn(cfg))  # verl's own loading, reward_kwargs merged
    functions = {
        "ours": {
            "path": "pkg://rewardzoo.integrations.verl_omni",
            "name": "compute_score",
            "weight": 1.0,
            "required": True,
            **job["multi_kwargs"],
        },
        "theirs": {
            "path": str(Path(job["snapshot"]) / "verl_omni/utils/reward_score/jpeg_compressibility.py"),
            "name": "compute_score",
            "weight": 0.5,
        },
    }
    multi = multi_cls(config({}, functions), None, None)
    missing = batch(images[:1], [None])
    print(
        json.dumps(
            {
                "visual": run_all(visual, data),
                "multi": run_all(multi, data),
                "visual_missing_prompt": run_all(visual, missing),
                "multi_missing_prompt": run_all(
                    multi_cls(config({}, {"ours": {**functions["ours"], **job["needs_prompt"]}}), None, None), missing
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
