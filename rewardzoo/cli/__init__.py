"""The command line, ``rewardzoo ...``: ``commands`` (the parser and one function a command), ``demo``,
``lint`` (reward-hacking warnings from the cards) and ``tables`` (plain-text tables).

A front door: may import every layer below (see :mod:`rewardzoo`).
"""

from __future__ import annotations

from .commands import main

__all__ = ["main"]
