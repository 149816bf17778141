"""Reward implementations, one family per file, grouped by modality; the contract is in ``base`` and ``info``.

The contract (``base``: Reward, Inputs, invoke, validation; ``info``: RewardInfo) may import only
:mod:`rewardzoo.errors` and :mod:`rewardzoo.shared`. The families (``image/``, ``video/``, ``audio/``,
``group/``, ``text/``, ``vlm/``, ``remote``) may import the contract, each other, :mod:`rewardzoo.shared`,
:mod:`rewardzoo.transport` (wire, http, served) and :mod:`rewardzoo.errors`; never the engine, the config or a
front door. A helper used by one family lives beside it (``vlm/judging.py``, ``image/detections.py``).
"""
