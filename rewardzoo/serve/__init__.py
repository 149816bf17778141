"""Serving rewards over HTTP: ``rewardzoo serve CONFIG`` (uvicorn) or ``--ray`` (Ray Serve).

- :class:`~rewardzoo.serve.service.RewardService` — the loaded processor, the reward list, batch scoring;
- :func:`~rewardzoo.serve.app.build_app` — the ASGI app (Starlette) over a service;
- :func:`~rewardzoo.serve.ray_serve.reward_deployment` — the same app as a Ray Serve application, for users
  who compose their own Serve applications.

The wire format is :mod:`rewardzoo.transport.wire`; the clients are :mod:`rewardzoo.transport.client` and the
``remote`` reward. Importing this package imports no server library. A front door: it may import every layer
below it (the core, the transport, ...; see :mod:`rewardzoo`); nothing but another front door imports it.
"""

from __future__ import annotations

from ..shared.imports import lazy_getattr

_LAZY = {
    "RewardService": "rewardzoo.serve.service",
    "build_app": "rewardzoo.serve.app",
    "ServeOptions": "rewardzoo.serve.options",
    "reward_deployment": "rewardzoo.serve.ray_serve",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr("rewardzoo.serve", _LAZY)
