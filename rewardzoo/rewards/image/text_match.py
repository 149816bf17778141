"""Text matching for verifier rewards: the quoted target of a prompt, normalisation, edit distance.

Standard library only. The OCR reward's formula (flow_grpo's ``ocr.py``) is built from these parts:
``distance = 0`` when the normalised target occurs in the normalised recognised text, else their
Levenshtein distance, capped at the target's length; ``score = 1 - distance / len(target)``.
"""

from __future__ import annotations

import re


def quoted_target(prompt: str) -> str:
    """The text between the first pair of double quotes of ``prompt``; the whole prompt when it has none.

    Follows ``prompt.split('"')[1]`` (flow_grpo): with a single, unclosed quote the target runs to the
    end of the prompt. The result may be empty (``'""'``); callers decide whether that is an error.
    """
    return prompt.split('"')[1] if '"' in prompt else prompt


def normalize(text: str, *, whitespace: bool = False) -> str:
    """Lower-cased with the ASCII spaces removed (flow_grpo's ``replace(' ', '').lower()``; tabs and
    newlines are kept, as there); ``whitespace``: every whitespace character removed (verl-omni's
    ``re.sub(r"\\s+", "", text).lower()`` in ``genrm_ocr.py``, for a VLM's multi-line transcription)."""
    return re.sub(r"\s+", "", text).lower() if whitespace else text.replace(" ", "").lower()


def levenshtein(a: str, b: str) -> int:
    """Levenshtein distance (unit-cost insertions, deletions and substitutions) between ``a`` and ``b``."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def capped_distance(recognized: str, target: str, *, containment: bool = True) -> int:
    """``min(levenshtein(recognized, target), len(target))``, and 0 when ``containment`` and ``target``
    occurs in ``recognized``. Both strings are taken as given (normalise them first)."""
    if containment and target in recognized:
        return 0
    cap = len(target)
    if abs(len(recognized) - len(target)) >= cap:  # the distance is at least the length difference
        return cap
    return min(levenshtein(recognized, target), cap)


def match_score(recognized: str, target: str, *, containment: bool = True) -> float:
    """``1 - capped_distance / len(target)`` on the normalised texts, in [0, 1].

    ValueError when the normalised target is empty (the formula divides by its length).
    """
    recognized, target = normalize(recognized), normalize(target)
    if not target:
        raise ValueError("the target text is empty after removing spaces")
    return 1.0 - capped_distance(recognized, target, containment=containment) / len(target)
