"""A reward module whose import kills the worker process (as a broken native extension would)."""

import os
import sys

print("crash_at_import: aborting the interpreter", file=sys.stderr, flush=True)
os._exit(3)
