"""Offline scoring on Ray Data: ``rewardzoo score ... --engine ray`` and :func:`score_dataset`.

Importing this package imports ``ray`` (``pip install 'rewardzoo[ray]'``); ``import rewardzoo`` never does.
"""

from __future__ import annotations

from .engine import score_dataset

__all__ = ["score_dataset"]
