"""Offline scoring on Ray Data: ``rewardzoo score ... --engine ray`` and :func:`score_dataset`.

Importing this package imports ``ray`` (``pip install 'rewardzoo[ray]'``); ``import rewardzoo`` never does. It
holds the engine (:mod:`~rewardzoo.ray.engine`), the actors' media decoding (:mod:`~rewardzoo.ray.inputs`) and
the one Ray start-up (:mod:`~rewardzoo.ray.startup`). A front door: it may import every layer below it, the job
layer included (see :mod:`rewardzoo`), never ``cli``; nothing but another front door imports it (``serve``
imports its start-up for Ray Serve).

How a run goes
--------------
1. **Plan, on the driver.** The driver plans the job as the local command does (:func:`~rewardzoo.jobs.plan_job`):
   it reads the light part of the input — a JSONL manifest line by line, or a Parquet file's non-binary columns —
   and makes the same checks (errors naming the line or row, datasets no reward applies to) before anything is
   scored, and cuts the rows into the same chunks (:func:`~rewardzoo.jobs.group_preserving_chunks`: about
   ``--chunk-size`` rows, a group never split, however large).
2. **One Ray Data row per chunk.** A chunk row holds its rows' indices, labels and light fields (prompts, media
   *paths*) as JSON, about 130 bytes per input row; never pixels. A Parquet file's binary media columns (encoded
   image / video / audio bytes) are read by the actors themselves, from the file, for the rows of their chunk.
3. **Actors score chunks.** ``map_batches(ChunkScorer, compute=ActorPoolStrategy(size=--actors))``: each actor
   builds the :class:`~rewardzoo.core.processor.RewardProcessor` once (each unique model loaded once per actor) and
   scores one chunk per call, decoding its media itself. Inside a chunk the processor batches as it does locally:
   each pointwise stream in plain batches of its ``batch_size`` over the chunk's applicable rows, each groupwise
   stream once per complete group (:func:`~rewardzoo.core.engine.call_plan`). Each actor has up to
   ``CHUNKS_IN_FLIGHT_PER_ACTOR`` (4) chunks queued: with Ray Data's default of 2, an actor waited for its next
   chunk about 1 s in every 7 s on the 2-core machine.
4. **Results, on the driver.** Each chunk comes back as one small JSON string (its records), in completion order;
   the driver appends them to ``OUT.partial.jsonl`` (what ``--resume`` keeps) and writes ``OUT`` (JSONL or
   Parquet) in input order at the end, atomically.

Why chunks cut on the driver, not ``groupby().map_groups()``
-------------------------------------------------------------
Results must be bit-identical to local scoring, so every reward must receive exactly the calls it receives
locally. Those calls depend on the chunks, and the chunks on the order in which groups first appear in the whole
input: a plan that needs one pass over every row's ``group_id`` whatever the engine. Given that plan, a
``groupby("chunk").map_groups(...)`` would produce the same batches after a shuffle; one Ray row per chunk is that
grouping without the shuffle. Measured on the 2-core machine (2,000 rows of paths, trivial work, a busy machine):
one row per chunk ran in 6-8 s; ``groupby().map_groups()`` took 25 s with a pool of one actor, and with a pool of
two it had not finished after three minutes (hash shuffle with 200 or 4 partitions, or the sort shuffle): the
shuffle's tasks wait for the CPUs the actor pool holds. The driver's part is small: reading and checking
100,000 JSONL rows takes 1.3 s of one core (as long as the local command's own reading), planning 0.05 s and
building the chunk rows 0.16 s.

A dying actor is restarted by Ray (``max_restarts``) and its chunk retried (``max_task_retries``); a reward error
comes back in the chunk's row and fails the job with its line, field and reward, without retries.

Where a job runs (:func:`~rewardzoo.ray.startup.ensure_ray`, also Ray Serve's start-up for ``rewardzoo serve
--ray``): the cluster at ``--address`` or ``RAY_ADDRESS`` (which Ray jobs set); otherwise a fresh local
instance (``ray.init(address="local")``: a plain ``ray.init()`` would join a ``ray start`` cluster on the
machine, or the dead one a stale address file names, and refuse the CPU count). A local instance is started with
this checkout on ``PYTHONPATH`` in the environment it inherits, not with a job ``runtime_env``: with one, every
actor waits for a fresh worker process instead of taking one of the workers the raylet prestarts (two actors ready
in 0.5-1.0 s without it, 1.3-3.2 s with it, on the busy 2-core machine).
"""

from __future__ import annotations

from .engine import score_dataset

__all__ = ["score_dataset"]
