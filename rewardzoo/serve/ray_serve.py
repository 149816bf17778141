"""The served app as a Ray Serve deployment: ``rewardzoo serve CONFIG --ray``, or :func:`reward_deployment` for
users who compose their own Serve applications.

Each replica of the front deployment builds the same :class:`~rewardzoo.serve.service.RewardService` (models
loaded once per replica, in its constructor, so Serve routes to it only once it is ready) and the same Starlette
app, batching included; Serve spreads requests over the replicas. An entry with a ``ray:`` block (and the entries
sharing its model, :mod:`rewardzoo.ray.groups`) runs in a deployment of its own, with its own replicas, GPUs, CPUs
and ``max_ongoing_requests`` (:mod:`~rewardzoo.serve.ray_rewards`); the front calls it through a deployment handle
and combines the answers as the in-process processor does. The entries without a block stay in the front, which
has the command's figures (``--replicas``, ``--gpus-per-replica``, ``--cpus-per-replica``), as do the keys a
block leaves out. Before anything is deployed, every replica must fit the cluster's nodes (a ConfigError naming
the entry otherwise). The HTTP wire format is unchanged, so the ``remote``
reward and :mod:`rewardzoo.serve.client` talk to either server alike. (Ray moves the config to the replicas with
its own serialisation inside the cluster; nothing received on the HTTP port is unpickled.)

``serve --ray`` stops on SIGTERM by draining, as the uvicorn server does (:mod:`~rewardzoo.serve.drain`): the
driver takes SIGTERM from Ray's own handler (which dumps a C++ stack and dies), relays it through a
:class:`DrainSignal` actor to every replica (each one's ``/ready`` answers 503 and its new requests are refused
from then), waits until each replica has answered its requests in flight, shuts Serve and the Ray instance
it started down, and exits 0. The placed deployments are called by the fronts only, so once every front replica
has answered its requests in flight, nothing is in flight in them either.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any, cast

import ray
from ray import serve

from ..core.resolve import resolve_config
from ..jobs.description import ServeJob
from ..ray.groups import check_cluster_fit, placed_groups
from ..spec.config import RewardConfig
from ..spec.placement import RayPlacement
from ..transport.wire import WireLimits
from .drain import DRAINED_NOTICE, Drain, cut_notice
from .options import ServeOptions, binding_notice

#: Requests a replica takes at once; its own batcher merges them, so this is well above Serve's default.
MAX_ONGOING_REQUESTS = 256


@serve.ingress()
class RewardServeReplica:
    """One replica: the service (models loaded here) and its ASGI app."""

    def __init__(
        self,
        config: RewardConfig,
        split: str,
        options: ServeOptions,
        limits: WireLimits,
        drain_signal: Any = None,
        drain_timeout_s: float = 0.0,
        groups: tuple[tuple[tuple[str, ...], Any], ...] = (),
    ) -> None:
        from .ray_rewards import DeploymentLoader
        from .service import RewardService

        service = RewardService(config, split=split, limits=limits, loader=DeploymentLoader(groups) if groups else None)
        if groups:  # (entry names, deployment handle): their answers are awaited off Serve's event loop
            loading = threading.Thread(target=_load_quietly, args=(service,), name="rewardzoo-serve-load")
            loading.start()
            loading.join()
            if service.load_error is not None:
                raise service.load_error
        self._service = service if service.ready else service.load()
        self._options = options
        self._drain = Drain()
        if drain_signal is not None:
            threading.Thread(
                target=_follow_drain,
                args=(drain_signal, self._drain, drain_timeout_s),
                daemon=True,
                name="rewardzoo-serve-drain",
            ).start()

    def __serve_build_asgi_app__(self) -> Any:
        from .app import build_app

        return build_app(self._service, self._options, drain=self._drain)


def _load_quietly(service: Any) -> None:
    """``service.load()``, its error kept in ``service.load_error``."""
    try:
        service.load()
    except BaseException:  # re-raised by the constructor, on Serve's thread
        pass


@ray.remote(num_cpus=0)
class DrainSignal:
    """The driver's SIGTERM, relayed to the replicas (:meth:`wait` returns once it came), and which replicas
    have answered their requests in flight since (:meth:`drained`)."""

    def __init__(self) -> None:
        self._begun = asyncio.Event()
        self._drained: set[str] = set()

    async def begin(self) -> None:
        self._begun.set()

    async def wait(self) -> None:
        await self._begun.wait()

    async def drained(self, replica: str) -> int:
        """Count ``replica`` as drained (with no ``replica``: only ask); how many have drained."""
        if replica:
            self._drained.add(replica)
        return len(self._drained)


def _follow_drain(drain_signal: Any, drain: Drain, timeout_s: float) -> None:
    """A replica's thread: wait for the driver's SIGTERM, drain, say so."""
    try:
        ray.get(drain_signal.wait.remote())
    except ray.exceptions.RayError:  # the driver (which owns the signal) is gone: Serve stops the replica
        return
    drain.begin()
    if drain.wait_idle(timeout_s):
        ray.get(drain_signal.drained.remote(uuid.uuid4().hex))


def reward_deployment(
    config: RewardConfig | str | Mapping[str, Any],
    *,
    split: str = "train",
    replicas: int = 1,
    gpus_per_replica: float = 0,
    cpus_per_replica: float = 1,
    options: ServeOptions = ServeOptions(),
    limits: WireLimits = WireLimits(),
    name: str = "rewardzoo",
    drain_signal: Any = None,
    drain_timeout_s: float = ServeJob.drain_timeout_s,
) -> Any:
    """A bound Serve application (``serve.run(reward_deployment("rewards.yaml"), route_prefix="/")``).

    The config is read here, on the driver, and travels to the replicas as data (so a YAML file need
    not exist on the other nodes; model paths must). ``replicas`` / ``gpus_per_replica`` / ``cpus_per_replica``:
    the front deployment's, and what an entry's ``ray:`` block leaves out. ``drain_signal``: a :class:`DrainSignal`
    actor whose ``begin`` makes every front replica drain (at most ``drain_timeout_s``), as ``serve --ray`` does on
    SIGTERM. With Ray running, a placement that cannot fit its nodes is a ConfigError naming the entry.
    """
    config = resolve_config(config)
    specs = config.specs(split)  # check the split before any replica starts
    defaults = RayPlacement(gpus_per_replica, cpus_per_replica, replicas, MAX_ONGOING_REQUESTS)
    rest, groups = placed_groups(specs, defaults)
    front = RayPlacement(gpus_per_replica if rest else 0, cpus_per_replica, replicas, MAX_ONGOING_REQUESTS)
    check_cluster_fit([(name, front)] + [(g.label, g.placement) for g in groups])
    bound = tuple((g.names, _group_deployment(g, name).bind(g.specs)) for g in groups)
    deployment = serve.deployment(
        RewardServeReplica,
        name=name,
        num_replicas=replicas,
        max_ongoing_requests=MAX_ONGOING_REQUESTS,
        ray_actor_options=front.options(),
    )
    return deployment.bind(config, split, options, limits, drain_signal, drain_timeout_s, bound)


def _group_deployment(group: Any, app: str) -> Any:
    """The Serve deployment of a placed group, named ``APP-FIRST_ENTRY``, with the group's placement."""
    from .ray_rewards import RewardGroupReplica

    p = group.placement
    return serve.deployment(
        RewardGroupReplica,
        name=f"{app}-{group.label}",
        num_replicas=p.replicas,
        max_ongoing_requests=p.max_ongoing_requests,
        ray_actor_options=p.options(),
    )


