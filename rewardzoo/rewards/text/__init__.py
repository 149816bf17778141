"""Text rewards: sequence reward models over prompt + completion tokens.

- ``backbones``: the Backbone protocol, a tiny built-in transformer, the Hugging Face adapter;
- ``lora``: named LoRA scopes on attention projections;
- ``sequence_reward``: ``SequenceRewardModel`` (scalar / binned heads, losses) and the ``sequence_reward`` reward;
- ``implicit_prm``: ``ImplicitPRM`` (PRIME dense rewards and loss) and the ``implicit_prm`` reward;
- ``encoding``: prompt + completion tokenisation shared by both rewards.

Modules import torch; this package file does not. Imports as every reward does (see :mod:`rewardzoo.rewards`).
"""
