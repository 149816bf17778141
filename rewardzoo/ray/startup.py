"""The one Ray start-up of rewardzoo, for the Ray Data engine (``score --engine ray``) and Ray Serve
(``serve --ray``): join the cluster at ``--address`` or ``RAY_ADDRESS`` (which Ray jobs set), else start a fresh
local instance (design: docs/ray.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import ray


def ensure_ray(address: str | None, quiet: bool) -> str | None:
    """Join ``address`` (or ``RAY_ADDRESS``, which Ray jobs set), or start a fresh local instance sized to the
    machine; returns where the job runs ("the Ray cluster at ADDR", "a local Ray instance of N CPUs"), or None
    when this process had already initialised Ray (the caller's session, left running).

    Without an address a new instance is started even when a ``ray start`` cluster runs on this machine (a plain
    ``ray.init()`` would join that one and refuse the CPU count). The local instance gets this checkout on
    ``PYTHONPATH`` through the environment it inherits, not a job ``runtime_env``: a job runtime env makes every
    actor wait for a fresh worker process, while the raylet's prestarted workers can host the pool's actors at once.
    """
    if ray.is_initialized():
        return None
    paths = [str(Path(__file__).resolve().parents[2]), os.getcwd(), os.environ.get("PYTHONPATH", "")]
    pythonpath = os.pathsep.join(p for p in paths if p)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": not quiet, "logging_level": "ERROR"}
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": pythonpath}}, **kwargs)
        return f"the Ray cluster at {ray.get_runtime_context().gcs_address}"
    previous = os.environ.get("PYTHONPATH")  # the raylet and its workers inherit it at start; this process
    os.environ["PYTHONPATH"] = pythonpath  # gets its own back
    try:
        ray.init(address="local", num_cpus=os.cpu_count(), **kwargs)
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = previous
    return f"a local Ray instance of {os.cpu_count()} CPUs"
