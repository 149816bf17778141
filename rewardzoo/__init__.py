"""rewardzoo: a multimodal reward zoo for RL fine-tuning of image, video, audio and sequence generators.

The public face is small and light (importing it does not import torch)::

    import rewardzoo
    rewardzoo.list_rewards()                        # registry rows, no model imported
    cfg = rewardzoo.load_config("rewards.yaml")
    train, evaluate = rewardzoo.build_processors(cfg)  # each unique model loaded once
    result = train([rewardzoo.Sample(image="a.png", prompt="a cat")])
    result.rewards, result.total, result.applied

The package is built in layers, lowest first, a folder each; a module imports only its own layer and those
below it (``tests/no_extras/test_core_imports.py`` holds the table and checks it): ``errors``, ``shared/``, ``spec/``
(value types), ``transport/``, ``rewards/`` (the contract in ``base`` and ``info``, then the families),
``environments/``, ``registry`` and ``catalog/`` (the cards' index, the cards), ``core/`` (resolution, loader,
engine, processors), ``monitor/``, ``jobs/``, the front doors (``cli/``, ``serve/``, ``ray/``, ``integrations/``,
``report/``), which nothing below imports, and ``testing/``. This root holds ``__version__`` and the public names, each imported on
first use.
"""

from __future__ import annotations

from .shared.imports import lazy_getattr

__version__ = "0.1.0"

_LAZY = {
    "Sample": "rewardzoo.spec.sample",
    "RewardSpec": "rewardzoo.spec.config",
    "RewardConfig": "rewardzoo.spec.config",
    "load_config": "rewardzoo.core.resolve",
    "RewardLoader": "rewardzoo.core.loader",
    "RewardProcessor": "rewardzoo.core.processor",
    "RewardMonitor": "rewardzoo.monitor",
    "RewardResult": "rewardzoo.core.engine",
    "load_reward": "rewardzoo.core.api",
    "differentiable": "rewardzoo.core.differentiable",
    "Inputs": "rewardzoo.rewards.base",
    "RewardInfo": "rewardzoo.rewards.info",
    "AsyncRewardRunner": "rewardzoo.core.async_runner",
    "RewardTimeoutError": "rewardzoo.errors",
    "DeadlineError": "rewardzoo.errors",
    "RunnerClosedError": "rewardzoo.errors",
    "RunnerStateError": "rewardzoo.errors",
    "DistributedRewardProcessor": "rewardzoo.core.distributed",
    "RemoteRankError": "rewardzoo.errors",
    "rank_ordered": "rewardzoo.core.distributed",
    "build_processors": "rewardzoo.core.api",
    "list_rewards": "rewardzoo.registry",
    "register": "rewardzoo.registry",
    "resolve": "rewardzoo.registry",
    "PointwiseReward": "rewardzoo.rewards.base",
    "GroupwiseReward": "rewardzoo.rewards.base",
    "RewardOutput": "rewardzoo.rewards.base",
    "RewardZooError": "rewardzoo.errors",
    "ConfigError": "rewardzoo.errors",
    "RegistryError": "rewardzoo.errors",
    "MissingExtraError": "rewardzoo.errors",
    "InputError": "rewardzoo.errors",
    "RewardOutputError": "rewardzoo.errors",
    "RewardExecutionError": "rewardzoo.errors",
}

__all__ = sorted(_LAZY) + ["__version__"]


#: Subpackages reachable as attributes (``rewardzoo.integrations.trl_reward_funcs``), imported on first use.
_SUBPACKAGES = ("integrations", "testing")


__getattr__ = lazy_getattr("rewardzoo", _LAZY, _SUBPACKAGES)

# the trainers' own construction calls of a reward class, refused by their front doors (rewardzoo.shared.foreign)
from . import integrations  # noqa: E402, F401


def __dir__() -> list[str]:
    return __all__
