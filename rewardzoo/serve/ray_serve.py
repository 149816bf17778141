"""The served app as a Ray Serve deployment: ``rewardzoo serve CONFIG --ray``, or :func:`reward_deployment` for
users who compose their own Serve applications.

Each replica builds the same :class:`~rewardzoo.serve.service.RewardService` (models loaded once per replica,
in its constructor, so Serve routes to it only once it is ready) and the same Starlette app, batching
included; Serve spreads requests over the replicas. The HTTP wire format is unchanged, so the ``remote``
reward and :mod:`rewardzoo.transport.client` talk to either server alike. (Ray moves the config to the replicas with
its own serialisation inside the cluster; nothing received on the HTTP port is unpickled.)
"""

from __future__ import annotations

import sys
import time
from typing import Any, Mapping

from ray import serve

from ..config import RewardConfig, resolve_config
from ..jobs.description import ServeJob
from ..transport.wire import WireLimits
from .options import ServeOptions, binding_notice

#: Requests a replica takes at once; its own batcher merges them, so this is well above Serve's default.
MAX_ONGOING_REQUESTS = 256


@serve.ingress()
class RewardServeReplica:
    """One replica: the service (models loaded here) and its ASGI app."""

    def __init__(self, config: RewardConfig, split: str, options: ServeOptions, limits: WireLimits) -> None:
        from .service import RewardService

        self._service = RewardService(config, split=split, limits=limits).load()
        self._options = options

    def __serve_build_asgi_app__(self) -> Any:
        from .app import build_app

        return build_app(self._service, self._options)


def reward_deployment(config: RewardConfig | str | Mapping[str, Any], *, split: str = "train", replicas: int = 1,
                      gpus_per_replica: float = 0, cpus_per_replica: float = 1,
                      options: ServeOptions = ServeOptions(), limits: WireLimits = WireLimits(),
                      name: str = "rewardzoo") -> Any:
    """A bound Serve application (``serve.run(reward_deployment("rewards.yaml"), route_prefix="/")``).

    The config is read here, on the driver, and travels to the replicas as data (so a YAML file need
    not exist on the other nodes; model paths must).
    """
    config = resolve_config(config)
    config.specs(split)  # check the split before any replica starts
    deployment = serve.deployment(RewardServeReplica, name=name, num_replicas=replicas,
                                  max_ongoing_requests=MAX_ONGOING_REQUESTS,
                                  ray_actor_options={"num_gpus": gpus_per_replica, "num_cpus": cpus_per_replica})
    return deployment.bind(config, split, options, limits)


def run_ray(config_source: Any, job: ServeJob, options: ServeOptions, limits: WireLimits) -> int:
    """``rewardzoo serve --ray``: start (or join) Ray as the Ray engine does, deploy, serve until interrupted."""
    import ray

    from ..ray.startup import ensure_ray  # the one start-up: a fresh local instance unless an address is given

    ensure_ray(job.address, quiet=False)
    serve.start(http_options={"host": job.host, "port": job.port})
    app = reward_deployment(config_source, split=job.split, replicas=job.replicas,
                            gpus_per_replica=job.gpus_per_replica, cpus_per_replica=job.cpus_per_replica,
                            options=options, limits=limits)
    serve.run(app, name="rewardzoo", route_prefix="/")
    print(binding_notice(job.host, job.port, options.token is not None) + f" (Ray Serve, {job.replicas} "
          f"replica(s); Ray at {ray.get_runtime_context().gcs_address})", file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
        ray.shutdown()
    return 0
