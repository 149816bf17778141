"""Rewards in their own Python environments: built venvs and the worker processes that run rewards in them.

- :mod:`~rewardzoo.environments.venvs` — the interpreter of an ``environment:`` (an existing one, or a venv built
  once under a cache folder keyed by the requirements, the Python version and rewardzoo's version);
- :mod:`~rewardzoo.environments.channel` — the framed wire-format messages between parent and worker over a
  Unix domain socket (loopback TCP where there is none), large arrays in shared memory;
- :mod:`~rewardzoo.environments.workers` — a worker process's lifecycle (start, health, restart, stop) and the
  pool that gives entries with the same environment one worker;
- :mod:`~rewardzoo.environments.reward` — :class:`WorkerReward`, the entry's reward in the parent;
- :mod:`~rewardzoo.environments.child` — the worker's main (``python -m rewardzoo.environments.child``), a front
  door like ``serve``.

Part of the core (the loader builds worker-backed entries): it may import the rewards, the contract, the
transport, shared and errors; only ``child`` (a front door) imports the serving code.
"""
