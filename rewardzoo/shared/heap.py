"""The process heap: handing freed pages back to the OS."""

from __future__ import annotations


def release_heap() -> None:
    """Hand freed heap pages back to the OS (glibc's ``malloc_trim(0)``; elsewhere nothing). Tensors under glibc's
    adaptive mmap threshold (up to 32 MiB: a 1B decoder's attention matrices) live on the heap, whose freed pages
    ``free`` keeps: without this, ``offload: drop`` freed 86% of a 4.9 GB Llama-3.2-1B reward, not 100%."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl): nothing to trim this way
        pass
