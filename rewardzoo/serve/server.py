"""``rewardzoo serve``: options -> a :class:`~rewardzoo.jobs.ServeJob` -> a
:class:`~rewardzoo.serve.service.RewardService` under uvicorn (or Ray Serve)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from ..core.resolve import config_source
from ..errors import ConfigError, RewardZooError
from ..jobs.description import ServeJob
from .options import ServeOptions, binding_notice

if TYPE_CHECKING:
    from ..transport.wire import WireLimits

DEFAULT_PORT = 8765


def add_serve_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``rewardzoo serve`` (their defaults: :class:`~rewardzoo.jobs.ServeJob`'s)."""
    d = ServeJob
    p.add_argument("config", help="YAML config path, a reward name (its card's example config) or a shipped config")
    p.add_argument(
        "--host",
        default=d.host,
        help="address to bind (default 127.0.0.1: this machine only; 0.0.0.0 accepts other machines)",
    )
    p.add_argument("--port", type=int, default=d.port)
    p.add_argument("--split", choices=["train", "eval"], default=d.split)
    p.add_argument("--max-batch", type=int, default=d.max_batch, help="samples per model batch, merged across clients")
    p.add_argument(
        "--max-wait-ms",
        type=float,
        default=d.max_wait_ms,
        help="how long a batch waits at most for more requests, when others are on their way or clients send concurrently",
    )
    p.add_argument("--max-queue", type=int, default=d.max_queue, help="queued samples before requests get 503")
    p.add_argument("--max-request-mb", type=float, default=d.max_request_mb, help="largest request body (MiB)")
    p.add_argument(
        "--max-connections",
        type=int,
        default=d.max_connections,
        help="score requests at once (decoding, queued or scored; counted once the body has arrived) before new "
        "ones get 503 (/health and /ready are never refused)",
    )
    p.add_argument(
        "--max-receiving-mb",
        type=float,
        default=d.max_receiving_mb,
        help="request bodies (MiB) being received at once across requests; past it a request gets 503 at once",
    )
    p.add_argument(
        "--max-decoded-mb",
        type=float,
        default=d.max_decoded_mb,
        help="memory (MiB) requests hold at once across requests: parsed bodies, decoded media and their "
        "conversion to the rewards' forms; a request waits briefly for its share, then gets 503 + Retry-After "
        "(413 when it alone needs more)",
    )
    p.add_argument(
        "--idle-timeout-s",
        type=float,
        default=d.idle_timeout_s,
        help="close a connection that sends nothing for this long (before a request or between them)",
    )
    p.add_argument(
        "--header-timeout-s",
        type=float,
        default=d.header_timeout_s,
        help="a request's headers must arrive within this many seconds of its first byte (else 408)",
    )
    p.add_argument(
        "--body-timeout-s",
        type=float,
        default=d.body_timeout_s,
        help="a request's whole body must arrive within this many seconds of its headers, however it is "
        "sent (else 408)",
    )
    p.add_argument("--ssl-keyfile", help="TLS private key (PEM): serve https")
    p.add_argument("--ssl-certfile", help="TLS certificate chain (PEM), with --ssl-keyfile")
    p.add_argument(
        "--no-shm",
        dest="shm",
        action="store_false",
        help="never read a same-host client's shared memory (by default a client on this machine's loopback, of "
        "this user, may hand its media over in a sealed memfd instead of the body)",
    )
    p.add_argument("--max-samples", type=int, default=d.max_samples, help="samples per request")
    p.add_argument("--max-pixels", type=int, default=d.max_pixels, help="pixels per image or video frame")
    p.add_argument("--max-frames", type=int, default=d.max_frames, help="frames per video")
    p.add_argument("--max-audio-seconds", type=float, default=d.max_audio_seconds, help="seconds per audio clip")
    p.add_argument(
        "--token-env", metavar="NAME", help="environment variable holding the bearer token clients must send"
    )
    p.add_argument(
        "--drain-timeout-s",
        type=float,
        default=d.drain_timeout_s,
        help="on SIGTERM, how long to wait for the requests in flight before exiting anyway (exit 1)",
    )
    p.add_argument(
        "--job-ttl-s",
        type=float,
        default=d.job_ttl_s,
        help="submit / collect (POST /v1/jobs): seconds a finished job's ticket is kept for its client",
    )
    p.add_argument(
        "--max-jobs-per-token",
        type=int,
        default=d.max_jobs_per_token,
        help="submit / collect: open tickets per bearer token before a submission gets 429",
    )
    p.add_argument("--log-level", default=d.log_level, choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument("--ray", action="store_true", help="serve with Ray Serve (pip install 'rewardzoo[serve-ray]')")
    p.add_argument("--replicas", type=int, default=d.replicas, help="(ray) replicas, each loading the models once")
    p.add_argument("--gpus-per-replica", type=float, default=d.gpus_per_replica, help="(ray) GPUs per replica")
    p.add_argument("--cpus-per-replica", type=float, default=d.cpus_per_replica, help="(ray) CPUs per replica")
    p.add_argument(
        "--address", help="(ray) join this Ray cluster instead of starting a local one; default: $RAY_ADDRESS when set"
    )
    return p


def serve_options(job: ServeJob) -> tuple[ServeOptions, WireLimits]:
    """The server's options and request limits of a serve job."""
    from ..transport.wire import WireLimits

    for name in (
        "max_batch",
        "max_queue",
        "max_samples",
        "max_pixels",
        "max_frames",
        "port",
        "replicas",
        "max_connections",
        "max_jobs_per_token",
    ):
        if getattr(job, name) <= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive, got {getattr(job, name)}")
    for name in (
        "max_request_mb",
        "max_audio_seconds",
        "drain_timeout_s",
        "max_receiving_mb",
        "max_decoded_mb",
        "idle_timeout_s",
        "header_timeout_s",
        "body_timeout_s",
        "job_ttl_s",
    ):
        if not getattr(job, name) > 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive, got {getattr(job, name)}")
    if (job.ssl_keyfile is None) != (job.ssl_certfile is None):
        raise ConfigError("--ssl-keyfile and --ssl-certfile go together")
    for name in ("ssl_keyfile", "ssl_certfile"):
        if getattr(job, name) is not None and not os.path.isfile(getattr(job, name)):
            raise ConfigError(f"--{name.replace('_', '-')} {getattr(job, name)}: no such file")
    if job.ssl_keyfile is not None and job.ssl_certfile is not None:
        check_tls_files(job.ssl_keyfile, job.ssl_certfile)
    if job.max_wait_ms < 0:
        raise ConfigError(f"--max-wait-ms must be 0 or more, got {job.max_wait_ms}")
    limits = WireLimits(
        max_request_bytes=int(job.max_request_mb * 2**20),
        max_samples=job.max_samples,
        max_pixels=job.max_pixels,
        max_frames=job.max_frames,
        max_audio_seconds=job.max_audio_seconds,
    )
    return ServeOptions(
        max_batch=job.max_batch,
        max_wait_ms=job.max_wait_ms,
        max_queue=job.max_queue,
        max_in_flight=job.max_connections,
        max_receiving_bytes=int(job.max_receiving_mb * 2**20),
        max_decoded_bytes=int(job.max_decoded_mb * 2**20),
        token=token_from_env(job.token_env),
        shm=job.shm,
        job_ttl_s=job.job_ttl_s,
        max_jobs_per_token=job.max_jobs_per_token,
    ), limits


class _KeyNeedsPassword(Exception):
    pass


def _no_password() -> str:
    raise _KeyNeedsPassword


def check_tls_files(keyfile: str, certfile: str) -> None:
    """Load the key and certificate as the server will, before it starts: an encrypted key (which would make
    OpenSSL ask for a password on the terminal), a key that is not the certificate's, or a file that is not PEM
    is a :class:`ConfigError` naming the files."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile, keyfile, password=_no_password)
    except _KeyNeedsPassword:
        raise ConfigError(
            f"--ssl-keyfile {keyfile} is encrypted (it asks for a password); give an unencrypted key, e.g. "
            f"`openssl pkey -in {keyfile} -out KEY.pem`, readable only by the server's user"
        ) from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"--ssl-keyfile {keyfile} / --ssl-certfile {certfile} cannot be loaded as a PEM key and its "
            f"certificate ({getattr(exc, 'reason', None) or exc})"
        ) from None


def token_from_env(name: str | None) -> str | None:
    """The token held by the environment variable ``name`` (None: no authentication). Never printed."""
    if name is None:
        return None
    token = os.environ.get(name, "").strip()
    if not token:
        raise ConfigError(f"--token-env {name}: the environment variable {name} is not set or empty")
    return token


def serve_command(job: ServeJob) -> int:
    """``rewardzoo serve``: serve ``job`` under uvicorn (or Ray Serve) until interrupted or, on SIGTERM, drained
    (:mod:`~rewardzoo.serve.drain`)."""
    options, limits = serve_options(job)
    source = config_source(job.config)
    if job.ray:
        from .ray_serve import run_ray

        return run_ray(source, job, options, limits)
    import uvicorn

    from .app import build_app
    from .drain import DRAINED_NOTICE, Drain, cut_notice
    from .service import RewardService
    from .uvicorn_server import BodySink, DrainingServer, guarded_protocol

    service = RewardService(source, split=job.split, limits=limits)
    failed: list[BaseException] = []
    server: DrainingServer | None = None
    drain = Drain()

    def on_load_error(exc: BaseException) -> None:
        failed.append(exc)
        if server is not None:
            server.should_exit = True

    app = build_app(service, options, on_load_error=on_load_error, drain=drain)
    # no uvicorn limit_concurrency: it counts idle connections and refuses /health too; the app limits score
    # requests (max_in_flight) and the protocol's deadlines close the connections that stall
    sink = BodySink(app.state.reception, limits.max_request_bytes)  # large framed bodies read straight into place
    protocol = guarded_protocol(job.header_timeout_s, job.body_timeout_s, sink=sink)
    server = DrainingServer(
        uvicorn.Config(
            app,
            host=job.host,
            port=job.port,
            log_level=job.log_level,
            access_log=False,
            lifespan="on",
            http=protocol,
            timeout_keep_alive=job.idle_timeout_s,
            ssl_keyfile=job.ssl_keyfile,
            ssl_certfile=job.ssl_certfile,
        ),
        drain,
        job.drain_timeout_s,
    )
    print(
        binding_notice(job.host, job.port, options.token is not None, tls=job.ssl_certfile is not None),
        file=sys.stderr,
        flush=True,
    )
    server.run()
    if failed:
        raise RewardZooError(f"loading the rewards failed: {failed[0]}") from failed[0]
    if server.cut:
        print(cut_notice(server.cut, job.drain_timeout_s), file=sys.stderr, flush=True)
        os._exit(1)  # the cut requests' model calls still hold the model thread, which exit would wait for
    if drain.draining:
        print(DRAINED_NOTICE, file=sys.stderr, flush=True)
    return 0
