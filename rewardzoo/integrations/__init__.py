"""Adapters for trainers that call rewards through their own protocol, one module per trainer.

- :mod:`~rewardzoo.integrations.trl` — TRL ``GRPOTrainer(reward_funcs=...)``: :func:`trl_reward_funcs`;
- :mod:`~rewardzoo.integrations.ddpo` — ddpo-pytorch / AlignProp ``reward_fn``: :func:`ddpo_reward_fn`;
- :mod:`~rewardzoo.integrations.alignprop` — AlignProp / DRaFT / ReFL differentiable ``reward_fn``:
  :func:`alignprop_reward_fn`;
- :mod:`~rewardzoo.integrations.flow_grpo` — flow_grpo's ``multi_score`` slot: :func:`flow_grpo_reward_fn`;
- :mod:`~rewardzoo.integrations.flow_factory` — Flow-Factory ``reward_model:`` classes:
  :class:`RewardZooPointwise`, :class:`RewardZooGroupwise` (importing them imports Flow-Factory);
- :mod:`~rewardzoo.integrations.verl` — verl's reward loop ``custom_reward_function``: ``compute_score``
  (``path: pkg://rewardzoo.integrations.verl``);
- :mod:`~rewardzoo.integrations.verl_omni` — verl-omni's visual reward managers: ``compute_score``
  (``path: pkg://rewardzoo.integrations.verl_omni``);
- :mod:`~rewardzoo.integrations.gather` — what those two share: per-sample calls gathered into batches;
- OpenRLHF's ``--reward.remote_url`` is served by ``rewardzoo serve`` (``POST /get_reward``);

Each takes its config as anything :func:`rewardzoo.load_config` accepts (a path, a mapping, a loaded
config). Importing this package imports no trainer; each adapter imports only what it needs. A front door: it
may import every layer below it (see :mod:`rewardzoo`); nothing but another front door imports it.
"""

from __future__ import annotations

from ..shared.imports import lazy_getattr

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
