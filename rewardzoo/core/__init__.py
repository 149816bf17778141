"""The scoring core: from specs to validated scores.

- ``resolve`` — a config as named by a user, read and resolved; ``loader`` — specs to loaded rewards, each model
  once; ``fields`` — a sample's fields converted for a reward; ``engine`` — the scoring steps and the result;
- front ends over the engine: ``processor`` (inline), ``async_runner`` (incremental), ``distributed`` (ranks),
  ``differentiable`` (gradients); ``advantages`` — group-relative advantages; ``api`` — the public shortcuts;
- ``residency`` — rewards asleep between reward phases (``offload``); ``weight_files`` — where a dropped reward's
  tensors are in its checkpoint files, read back memory-mapped; ``hub_weights`` — the loader's check that an
  entry's hub weights are here or can be fetched now, its pinned revision, the lock file a run requires.

May import :mod:`rewardzoo.environments`, :mod:`rewardzoo.catalog`, the rewards and every layer below them.
"""
