"""Reward implementations: the contract, the models floor, then one family per folder, grouped by modality.

- ``base`` and ``info`` — the contract (Reward, Inputs, invoke, score validation; RewardInfo), a layer of its own;
- ``models/`` — the floor: CLIP / DINO / timm / ONNX backbones, weight resolution, the VLM runtime, the text
  backbones (:mod:`rewardzoo.rewards.models`);
- ``image/``, ``video/``, ``audio/``, ``text/``, ``group/``, ``vlm/``, ``references/``, ``remote`` — the families;
  a helper one family alone uses lives beside it (``image/detections.py``).

The contract may import :mod:`rewardzoo.transport`, :mod:`rewardzoo.spec`, :mod:`rewardzoo.shared` and
:mod:`rewardzoo.errors` (it uses the last two); the floor also the contract; a family also the floor, never another
family (a composite reaches another reward through its inner rewards, by registry name). Never the catalog, the
core or a front door. The layers: ``docs/architecture.md``.
"""
