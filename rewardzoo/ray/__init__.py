"""Offline scoring on Ray Data: ``rewardzoo score ... --engine ray`` and :func:`score_dataset`.

- ``engine`` — the driver's run and :class:`~rewardzoo.ray.engine.ChunkScorer`, the actors scoring one chunk a call;
- ``inputs`` — the actors' media decoding (paths, a Parquet file's encoded bytes);
- ``startup`` — the one Ray start-up (also Ray Serve's, for ``rewardzoo serve --ray``).

Importing it imports ``ray`` (``pip install 'rewardzoo[ray]'``); ``import rewardzoo`` never does. A front door: may
import every layer below, the job layer included (see :mod:`rewardzoo`), never ``cli``. How a run goes and why:
``docs/ray.md``.
"""

from __future__ import annotations

from .engine import score_dataset

__all__ = ["score_dataset"]
