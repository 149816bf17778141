"""Verifier rewards (ocr, video_ocr, nsfw_safety, geneval, image_reward): no hub access.

The OCR and NudeNet tests use the real weights shipped in the rapidocr-onnxruntime and nudenet
wheels; media are made by the tests (``media.py``).
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