def placement_notice(config_source: Any, job: ServeJob, app: str = "rewardzoo") -> list[str]:
    """One line per deployment of entries with a ``ray:`` block: its name, entries and resources per replica."""
    defaults = RayPlacement(job.gpus_per_replica, job.cpus_per_replica, job.replicas, MAX_ONGOING_REQUESTS)
    _rest, groups = placed_groups(resolve_config(config_source).specs(job.split), defaults)
    return [
        f"rewardzoo serve: deployment {app}-{g.label} ({', '.join(g.names)}): {g.placement.replicas} replica(s), "
        f"{g.placement.num_gpus or 0:g} GPU and {g.placement.num_cpus or 0:g} CPU each, "
        f"at most {g.placement.max_ongoing_requests} request(s) in flight per replica"
        for g in groups
    ]


def run_ray(config_source: Any, job: ServeJob, options: ServeOptions, limits: WireLimits) -> int:
    """``rewardzoo serve --ray``: start (or join) Ray as the Ray engine does, deploy, serve until interrupted or,
    on SIGTERM, drained; 1 when the drain timed out."""
    from ..ray.startup import ensure_ray  # the one start-up: a fresh local instance unless an address is given

    ensure_ray(job.address, quiet=False)
    terms: list[int] = []  # Ray's handler of SIGTERM is replaced once Ray is up (it installs it at start)
    previous = signal.signal(signal.SIGTERM, lambda sig, frame: terms.append(sig))
    undrained = 0
    try:
        drain_signal = cast(Any, DrainSignal).remote()  # an actor class (mypy keeps a decorated class's type)
        serve.start(http_options={"host": job.host, "port": job.port})
        app = reward_deployment(
            config_source,
            split=job.split,
            replicas=job.replicas,
            gpus_per_replica=job.gpus_per_replica,
            cpus_per_replica=job.cpus_per_replica,
            options=options,
            limits=limits,
            drain_signal=drain_signal,
            drain_timeout_s=job.drain_timeout_s,
        )
        serve.run(app, name="rewardzoo", route_prefix="/")
        print(
            binding_notice(job.host, job.port, options.token is not None) + f" (Ray Serve, {job.replicas} "
            f"replica(s); Ray at {ray.get_runtime_context().gcs_address})",
            file=sys.stderr,
            flush=True,
        )
        for line in placement_notice(config_source, job):
            print(line, file=sys.stderr, flush=True)
        while not terms:
            time.sleep(0.5)
        undrained = _drain_replicas(drain_signal, job.replicas, job.drain_timeout_s)
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:  # None: Ray's own, not installed from Python
            signal.signal(signal.SIGTERM, previous)
    serve.shutdown()
    ray.shutdown()
    if undrained:
        print(cut_notice(undrained, job.drain_timeout_s, "replica(s) with requests"), file=sys.stderr, flush=True)
        return 1
    if terms:
        print(DRAINED_NOTICE, file=sys.stderr, flush=True)
    return 0


def _drain_replicas(drain_signal: Any, replicas: int, timeout_s: float) -> int:
    """Make every replica drain; how many had not drained within ``timeout_s``."""
    print(f"rewardzoo serve: SIGTERM, draining {replicas} replica(s)", file=sys.stderr, flush=True)
    ray.get(drain_signal.begin.remote())
    deadline = time.monotonic() + timeout_s + 1.0  # the replicas' own waits are bounded by timeout_s
    drained = 0
    while time.monotonic() < deadline:
        drained = ray.get(drain_signal.drained.remote(""))
        if drained >= replicas:
            return 0
        time.sleep(0.1)
    return replicas - drained
