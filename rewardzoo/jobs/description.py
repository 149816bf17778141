"""What a job is: a score job and a serve job, as the front ends describe them (never an argparse Namespace)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from ..spec.config import ConfigSource

J = TypeVar("J", bound="DataclassInstance")


def from_options(cls: type[J], options: Mapping[str, Any]) -> J:
    """A job of type ``cls`` from a mapping holding (at least) its fields, e.g. ``vars(args)``."""
    return cls(**{f.name: options[f.name] for f in dataclasses.fields(cls) if f.name in options})


@dataclass(frozen=True)
class ScoreJob:
    """``rewardzoo score``: score the rows of ``input`` with the rewards of ``config`` into ``out``.

    ``config``: anything :func:`~rewardzoo.core.resolve.config_source` takes (kept as given: the report names it);
    ``input``: a JSONL manifest, or with ``engine="ray"`` also a Parquet file; ``out``: JSONL (one line per
    input row), or with the Ray engine also ``.parquet``; ``split``: train or eval rewards; ``chunk_size``:
    samples per processor call (groups kept whole); ``allow_unscored``: score although some rows' dataset
    matches no reward; ``report``: also write an HTML report there; ``quiet``: no progress. The Ray engine's:
    ``actors``, ``gpus_per_actor``, ``cpus_per_actor``, ``address`` (a cluster to join) and ``resume``.
    ``labels``: how errors name the input's rows, one a row (default 'line N'; ``rewardzoo evaluate`` names the
    data file's lines). ``extras``: each output row also holds the extras each reward reported for it (what
    ``ocr`` read, a judge's per-dimension values; see :mod:`~rewardzoo.jobs.records`).
    """

    config: ConfigSource
    input: str
    out: str
    split: Literal["train", "eval"] = "train"
    chunk_size: int = 256
    allow_unscored: bool = False
    quiet: bool = False
    report: str | None = None
    engine: Literal["local", "ray"] = "local"
    actors: int = 1
    gpus_per_actor: float = 0
    cpus_per_actor: float = 1
    address: str | None = None
    resume: bool = False
    labels: tuple[str, ...] | None = None
    extras: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ScoreJob:
        """A job from a mapping holding (at least) its fields, e.g. ``vars(args)``."""
        return from_options(cls, options)


@dataclass(frozen=True)
class ServeJob:
    """``rewardzoo serve``: serve the rewards of ``config`` over HTTP at ``host``:``port``.

    The batching and request limits (``max_*``), the connection timeouts (``*_timeout_s``), TLS
    (``ssl_keyfile``, ``ssl_certfile``), the bearer token's environment variable (``token_env``), the
    log level, how long a SIGTERM waits for the requests in flight (``drain_timeout_s``), submit / collect's
    tickets (``job_ttl_s``, ``max_jobs_per_token``), and with ``ray`` Ray
    Serve's ``replicas``, ``gpus_per_replica``, ``cpus_per_replica`` and the
    cluster ``address`` to join (default: a local instance).
    """

    config: ConfigSource
    host: str = "127.0.0.1"
    port: int = 8765
    split: Literal["train", "eval"] = "train"
    max_batch: int = 64
    max_wait_ms: float = 5.0
    max_queue: int = 4096
    max_request_mb: float = 64.0
    max_connections: int = 256
    max_receiving_mb: float = 256.0
    max_decoded_mb: float = 1024.0
    shm: bool = True  # read same-host clients' shared memory (loopback, same user); --no-shm turns it off
    idle_timeout_s: float = 5.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    ssl_keyfile: str | None = None
    ssl_certfile: str | None = None
    max_samples: int = 512
    max_pixels: int = 4096 * 4096
    max_frames: int = 2048
    max_audio_seconds: float = 600.0
    token_env: str | None = None
    log_level: str = "warning"
    drain_timeout_s: float = 25.0
    job_ttl_s: float = 600.0
    max_jobs_per_token: int = 64
    ray: bool = False
    replicas: int = 1
    gpus_per_replica: float = 0
    cpus_per_replica: float = 1
    address: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ServeJob:
        """A job from a mapping holding (at least) its fields, e.g. ``vars(args)``."""
        return from_options(cls, options)
