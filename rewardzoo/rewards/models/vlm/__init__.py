"""The vision-language runtime under the VLM judges (``rewards/vlm/``) and the OCR reward's ``engine: vlm``.

``backbone`` (the local Qwen-VL / LLaVA-OneVision model, queries, batches), ``llava_checkpoint`` (original
LLaVA-NeXT checkpoints mapped onto transformers' LLaVA-OneVision on load), ``backend`` (local or OpenAI-compatible,
chosen with ``backend:``), ``endpoint`` (the OpenAI-compatible client, over :mod:`rewardzoo.transport.http`),
``common`` (what every judge shares: backend options, failure policy, queries), ``judging`` (answers parsed into
scores, failure policies), ``reward_models`` (HPSv3 / VideoAlign checkpoints on the backbone) and
``transcription`` (an image's text read by a VLM). Imports as the floor does (see :mod:`rewardzoo.rewards.models`).
"""
