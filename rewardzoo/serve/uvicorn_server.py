"""uvicorn for ``rewardzoo serve``: :class:`DrainingServer`, which stops on SIGTERM by draining (see
:mod:`~rewardzoo.serve.drain`). Imports uvicorn; only :func:`~rewardzoo.serve.server.serve_command` imports it."""

from __future__ import annotations

import logging
import signal
import time
from types import FrameType

import uvicorn

from .drain import Drain

log = logging.getLogger("rewardzoo.serve")


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose SIGTERM drains ``drain`` (listening on, so ``/ready`` can answer 503) and then
    stops, as a plain uvicorn does on SIGINT; :attr:`cut` counts the requests the timeout left unanswered.

    uvicorn re-raises the signal it stopped on once it has shut down (a SIGTERM would then kill the process);
    a drained SIGTERM is not re-raised, so the command returns and exits 0. A second signal stops at once.
    """

    def __init__(self, config: uvicorn.Config, drain: Drain, timeout_s: float) -> None:
        super().__init__(config)
        self.drain, self.timeout_s = drain, timeout_s
        self.cut = 0
        self._term = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and not self._term and not self.should_exit:
            self._term = True  # the drain begins on the loop's next tick, not inside the signal handler
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._term and not self.drain.draining:
            self.drain.begin()
            log.warning("rewardzoo serve: SIGTERM, draining %d request(s) in flight", self.drain.in_flight)
        if self.drain.draining and not self.should_exit:
            if self.drain.in_flight == 0:
                return True
            if time.monotonic() - self.drain.began_at > self.timeout_s:
                self.cut = self.drain.in_flight
                self.force_exit = True  # the rest are cancelled, not waited for
                return True
        return await super().on_tick(counter)
