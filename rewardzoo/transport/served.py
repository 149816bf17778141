"""A connection to a ``rewardzoo serve`` server: its reward list, and samples scored over the wire format.

The one client code under both the ``remote`` reward and :mod:`rewardzoo.serve.client`: requests go
through :class:`~rewardzoo.transport.http.HttpClient` (retries with backoff on connection errors, 408, 429 and 5xx,
Retry-After honoured); samples travel in :mod:`rewardzoo.transport.wire`, split into requests of at most the
server's ``max_samples`` with every group kept whole in one request.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from ..errors import ConfigError, HttpError, InputError, RewardZooError
from ..shared.groups import group_key
from . import frames, segments
from .http import HttpClient, RetryPolicy, bearer_headers
from .wire import JSON, MSGPACK, WireLimits, content_type, decode_result, dumps, loads, request_map

#: An answer's size is the server's business (it is bounded by the request we sent).
_ANSWERS = WireLimits(max_request_bytes=None)


def score_answer(response: Any, count: int, fmt: str) -> dict[str, Any]:
    """A score response for ``count`` samples, parsed in the format its content type says (else ``fmt``) with its
    objects bounded by what such an answer holds; an HttpError naming the URL when it is not one."""
    kind = response.headers.get("content-type", "")
    fmt = "msgpack" if kind.startswith(MSGPACK) else "json" if kind.startswith(JSON) else fmt
    try:
        return decode_result(loads(response.body, fmt, replace(_ANSWERS, max_samples=count)))
    except (ValueError, RewardZooError) as exc:
        raise HttpError(
            response.url,
            status=response.status,
            attempts=1,
            reason=f"the answer is not a score response ({exc})",
            body=response.body,
        ) from None


class ServedRewards:
    """The server at ``url``. ``listing`` is its ``GET /v1/rewards`` answer, read (waiting up to
    ``ready_timeout_s`` while it loads its models) on first use."""

    def __init__(
        self,
        url: str,
        *,
        policy: RetryPolicy | None = None,
        token_env: str | None = None,
        max_concurrency: int = 8,
        fmt: str = "msgpack",
        image_format: str = "raw",
        ready_timeout_s: float = 300.0,
        owner: str = "remote",
        shm: bool = True,
    ) -> None:
        if fmt not in ("msgpack", "json"):
            raise ConfigError(f"must be 'msgpack' or 'json', got {fmt!r}", entry=owner, field="format")
        if image_format not in ("png", "raw"):
            raise ConfigError(f"must be 'png' or 'raw', got {image_format!r}", entry=owner, field="image_format")
        if fmt == "msgpack":
            import importlib.util

            if importlib.util.find_spec("msgpack") is None:
                raise ConfigError(
                    "format 'msgpack' needs the msgpack package: pip install 'rewardzoo[serve]' (or set format: json)",
                    entry=owner,
                    field="format",
                )
        self.url = url.rstrip("/")
        self.fmt, self.image_format, self.ready_timeout_s = fmt, image_format, ready_timeout_s
        self.http = HttpClient(
            self.url,
            policy=policy or RetryPolicy(),
            headers=bearer_headers(token_env, owner=owner),
            max_concurrency=max_concurrency,
            label=f"rewardzoo server {self.url}",
        )
        self._listing: dict[str, Any] | None = None
        self._shm = shm  # offered when the server says it shares this host (and not after a refusal)
        self.segments = segments.SegmentPool()  # the shared memory segments requests reuse (transport shm)

    def __repr__(self) -> str:
        return f"ServedRewards({self.url!r})"

    @property
    def listing(self) -> dict[str, Any]:
        if self._listing is None:
            self._listing = self._read_listing()
        return self._listing

    def _read_listing(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            try:
                data = self.http.get_json("/v1/rewards")
                break
            except HttpError as exc:  # 503 while the models load: wait, within ready_timeout_s
                if exc.status != 503 or time.monotonic() + 1.0 > deadline:
                    raise
                time.sleep(1.0)
        if not isinstance(data, dict) or not isinstance(data.get("rewards"), list):
            raise HttpError(
                self.url + "/v1/rewards", status=200, attempts=1, reason="the answer is not a rewardzoo reward list"
            )
        for row in data["rewards"]:
            row["score_range"] = [float(b) for b in row["score_range"]]  # "inf" / "-inf" in JSON
        return data

    @property
    def rows(self) -> dict[str, dict[str, Any]]:
        """Served stream name -> its record (kind, fields, higher_is_better, score_range, ...)."""
        return {row["name"]: row for row in self.listing["rewards"]}

    @property
    def limits(self) -> dict[str, Any]:
        return dict(self.listing.get("limits") or {})

    # ------------------------------------------------------------------------------------- scoring
    def score(self, samples: Sequence[Mapping[str, Any]], rewards: Sequence[str] | None = None) -> dict[str, Any]:
        """Scores of ``samples`` (mappings of Sample fields): ``{"rewards": {name: float32}, "total",
        "applied", "weights", "extras"}`` (NaN where a reward does not apply). Requests of at most the
        server's ``max_samples`` and ``max_request_bytes`` (halved, groups whole, while too large), sent
        concurrently; HttpError after the last retry."""
        requests: list[tuple[list[int], dict[str, Any]]] = []
        for chunk in request_chunks(samples, self.limits.get("max_samples")):
            requests += self._encoded(samples, chunk, rewards)
        answers = self.http.map(self._post, [(len(chunk), payload) for chunk, payload in requests])
        return in_order(concat_results(answers), [i for chunk, _ in requests for i in chunk])

    @property
    def transport(self) -> str:
        """How requests travel: ``shm`` (buffers in shared memory, for a server on this host that reads them),
        ``frames`` (buffers beside the MessagePack map in the body) or ``body`` (one MessagePack / JSON document)."""
        wire = self.listing.get("wire")
        if self.fmt != "msgpack" or not isinstance(wire, dict) or not wire.get("frames"):
            return "body"
        local = urlsplit(self.url).hostname in ("127.0.0.1", "localhost", "::1")
        same_host = local and bool(wire.get("shm")) and wire.get("shm") == frames.host_identity()
        return "shm" if self._shm and same_host and frames.shm_available() else "frames"

    def _encoded(
        self, samples: Sequence[Mapping[str, Any]], chunk: list[int], rewards: Sequence[str] | None
    ) -> list[tuple[list[int], dict[str, Any]]]:
        """``chunk`` as request maps within the server's max_request_bytes: halved (groups whole) while too large."""
        try:
            payload = request_map([samples[i] for i in chunk], rewards, image_format=self.image_format)
            size = frames.encode(payload)[1] if self.transport != "body" else len(dumps(payload, self.fmt))
        except InputError as exc:
            raise exc.located(indices=chunk) from None
        limit = self.limits.get("max_request_bytes")
        if limit is None or size <= limit:
            return [(chunk, payload)]
        groups = _units([samples[i] for i in chunk])
        if len(groups) == 1:
            raise InputError(
                f"a request of {len(chunk)} sample(s) (one group or one sample) encodes to {size} "
                f"bytes, over the server's limit max_request_bytes={limit}; send smaller media",
                sample=chunk[0],
            )
        half = len(groups) // 2
        first = sorted(chunk[j] for unit in groups[:half] for j in unit)
        second = sorted(chunk[j] for unit in groups[half:] for j in unit)
        return self._encoded(samples, first, rewards) + self._encoded(samples, second, rewards)

    def _post(self, request: tuple[int, dict[str, Any]]) -> dict[str, Any]:
        count, payload = request
        transport = self.transport
        if transport == "shm":
            try:
                response = self._send_shared(payload)
            except HttpError as exc:
                if exc.status != 403 or b"shm" not in exc.body:
                    raise
                self._shm = False  # the server would not read it (not this host after all): the body then
                response = self._send(frames.encode(payload)[0], frames.FRAMES)
        elif transport == "frames":
            response = self._send(frames.encode(payload)[0], frames.FRAMES)
        else:
            response = self._send(dumps(payload, self.fmt), content_type(self.fmt))
        return score_answer(response, count, self.fmt)

    def _send_shared(self, payload: dict[str, Any]) -> Any:
        """``payload`` with its buffers in shared memory: in place when they all lie in one
        :func:`~rewardzoo.transport.segments.shared_array`, else copied into a pooled segment, which is reused only
        once the server has answered (dropped after a timeout or a broken connection: the server may still read it)."""
        body, lease = segments.shared_request(payload, self.segments)
        answered = False
        try:
            response = self._send(body, frames.FRAMES)
            answered = True
            return response
        except HttpError as exc:
            answered = exc.status is not None  # an answer (a refusal, an error) ends the server's use of the request
            raise
        finally:
            if lease is not None:
                (self.segments.give if answered else self.segments.discard)(lease)

    def _send(self, body: Any, kind: str) -> Any:
        accept = content_type(self.fmt)
        return self.http.request("POST", "/v1/score", body, headers={"Content-Type": kind, "Accept": accept})

    def close(self) -> None:
        self.http.close()
        self.segments.close()


