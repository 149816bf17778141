"""Cases of the real-scale check (``scripts/scale_check.py``): the machinery in ``common.py``, one module per family."""
