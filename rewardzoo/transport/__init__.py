"""The network transport: how samples and scores travel between processes, and the Python client.

- :mod:`~rewardzoo.transport.wire` — the wire format of ``rewardzoo serve`` (MessagePack or JSON, never a pickle);
- :mod:`~rewardzoo.transport.http` — the one HTTP client (retries with backoff, Retry-After honoured);
- :mod:`~rewardzoo.transport.served` — a connection to a server: its reward list, requests split with groups whole;
- :mod:`~rewardzoo.transport.client` — :class:`RewardClient` and :func:`multi_score`, for your own loop.

``wire``, ``http`` and ``served`` may import only :mod:`rewardzoo.errors` and :mod:`rewardzoo.shared`: the
``remote`` reward (``rewards/remote.py``), the VLM endpoint backend and the server build on them. ``client``
answers with the engine's :class:`~rewardzoo.RewardResult`, so it is a front door (it may import the core and
``integrations.common``); its names here are imported on first use, so importing the transport stays light.
"""

from __future__ import annotations

from ..shared.imports import lazy_getattr

_LAZY = {
    "RewardClient": "rewardzoo.transport.client",
    "multi_score": "rewardzoo.transport.client",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr("rewardzoo.transport", _LAZY)
