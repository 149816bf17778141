"""Adapters for trainers that call rewards through their own protocol, one module per trainer.

``trl`` (:func:`trl_reward_funcs`), ``ddpo`` (:func:`ddpo_reward_fn`), ``alignprop`` (:func:`alignprop_reward_fn`,
differentiable), ``flow_grpo`` (:func:`flow_grpo_reward_fn`), ``flow_factory`` (:class:`RewardZooPointwise`,
:class:`RewardZooGroupwise`; importing them imports Flow-Factory), ``verl`` and ``verl_omni`` (``compute_score``
for their reward loops), ``gather`` (per-sample calls gathered into batches); ``common`` — what they share. Each
takes its config as anything :func:`rewardzoo.load_config` accepts; importing this package imports no trainer.
It registers the construction calls of trainers that build a reward class themselves (:mod:`rewardzoo.shared.foreign`;
``import rewardzoo`` imports it for that).
OpenRLHF's ``--reward.remote_url`` is served by ``rewardzoo serve`` (``POST /get_reward``).

A front door: may import every layer below (see :mod:`rewardzoo`); nothing but another front door imports it.
"""

from __future__ import annotations

from ..shared import foreign
from ..shared.imports import lazy_getattr

# Flow-Factory builds a `reward_model:` it does not know as Class(config=RewardArguments, accelerator=Accelerator):
# a rewardzoo class named there is refused with the adapter entry to write (registered at `import rewardzoo`).
foreign.register(("config", "accelerator"), "rewardzoo.integrations.flow_factory:bare_reward_refusal")

_LAZY = {
    "trl_reward_funcs": "rewardzoo.integrations.trl",
    "trl_samples": "rewardzoo.integrations.trl",
    "ddpo_reward_fn": "rewardzoo.integrations.ddpo",
    "alignprop_reward_fn": "rewardzoo.integrations.alignprop",
    "flow_grpo_reward_fn": "rewardzoo.integrations.flow_grpo",
    "RewardZooPointwise": "rewardzoo.integrations.flow_factory",
    "RewardZooGroupwise": "rewardzoo.integrations.flow_factory",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr("rewardzoo.integrations", _LAZY)
