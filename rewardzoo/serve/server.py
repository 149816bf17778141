"""``rewardzoo serve``: options -> a :class:`~rewardzoo.serve.service.RewardService` under uvicorn (or Ray Serve)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from ..errors import ConfigError, RewardZooError
from .options import ServeOptions, binding_notice

if TYPE_CHECKING:
    from ..transport.wire import WireLimits

DEFAULT_PORT = 8765


def add_serve_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``rewardzoo serve``."""
    p.add_argument("config", help="YAML config path, a reward name (its card's example config) or a shipped config")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only; 0.0.0.0 accepts other machines)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--split", choices=["train", "eval"], default="train")
    p.add_argument("--max-batch", type=int, default=64, help="samples per model batch, merged across clients")
    p.add_argument("--max-wait-ms", type=float, default=5.0, help="how long a batch waits for more requests")
    p.add_argument("--max-queue", type=int, default=4096, help="queued samples before requests get 503")
    p.add_argument("--max-request-mb", type=float, default=64.0, help="largest request body (MiB)")
    p.add_argument("--max-connections", type=int, default=256,
                   help="open connections before new ones get 503 (bounds the bodies held in memory)")
    p.add_argument("--max-samples", type=int, default=512, help="samples per request")
    p.add_argument("--max-pixels", type=int, default=4096 * 4096, help="pixels per image or video frame")
    p.add_argument("--max-frames", type=int, default=2048, help="frames per video")
    p.add_argument("--max-audio-seconds", type=float, default=600.0, help="seconds per audio clip")
    p.add_argument("--token-env", metavar="NAME", help="environment variable holding the bearer token clients must send")
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument("--ray", action="store_true", help="serve with Ray Serve (pip install 'rewardzoo[serve-ray]')")
    p.add_argument("--replicas", type=int, default=1, help="(ray) replicas, each loading the models once")
    p.add_argument("--gpus-per-replica", type=float, default=0, help="(ray) GPUs per replica")
    p.add_argument("--cpus-per-replica", type=float, default=1, help="(ray) CPUs per replica")
    p.add_argument("--address", help="(ray) join this Ray cluster instead of starting a local one")
    return p


def options_from_args(args: argparse.Namespace) -> tuple[ServeOptions, "WireLimits"]:
    """The server's options and request limits from the command line."""
    from ..transport.wire import WireLimits

    for name in ("max_batch", "max_queue", "max_samples", "max_pixels", "max_frames", "port", "replicas",
                 "max_connections"):
        if getattr(args, name) <= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("max_request_mb", "max_audio_seconds"):
        if not getattr(args, name) > 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.max_wait_ms < 0:
        raise ConfigError(f"--max-wait-ms must be 0 or more, got {args.max_wait_ms}")
    limits = WireLimits(max_request_bytes=int(args.max_request_mb * 2 ** 20), max_samples=args.max_samples,
                        max_pixels=args.max_pixels, max_frames=args.max_frames,
                        max_audio_seconds=args.max_audio_seconds)
    return ServeOptions(max_batch=args.max_batch, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                        token=token_from_env(args.token_env)), limits


def token_from_env(name: str | None) -> str | None:
    """The token held by the environment variable ``name`` (None: no authentication). Never printed."""
    if name is None:
        return None
    token = os.environ.get(name, "").strip()
    if not token:
        raise ConfigError(f"--token-env {name}: the environment variable {name} is not set or empty")
    return token


def serve_command(args: argparse.Namespace, config_source) -> int:
    options, limits = options_from_args(args)
    if args.ray:
        from .ray_serve import run_ray

        return run_ray(config_source, args, options, limits)
    import uvicorn

    from .app import build_app
    from .service import RewardService

    service = RewardService(config_source, split=args.split, limits=limits)
    failed: list[BaseException] = []
    server: uvicorn.Server | None = None

    def on_load_error(exc: BaseException) -> None:
        failed.append(exc)
        if server is not None:
            server.should_exit = True

    app = build_app(service, options, on_load_error=on_load_error)
    server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                                           access_log=False, lifespan="on", timeout_keep_alive=30,
                                           limit_concurrency=args.max_connections))
    print(binding_notice(args.host, args.port, options.token is not None), file=sys.stderr, flush=True)
    server.run()
    if failed:
        raise RewardZooError(f"loading the rewards failed: {failed[0]}") from failed[0]
    return 0
