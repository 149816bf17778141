"""The server's own settings (kept free of imports: the command line parser reads them)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ServeOptions:
    """Batching and queue of a server; ``token``: the bearer token clients must send (None: none).
    The request limits are the service's :class:`~rewardzoo.transport.wire.WireLimits`."""

    max_batch: int = 64
    max_wait_ms: float = 5.0
    max_queue: int = 4096
    token: str | None = field(default=None, repr=False)


def binding_notice(host: str, port: int, token: bool) -> str:
    """What the server says at start about who can reach it."""
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host == "localhost"
    reach = ("this machine only (pass --host 0.0.0.0 to accept other machines)" if local else
             "OTHER MACHINES too" + ("" if token else "; no --token-env is set, so anyone who reaches the port "
                                                      "can use the models"))
    return f"rewardzoo serve: listening on http://{host}:{port} — reachable from {reach}"
