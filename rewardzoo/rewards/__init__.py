"""Reward implementations: the contract, then one family per file, grouped by modality.

- ``base`` and ``info`` — the contract (Reward, Inputs, invoke, score validation; RewardInfo), a layer of its own;
- ``image/``, ``video/``, ``audio/``, ``text/``, ``group/``, ``vlm/``, ``references/``, ``remote`` — the families;
  a helper one family uses lives beside it (``vlm/judging.py``, ``image/detections.py``).

The contract may import :mod:`rewardzoo.transport`, :mod:`rewardzoo.spec`, :mod:`rewardzoo.shared` and
:mod:`rewardzoo.errors` (it uses the last two); the families also the contract and each other. Never the catalog,
the core or a front door. The layers: ``docs/architecture.md``.
"""
