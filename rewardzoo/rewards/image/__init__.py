"""Image rewards, and the verifier helpers beside them: ``detections`` (detector outputs for GenEval and the safety
reward), ``text_match`` (the OCR reward's matching), ``iqa_clip`` (pyiqa's CLIP for ``image_quality``'s CLIP-based
metrics) and ``iqa_arniqa`` (its ARNIQA rows). Imports as every reward does (see :mod:`rewardzoo.rewards`).
"""
