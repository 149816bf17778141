"""The network transport: how samples and scores travel between processes.

- ``wire`` — the wire format of ``rewardzoo serve`` (MessagePack or JSON, never a pickle);
- ``http`` — the one HTTP client (retries with backoff, Retry-After honoured);
- ``served`` — a connection to a server: its reward list, requests split with groups whole;
- ``jobs`` — submit / collect: tickets posted to a server and their answers long-polled.

May import :mod:`rewardzoo.errors`, :mod:`rewardzoo.shared` and :mod:`rewardzoo.spec`. The Python client
(:class:`~rewardzoo.serve.client.RewardClient`) is a front door, in :mod:`rewardzoo.serve`.
"""