def _units(samples: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """What a request may not split: each group (``group_id``) and each sample without one."""
    units: dict[Any, list[int]] = {}
    for i, s in enumerate(samples):
        gid = s.get("group_id")
        units.setdefault(("g", group_key(gid)) if gid is not None else ("s", i), []).append(i)
    return list(units.values())


def request_chunks(samples: Sequence[Mapping[str, Any]], max_samples: int | None) -> list[list[int]]:
    """Index lists of at most ``max_samples`` samples, each group (``group_id``) whole in one list."""
    size = max_samples or math.inf
    chunks: list[list[int]] = []
    current: list[int] = []
    for unit in _units(samples):
        if len(unit) > size:
            raise InputError(
                f"a group of {len(unit)} samples is over the server's limit max_samples={max_samples}",
                field="group_id",
                sample=unit[0],
            )
        if len(current) + len(unit) > size:
            chunks.append(sorted(current))
            current = []
        current.extend(unit)
    if current:
        chunks.append(sorted(current))
    return chunks


def in_order(result: dict[str, Any], positions: list[int]) -> dict[str, Any]:
    """A result whose i-th entry belongs to sample ``positions[i]``, put back in sample order."""
    if positions == list(range(len(positions))):
        return result
    inverse = np.argsort(np.asarray(positions))

    def back(v: np.ndarray) -> np.ndarray:
        return v[inverse]

    return {
        "rewards": {k: back(v) for k, v in result["rewards"].items()},
        "total": back(result["total"]),
        "weights": {k: back(v) for k, v in result["weights"].items()},
        "applied": [result["applied"][i] for i in inverse],
        "extras": {k: {kk: back(vv) for kk, vv in v.items()} for k, v in result["extras"].items()},
    }


def concat_results(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Decoded results of consecutive requests as one (an extra some parts lack is NaN / None there)."""
    if len(parts) == 1:
        return parts[0]
    sizes = [len(p["total"]) for p in parts]

    def join(vectors: list[np.ndarray | None]) -> np.ndarray:
        text = any(v is not None and v.dtype == object for v in vectors)
        filled = [
            v if v is not None else (np.full(n, None, dtype=object) if text else np.full(n, np.nan, np.float32))
            for v, n in zip(vectors, sizes)
        ]
        return np.concatenate(filled)

    names = list(dict.fromkeys(k for p in parts for k in p["rewards"]))
    extras: dict[str, dict[str, np.ndarray]] = {}
    for name in dict.fromkeys(k for p in parts for k in p["extras"]):
        keys = dict.fromkeys(kk for p in parts for kk in p["extras"].get(name, {}))
        extras[name] = {kk: join([p["extras"].get(name, {}).get(kk) for p in parts]) for kk in keys}
    return {
        "rewards": {k: join([p["rewards"].get(k) for p in parts]) for k in names},
        "total": join([p["total"] for p in parts]),
        "weights": {
            k: join([p["weights"].get(k) for p in parts]) for k in names if any(k in p["weights"] for p in parts)
        },
        "applied": [a for p in parts for a in p["applied"]],
        "extras": extras,
    }
