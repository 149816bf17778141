"""Text rewards: sequence reward models over prompt + completion tokens.

- ``sequence_reward``: ``SequenceRewardModel`` (scalar / binned heads, losses) and the ``sequence_reward`` reward;
- ``implicit_prm``: ``ImplicitPRM`` (PRIME dense rewards and loss) and the ``implicit_prm`` reward.

Their backbones, LoRA scopes and tokenisation are the floor's :mod:`rewardzoo.rewards.models.text`. Modules import
torch; this package file does not. Imports as every family does (see :mod:`rewardzoo.rewards`).
"""
