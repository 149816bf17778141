"""Rewards in their own Python environments: built venvs and the worker processes that run rewards in them.

- ``venvs`` — the interpreter of an ``environment:`` (existing, or a venv built once and cached);
- ``channel`` — framed wire-format messages between parent and worker, large arrays in shared memory;
- ``workers`` — a worker process's lifecycle and the pool that gives one environment one worker;
- ``reward`` — :class:`~rewardzoo.environments.reward.WorkerReward`, the entry's reward in the parent.

May import the rewards, the contract, :mod:`rewardzoo.transport`, :mod:`rewardzoo.spec`,
:mod:`rewardzoo.shared` and :mod:`rewardzoo.errors`. The worker's main is :mod:`rewardzoo.serve.worker`.
"""
