"""The models floor: the model runtime every reward family builds on, beneath the families.

- ``clip`` — the one CLIP / open_clip backbone loader (cached per process, shared by every reward naming it);
- ``dino``, ``timm_backbone`` — the DINO and timm image backbones (feature extractors);
- ``onnx`` — ONNX Runtime sessions that can be released and recreated (``offload:``);
- ``weights`` — weight resolution: the local file a ``model_path`` names (a file, a directory, a URL, a hub file);
- ``groups`` — the groups of a groupwise call and win rates from a pairwise judge (``group_win_rate``, the VLM
  pairwise judges);
- ``vlm/`` — the vision-language runtime: the local Qwen-VL / LLaVA-OneVision backbone, the OpenAI-compatible
  endpoint, the backend choice, the judges' shared options and failure policies, LLaVA checkpoints, the reward-model
  heads on the backbone (HPSv3, VideoAlign), and image transcription;
- ``text/`` — the token-sequence backbones, their LoRA scopes and the prompt + completion tokenisation;
- ``sd3`` — SD3's trunk, text encoders and scheduler sigmas (DiNa-LRM); ``synchformer`` — Synchformer (av_sync);
  ``latents`` — what the latent rewards share (checkpoint folders, seeded noise, the latents' check).

May import the contract (:mod:`rewardzoo.rewards.base`, :mod:`rewardzoo.rewards.info`), :mod:`rewardzoo.shared`,
:mod:`rewardzoo.transport` and :mod:`rewardzoo.errors`; never a family (``image/``, ``video/``, ...), the catalog,
the core or a front door. Heavy backends are imported inside the functions that need them. The layers:
``docs/architecture.md``.
"""
