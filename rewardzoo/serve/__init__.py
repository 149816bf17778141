"""Serving rewards over HTTP, and the clients and workers that speak the same protocol.

- ``service`` — the loaded processor, the reward list, batch scoring; ``app`` — the ASGI app (Starlette), its
  checks as ``middleware`` and its error answers as ``refusals`` (exception handlers);
  ``server`` / ``uvicorn_server`` / ``ray_serve`` — ``rewardzoo serve`` and ``--ray``;
- ``client`` — :class:`RewardClient` and :func:`multi_score`, a server called from your own loop;
- ``worker`` — the main of an ``environment:`` worker process (the same service over a socket).

A front door: may import every layer below (see :mod:`rewardzoo`). Importing it imports no server library.
"""

from __future__ import annotations

from ..shared.imports import lazy_getattr

_LAZY = {
    "RewardService": "rewardzoo.serve.service",
    "build_app": "rewardzoo.serve.app",
    "ServeOptions": "rewardzoo.serve.options",
    "reward_deployment": "rewardzoo.serve.ray_serve",
    "RewardClient": "rewardzoo.serve.client",
    "multi_score": "rewardzoo.serve.client",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr("rewardzoo.serve", _LAZY)
