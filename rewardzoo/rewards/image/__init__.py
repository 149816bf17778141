"""Image rewards, and the verifier helpers beside them: ``detections`` (detector outputs for GenEval and the safety
reward) and ``text_match`` (the OCR reward's matching). Imports as every reward does (see :mod:`rewardzoo.rewards`).
"""
