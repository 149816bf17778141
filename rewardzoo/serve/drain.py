"""A server's graceful stop (SIGTERM, what a process manager or Kubernetes sends): :class:`Drain`.

Once a drain begins, ``/ready`` answers 503 (so a load balancer stops sending), new ``/v1/score`` requests are
refused with 503 and Retry-After (the ``remote`` reward retries them, elsewhere or later), and the requests
already in flight are answered; the server exits 0 when none is left, or after ``--drain-timeout-s`` (default
25 s, below Kubernetes' default grace period of 30 s; then it says how many it cut and exits 1). The same state
serves uvicorn (:mod:`~rewardzoo.serve.uvicorn_server`) and each Ray Serve replica
(:mod:`~rewardzoo.serve.ray_serve`). No server library is imported here.
"""

from __future__ import annotations

import threading
import time

#: What a server says when its drain ended with every request answered.
DRAINED_NOTICE = "rewardzoo serve: drained, stopped"


class Drain:
    """Whether a server is stopping and how many score requests it is answering; thread-safe.

    :meth:`enter` (False once the drain has begun: refuse the request) and :meth:`leave` bracket each request;
    :meth:`begin` starts the drain; :meth:`wait_idle` returns once no request is left.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self.began_at: float | None = None

    @property
    def draining(self) -> bool:
        return self.began_at is not None

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def begin(self) -> None:
        with self._lock:
            if self.began_at is None:
                self.began_at = time.monotonic()
            self._idle.notify_all()

    def enter(self) -> bool:
        with self._lock:
            if self.began_at is not None:
                return False
            self._in_flight += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until the drain has begun and no request is in flight (True), or ``timeout_s`` passed (False)."""
        with self._lock:
            return self._idle.wait_for(lambda: self.began_at is not None and self._in_flight == 0, timeout_s)


def cut_notice(cut: int, timeout_s: float, what: str = "request(s)") -> str:
    """What a server says when its drain timed out with ``cut`` ``what`` still busy."""
    return (
        f"rewardzoo serve: the drain timed out after {timeout_s:g} s (--drain-timeout-s) with {cut} {what} "
        f"in flight; they were cut"
    )
