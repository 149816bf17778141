"""The text runtime under the sequence rewards (``rewards/text/``).

- ``backbones``: the Backbone protocol, a tiny built-in transformer, the Hugging Face and PaLM adapters;
- ``lora``: named LoRA scopes on attention projections;
- ``encoding``: prompt + completion tokenisation.

Modules import torch; this package file does not. Imports as the floor does (see :mod:`rewardzoo.rewards.models`).
"""
