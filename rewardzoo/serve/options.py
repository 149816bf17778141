"""The server's own settings (kept free of imports: the command line parser reads them)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ServeOptions:
    """Batching and queue of a server; ``token``: the bearer token clients must send (None: none).
    ``max_in_flight``: score requests at once (reading, decoding, queued or scored) before new ones get 503
    (``/health`` and ``/ready`` are never refused; a request counts once its body has arrived);
    ``max_receiving_bytes``: bytes of bodies being received at once across requests (past it a request gets 503 at
    once; None: no bound); ``max_decoded_bytes``: memory requests hold at once across requests — parsed bodies,
    decoded media and their conversion to the rewards' forms (a request waits up to ``decode_wait_s`` for its
    share, then gets 503; None: no bound); ``decode_threads``: threads decoding requests and their PNG images;
    ``max_wait_ms``: the longest a batch waits for more requests (only when more may come, see
    :mod:`rewardzoo.serve.batching`); ``shm``: read the buffers of a client on this machine from its shared memory
    when it offers them (only clients on the loopback, same user; :mod:`rewardzoo.transport.frames`).
    The request limits are the service's :class:`~rewardzoo.transport.wire.WireLimits`."""

    max_batch: int = 64
    max_wait_ms: float = 5.0
    max_queue: int = 4096
    max_in_flight: int = 256
    max_receiving_bytes: int | None = 256 * 2**20
    max_decoded_bytes: int | None = 2**30
    decode_wait_s: float = 5.0
    decode_threads: int = 4
    shm: bool = True
    token: str | None = field(default=None, repr=False)
    #: submit / collect (:mod:`~rewardzoo.serve.jobs`): seconds a finished ticket is kept, tickets per token, in all
    job_ttl_s: float = 600.0
    max_jobs_per_token: int = 64
    max_jobs: int = 1024


def binding_notice(host: str, port: int, token: bool, tls: bool = False) -> str:
    """What the server says at start about who can reach it (and a warning when a token would travel in clear
    beyond this machine)."""
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host == "localhost"
    reach = (
        "this machine only (pass --host 0.0.0.0 to accept other machines)"
        if local
        else "OTHER MACHINES too"
        + ("" if token else "; no --token-env is set, so anyone who reaches the port can use the models")
    )
    if not local and token and not tls:
        reach += (
            "\nrewardzoo serve: WARNING: the bearer token and the samples travel unencrypted; pass "
            "--ssl-keyfile/--ssl-certfile or put a TLS proxy in front"
        )
    return f"rewardzoo serve: listening on {'https' if tls else 'http'}://{host}:{port} — reachable from {reach}"
