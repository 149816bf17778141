"""One HTTP client for everything rewardzoo calls over the network (endpoint judges, served rewards).

Standard library only (``http.client`` and threads), so every extra can use it. A client holds one
keep-alive connection per thread, retries what is worth retrying and raises
:class:`~rewardzoo.errors.HttpError` for the rest:

- retried, with exponential backoff (``backoff_s``, doubled per try, capped at ``max_backoff_s``; a
  ``Retry-After`` header wins when longer, within the same cap): a connection that cannot be made or
  is dropped before an answer (refused, reset, a server restarting), and the statuses in
  ``retry_statuses`` (408, 429, 500, 502, 503, 504);
- raised at once: any other non-2xx status, and an exchange that is not complete within ``timeout_s``
  (the request, the answer's start and its whole body: a server that drips bytes is cut off at the deadline;
  a hanging server is not asked again: the caller learns of it after one timeout, not after ``attempts`` of
  them).

An answer is read up to ``max_response_bytes`` (default 256 MiB; None: no cap): a longer one (by its
Content-Length or as it arrives) is an :class:`~rewardzoo.errors.HttpError` naming the cap, not retried, and the
connection is dropped. Nothing here logs a header or a body; an error names the URL, the status or reason and
the tries.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..errors import ConfigError, HttpError
from ..shared.options import positive_float, positive_int

#: The largest answer read by default (a server's answer is bounded by what we asked; this bounds a hostile one).
MAX_RESPONSE_BYTES = 256 * 2**20

T = TypeVar("T")
R = TypeVar("R")

_sleep = time.sleep  # tests may replace it


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to ask: ``attempts`` tries in all (1 = no retry)."""

    attempts: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    timeout_s: float = 60.0
    retry_statuses: frozenset[int] = field(default=frozenset({408, 429, 500, 502, 503, 504}))

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, owner: str) -> RetryPolicy:
        """A policy from reward kwargs: ``retries`` (tries after the first), ``backoff_s``,
        ``max_backoff_s``, ``timeout_s``; other keys are ignored (the caller checks its own)."""
        kwargs: dict[str, Any] = {}
        if "retries" in options:
            retries = options["retries"]
            if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
                raise ConfigError(f"must be a non-negative integer, got {retries!r}", entry=owner, field="retries")
            kwargs["attempts"] = retries + 1
        for key in ("backoff_s", "max_backoff_s", "timeout_s"):
            if key in options:
                kwargs[key] = positive_float(options[key], key, entry=owner)
        return cls(**kwargs)

    def wait_before(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 1)."""
        wait = self.backoff_s * 2 ** (attempt - 1)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return min(wait, self.max_backoff_s)


@dataclass(frozen=True)
class Response:
    """A 2xx answer: its status, headers (lower-case names) and body."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str = ""

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            raise HttpError(
                self.url, status=self.status, attempts=1, reason="the body is not JSON", body=self.body
            ) from None


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta seconds or an HTTP date); None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class HttpClient:
    """Requests to one server (``base_url``), with retries, keep-alive and bounded concurrency.

    ``label`` names the server in errors (default: the URL). ``headers`` go with every request
    (e.g. :func:`bearer_headers`); they never appear in an error or a repr. ``max_response_bytes``: the
    longest answer read (None: no cap).
    """

    def __init__(
        self,
        base_url: str,
        *,
        policy: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        max_concurrency: int = 8,
        label: str | None = None,
        max_response_bytes: int | None = MAX_RESPONSE_BYTES,
    ):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"must be an http:// or https:// URL, got {base_url!r}", field="url")
        self.base_url = base_url.rstrip("/")
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")
        self.policy = policy or RetryPolicy()
        self.max_concurrency = positive_int(max_concurrency, "max_concurrency")
        self.label = label or self.base_url
        self.max_response_bytes = (
            None if max_response_bytes is None else positive_int(max_response_bytes, "max_response_bytes")
        )
        self._headers = dict(headers or {})
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def __repr__(self) -> str:
        return f"HttpClient({self.base_url!r})"

    # -- connections ------------------------------------------------------------------------------

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=timeout)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
            with self._lock:
                if conn in self._connections:
                    self._connections.remove(conn)

    # -- requests ---------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: bytes | Sequence[bytes | bytearray | memoryview] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Response:
        """One request, retried per the policy; a 2xx :class:`Response` or :class:`HttpError`. ``body``: bytes, or
        pieces sent one after the other as they are (no joined copy)."""
        url = self.base_url + "/" + path.lstrip("/")
        target = self._prefix + "/" + path.lstrip("/")
        timeout = self.policy.timeout_s if timeout_s is None else timeout_s
        all_headers = {**self._headers, **(headers or {})}
        if body is not None and not isinstance(body, (bytes, bytearray)):
            all_headers["Content-Length"] = str(sum(memoryview(piece).nbytes for piece in body))
        attempts, attempt, stale_retried = self.policy.attempts, 1, False
        while True:
            retry_after, sent = None, False
            conn = self._connection(timeout)
            reused = conn.sock is not None
            cut = _Deadline(timeout, conn)  # the whole exchange, not each read: a server that drips is cut off
            try:
                conn.request(method, target, body=body, headers=all_headers)
                sent = True
                answer = conn.getresponse()
                data = self._read(answer, url, attempt)
            except (OSError, http.client.HTTPException) as exc:  # TimeoutError among them
                self._drop_connection()
                if cut.fired:
                    raise HttpError(
                        url, status=None, attempts=attempt, reason=f"no answer within {timeout:g} s (cut off)"
                    ) from None
                if isinstance(exc, TimeoutError):
                    if sent:
                        raise HttpError(
                            url, status=None, attempts=attempt, reason=f"no answer within {timeout:g} s"
                        ) from None
                    status, reason, data = None, f"could not connect within {timeout:g} s", b""
                elif reused and not stale_retried:
                    stale_retried = True  # a kept-alive connection the server had closed: not a failed try
                    continue
                else:
                    status, reason, data = None, str(exc) or type(exc).__name__, b""
            else:
                if cut.fired:  # the cut can end a read early without an error: what was read is not the answer
                    self._drop_connection()
                    raise HttpError(
                        url, status=None, attempts=attempt, reason=f"no answer within {timeout:g} s (cut off)"
                    )
                status, reason = answer.status, answer.reason
                answer_headers = {k.lower(): v for k, v in answer.getheaders()}
                if answer.will_close:
                    self._drop_connection()
                if 200 <= status < 300:
                    return Response(status, answer_headers, data, url)
                if status not in self.policy.retry_statuses:
                    raise HttpError(url, status=status, attempts=attempt, reason=reason, body=data)
                retry_after = parse_retry_after(answer_headers.get("retry-after"))
            finally:
                cut.cancel()
            if attempt >= attempts:
                raise HttpError(url, status=status, attempts=attempt, reason=reason, body=data)
            _sleep(self.policy.wait_before(attempt, retry_after))
            attempt += 1

    def _read(self, answer: http.client.HTTPResponse, url: str, attempt: int) -> bytes:
        cap = self.max_response_bytes
        if cap is None:
            return answer.read()
        declared = answer.getheader("content-length", "")
        data = b"" if declared.strip().isdigit() and int(declared) > cap else answer.read(cap + 1)
        if len(data) > cap or (not data and declared.strip().isdigit() and int(declared) > cap):
            self._drop_connection()
            raise HttpError(
                url,
                status=answer.status,
                attempts=attempt,
                reason=f"the answer is over max_response_bytes={cap} (the client's cap on what it "
                "reads; raise it if the server is trusted)",
            )
        if declared.strip().isdigit() and len(data) < int(declared):
            # read(n) returns what came before the connection closed, without the IncompleteRead that read() raises:
            # a server that died mid-answer sent no answer (retried as a broken connection)
            raise http.client.IncompleteRead(data, int(declared) - len(data))
        return data

    def post_json(self, path: str, payload: Any, **kwargs: Any) -> Any:
        """POST ``payload`` as JSON; the decoded JSON answer."""
        body = json.dumps(payload, allow_nan=False).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json", **kwargs.pop("headers", {})}
        return self.request("POST", path, body, headers=headers, **kwargs).json()

    def get_json(self, path: str, **kwargs: Any) -> Any:
        headers = {"Accept": "application/json", **kwargs.pop("headers", {})}
        return self.request("GET", path, headers=headers, **kwargs).json()

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(item) for item in items]`` with at most ``max_concurrency`` calls in flight, in input
        order. On an error the calls not yet started are cancelled, the running ones are awaited, and
        the first error (in input order) is raised."""
        items = list(items)
        if len(items) <= 1 or self.max_concurrency == 1:
            return [fn(item) for item in items]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="rewardzoo-http")
            pool = self._pool
        futures = [pool.submit(fn, item) for item in items]
        results: list[R] = []
        error: BaseException | None = None
        for future in futures:
            if error is not None:
                future.cancel()
                continue
            try:
                results.append(future.result())
            except BaseException as exc:  # re-raised below, once nothing of this call runs
                error = exc
        if error is not None:
            for future in futures:
                if not future.cancelled():
                    future.exception()
            raise error
        return results

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
            pool, self._pool = self._pool, None
        for conn in connections:
            conn.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Deadline:
    """Shuts ``conn``'s socket down ``seconds`` from now unless cancelled first: the reads blocked on it end, so
    one exchange never outlasts its timeout however slowly the answer drips (``fired`` says it happened)."""

    def __init__(self, seconds: float, conn: http.client.HTTPConnection) -> None:
        self.fired = False
        self._conn = conn
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def _cut(self) -> None:
        self.fired = True
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        self._timer.cancel()


def bearer_headers(env_name: str | None, *, owner: str) -> dict[str, str]:
    """``{"Authorization": "Bearer <token>"}`` with the token read from the environment variable
    ``env_name``; ``{}`` when ``env_name`` is None. The token is never put in an error or a log."""
    if env_name is None:
        return {}
    if not isinstance(env_name, str) or not env_name:
        raise ConfigError(f"must name an environment variable, got {env_name!r}", entry=owner, field="api_key_env")
    token = os.environ.get(env_name, "")
    if not token.strip():
        raise ConfigError(f"the environment variable {env_name} is not set or empty", entry=owner, field="api_key_env")
    return {"Authorization": f"Bearer {token.strip()}"}
