"""The composition root: configuration -> engine, cluster connection, drivers, service and apps
(:class:`Runtime`). Running it (listeners, TLS, signals, reloads) is ``server.py``'s."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Sequence, TypeVar

from fastapi import FastAPI
from prometheus_client import Counter

from scheduler.cells import HivedEngine
from scheduler.cells.capabilities import Cells
from scheduler.cells.config import TopologyConfig, node_name_paths
from scheduler.cluster.api import KubernetesApi
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.exchange.controller import ExchangeController
from scheduler.cluster.exchange.quotas import ExchangeQuotas
from scheduler.cluster.leadership import Driver, LeaderElector, Terms, default_namespace
from scheduler.cluster.pacing import OnLoop
from scheduler.cluster.nudge import Nudger, Parked, VictimRequeue
from scheduler.config import Settings
from scheduler.core.engine import SchedulingEngine
from scheduler.core.model import NodeInfo
from scheduler.core.pods import PodStore
from scheduler.errors import CellfitError, ConfigError, KubernetesApiError
from scheduler.cluster.priority_class import PriorityClassLookup
from scheduler.cluster.reclaim import ReclaimController
from scheduler.cluster.pending import PendingPods
from scheduler.cluster.stranded import StrandedGuarantees
from scheduler.composition import Composition, assemble_configured, compose_cells
from scheduler.preemption.holds import Clock
from scheduler.extender.admission import PodAdmission
from scheduler.extender.app import create_admission_app, create_app, create_inspect_app, create_metrics_app
from scheduler.extender.paired import PairedSchedulerHealth
from scheduler.extender.bookings import BookingSweeper
from scheduler.extender.dispatch import VerbDispatch
from scheduler.extender.gc_tuning import GcPauses, freeze_once_ready
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.inspect import inspect_router
from scheduler.extender.service import AlwaysReady, ExtenderService, Readiness
from scheduler.extender.validating import ObjectValidation
from scheduler.extender.validation import LiveCells, NodeSizes, configured_pod_problems, unplaceable_reason
from scheduler.kube import names, translate, wire
from estimator.controller import Capacity, EstimatorController
from placer.controller import Guarantees, PlacerController
from placer.guarantee import GpuPodsAsk, KeptRoom, PodRequests, asked_per_gpu, kept_room
from placer.guarantee import guarantees as guarantee_views

log = logging.getLogger(__name__)
T = TypeVar("T")
D = TypeVar("D")


@dataclass
class Runtime:
    # The extender's listener: the verbs, then (``app.api``) inspect, health, metrics, OpenAPI.
    app: VerbDispatch[FastAPI]
    # /metrics, /healthz and /readyz only, for the listener on server.metricsPort.
    metrics_app: FastAPI
    # The pod-create webhook, for the HTTPS listener on admission.port; None when disabled.
    admission_app: FastAPI | None
    # Read-only /v1/inspect and /healthz, for the listener on server.inspectPort.
    inspect_app: FastAPI
    engine: SchedulingEngine
    cache: ClusterCache | None
    metrics: ExtenderMetrics
    # Serialises every call into the engine: the service's verbs, the watch cache, live reload.
    lock: threading.RLock
    # The live drivers (estimator, AlloX admission and placer, nudge), built afresh for each term
    # of leadership; None standalone.
    terms: Terms | None = None
    # The election on the controllers' Lease that begins and ends the terms; None standalone or
    # with leaderElection.enabled false (then one term runs from start to shutdown).
    elector: LeaderElector | None = None
    # The cell exchange's quota moves (every replica); None unless HiveD runs with a cluster.
    exchange_quotas: ExchangeQuotas | None = None
    # HiveD's cells inside the engine (live reload of the VCs); None under resource fit.
    cells: Cells | None = None
    # What a live reload that applied new VCs calls (server.py: ConfigReloader's on_applied), as
    # the exchange's quota moves and discovered nodes do: kube-scheduler retries its parked pods.
    cells_changed: Callable[[], None] = lambda: None

    @property
    def estimator(self) -> EstimatorController | None:
        """The current term's sampling-pod estimator; None standalone, when estimator.enabled is
        false, or on a standby."""
        return _driver(self.terms, EstimatorController)

    @property
    def placer(self) -> PlacerController | None:
        """The current term's AlloX admission and placer; None also when allox.enabled is false."""
        return _driver(self.terms, PlacerController)


# AlloX counts free the room of pods being deleted with a grace period up to this (seconds): a
# Job it starts there waits at most that for its node, well inside the NotBound limit (300 s,
# placer/holding.py), instead of being sent to the slower kind because the GPUs looked held with
# no known end (user25 #3: 14 Jobs started on CPU a second after a GPU Job's deletion).
LEAVING_FREE_SECONDS = 120.0

# Discovery waits this long for the API at startup before giving up (the pod then restarts).
DISCOVERY_TIMEOUT_SECONDS = 60.0


def build_composition(
    settings: Settings, api: KubernetesApi | None, *, on_cells_change: Callable[[], None] | None = None,
    clock: Clock = time.monotonic,
) -> Composition:
    """The engine and the capabilities the drivers get (``scheduler/composition.py``); with an
    API, the watch cache keeps the pods' record."""
    return assemble_configured(settings, cells=build_cells(settings, api, on_cells_change=on_cells_change, clock=clock), clock=clock,
                               pods=PodStore() if api is not None else None)


def build_cells(
    settings: Settings, api: KubernetesApi | None, *, on_cells_change: Callable[[], None] | None = None,
    clock: Clock = time.monotonic,
) -> HivedEngine | None:
    """HiveD's cells, None under resource fit. HiveD without a configured topology discovers its
    cells from the cluster's Nodes, listed once here before anything is served; ``on_cells_change``
    hears each change to them after (a node joining or leaving), under the engine lock."""
    policy = settings.resolved_policy(connected=api is not None)
    if policy == "resource-fit":
        log.info("policy resource-fit", extra={"offerBestNodes": settings.policy.offer_best_nodes})
        return None
    if settings.policy.offer_best_nodes is not None:
        # HiveD's filter keeps one node of its own choosing already.
        log.warning("policy.offerBestNodes applies to resource-fit only; HiveD ignores it", extra={"policy": policy})
    nodes: list[NodeInfo] | None = None
    if settings.cells.topology is None:
        if api is None:
            raise ConfigError(
                "policy.name: hived needs cells.topology, or a cluster connection to discover the cells from"
            )
        nodes = _list_nodes(api, settings)
    engine = compose_cells(
        settings,
        connected=api is not None,
        nodes=nodes,
        # Discovered cells follow nodes that join and leave: say what changed, as at startup.
        on_cells_change=lambda change: _cells_changed_at_runtime(change, then=on_cells_change),
        clock=clock,
    )
    assert engine is not None  # the policy is hived
    log.info("policy hived", extra={"cells": engine.summary})
    for problem in engine.checked.warnings:  # works, but will not for long (an old cell-type name)
        log.warning("cells configuration: a name to change", extra={"problem": problem})
    for vc, why in engine.checked.unserved.items():  # the others are served; its pods are told this
        log.error("virtual cluster not served", extra={"vc": vc, "problem": why})
    # The cell tree is large and lives for the whole process: keep the collector from walking
    # it on every full collection (millisecond pauses inside kube-scheduler's calls).
    gc.collect()
    gc.freeze()
    return engine


def _cells_changed_at_runtime(change: str, *, then: Callable[[], None] | None) -> None:
    log.info("cells changed", extra={"change": change})
    if then is not None:
        then()


class _Relay:
    """A call whose receiver comes later: the engine, which calls it, is built before the
    requeue signal it reaches (which needs the watch cache, which needs the engine)."""

    def __init__(self) -> None:
        self.to: Callable[[], None] | None = None

    def __call__(self) -> None:
        if self.to is not None:
            self.to()


def _list_nodes(api: KubernetesApi, settings: Settings) -> list[NodeInfo]:
    deadline = time.monotonic() + DISCOVERY_TIMEOUT_SECONDS
    delay = 0.5
    while True:
        try:
            listing = wire.NODE_LIST_DECODER.decode(api.list_raw("nodes"))
            break
        except KubernetesApiError as error:
            if time.monotonic() > deadline:
                raise ConfigError(f"cells: cannot discover cells, listing Nodes failed: {error}") from None
            log.warning("listing nodes for cell discovery failed; retrying", extra={"reason": str(error)})
            time.sleep(delay)
            delay = min(delay * 2, 8.0)
    nodes = []
    for node in listing.items:
        try:
            nodes.append(translate.node_info(node, gpu_resource=settings.policy.gpu_resource_name))
        except CellfitError as error:
            log.warning("node left out of discovery", extra={"node": node.metadata.name, "reason": str(error)})
    return nodes


def build_runtime(
    settings: Settings, *, api: KubernetesApi | None = None, standalone: bool = False, clock: Clock = time.monotonic
) -> Runtime:
    """Wire everything for ``settings``. ``api`` overrides the connection ``cluster.mode`` would
    make; ``standalone`` forces none. ``clock``: the engine's seconds (a test driving the service
    from a simulation passes the simulation's clock, so both decide alike)."""
    if not names.use_native(settings.server.node_name_fast_path) and settings.server.node_name_fast_path:
        log.warning(
            "node names are decoded in Python: the C extension scheduler.kube._names was not built "
            "(no C compiler at install); the answers are the same, slower at thousands of nodes",
            extra={"setting": "server.nodeNameFastPath"},
        )
    if api is None and not standalone:
        # kube-scheduler's calls hold at most this many API requests at once: one each.
        api = KubernetesApi.connect(settings.cluster, loop_connections=settings.server.extender_listener.max_connections)
    if settings.allox.enabled and not settings.estimator.enabled:
        log.warning("allox.enabled is true but estimator.enabled is false: AlloX admission runs only beside the estimator, "
                    "so it is off; set estimator.enabled: true to run it, or allox.enabled: false to say so")
    # The one way this replica's VCs or cells changing reaches the requeue signal
    # (scheduler/cluster/nudge.py, VictimRequeue.cells_may_have_changed): a discovered node
    # joining or leaving (the engine), the exchange's quota moves (ExchangeQuotas.on_moved) and
    # a live reload that applied new VCs (Runtime.cells_changed, server.py's on_applied).
    cells_changed = _Relay()
    composition = build_composition(settings, api, on_cells_change=cells_changed, clock=clock)
    engine = composition.engine
    lock = threading.RLock()
    metrics = ExtenderMetrics()
    cache = (
        ClusterCache(api=api, engine=engine, lock=lock, gpu_resource=settings.policy.gpu_resource_name, pods=composition.pods,
                     jobs=composition.jobs, interchangeable_jobs=settings.estimator.enabled, scheduler_name=settings.nudge.scheduler_name)
        if api is not None
        else None
    )
    if cache is not None and composition.cells is not None:
        cache.on_pods_listed = composition.cells.pods_listed  # HiveD judges what waited for the bindings
    # The cell exchange's quota moves (every replica): a replica decides once its ledger is applied.
    quotas = _exchange_quotas(settings, api, composition.cells, lock, on_moved=cells_changed)
    readiness: Readiness = cache if cache is not None else AlwaysReady()
    if cache is not None and quotas is not None:
        readiness = _AllReady(cache, quotas)
    metrics.track_thread_cpu()
    metrics.track_readiness(lambda: readiness.ready()[0])
    # The running HiveD configuration's VCs and cell types, for the preempt verb's refusals and
    # the validating webhook (scheduler/extender/validation.py).
    live_cells = LiveCells(composition.cells, lock=lock) if composition.cells is not None else None
    service = ExtenderService(
        engine=engine,
        lock=lock,
        metrics=metrics,
        gpu_resource=settings.policy.gpu_resource_name,
        cluster=cache,
        readiness=readiness,
        unplaceable=(lambda pod: unplaceable_reason(pod, cells=live_cells)) if live_cells is not None else None,
        preemption=composition.preemption,
        pods=composition.pods,
    )

    if cache is not None:
        metrics.track_sizes(lambda: _locked(lock, cache.sizes), ("nodes", "pods", "jobs"))
    else:  # standalone: the nodes kube-scheduler sent, the pods bound through cellfit
        metrics.track_sizes(lambda: _locked(lock, engine.stats), ("nodes", "pods"))
    placement = composition.placement
    # HiveD's bookings that lose their reason are released (scheduler/cells/expiry.py).
    sweeper = BookingSweeper.for_engine(composition.cells, lock=lock, events=api, watched=cache is not None)
    if composition.cells is not None:
        cells = composition.cells
        metrics.track_cells(lambda: _locked(lock, cells.metrics))
    holds = composition.holds
    if holds is not None:
        resume_holds = holds
        metrics.track_resume_holds(lambda: _locked(lock, resume_holds.stats))

    hived_cells = composition.cells
    count_preemption = metrics.track_exchange(quotas.metrics) if quotas is not None else None
    terms, elector = _leadership(settings, api, cache, metrics, hived=hived_cells, lock=lock, quotas=quotas,
                                 count_preemption=count_preemption, reclaimer=_reclaimer(settings, composition, metrics, lock=lock, cache=cache),
                                 kept_room=_kept_room(composition, lock=lock),
                                 asked_per_gpu=lambda: _locked(lock, lambda: asked_per_gpu(composition.pods.pods())),
                                 pod_requests=lambda uid: found.requests if (found := composition.pods.get(uid)) is not None else None)
    victim_requeue = _victim_requeue(settings, api, cache, metrics, cells=composition.cells, lock=lock)
    if victim_requeue is not None:
        cells_changed.to = victim_requeue.cells_may_have_changed

    missing_nodes = _missing_nodes(settings, engine=engine, cache=cache, lock=lock) if composition.cells is not None else None
    gc_pauses = GcPauses(registry=metrics.registry)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        gc_pauses.install()
        freeze: asyncio.Task[None] | None = None
        marking_missing: asyncio.Task[None] | None = None
        if cache is not None:
            # Relists run a step at a time on the loop the verbs run on (cluster/pacing.py), each
            # step taking the engine lock without blocking the loop.
            cache.pace_on(OnLoop(asyncio.get_running_loop(), lock=lock))
            cache.start()
            # What the first sync loads lives as long as the process: out of every full
            # collection's walk from then on (scheduler/extender/gc_tuning.py).
            synced = cache
            freeze = asyncio.create_task(freeze_once_ready(ready=lambda: synced.ready()[0], what="watch cache synced"))
            if missing_nodes is not None:
                marking_missing = asyncio.create_task(missing_nodes_once_synced(ready=lambda: synced.ready()[0], mark=missing_nodes))
        if quotas is not None:
            quotas.start()
        if sweeper is not None:
            sweeper.start()
        if victim_requeue is not None:
            victim_requeue.start()
        if elector is not None:
            elector.start()
        elif terms is not None:
            metrics.leader.set(1)
            terms.begin()
        try:
            yield
        finally:
            if elector is not None:
                elector.stop()  # ends the term and releases the Lease: a standby takes over at once
            elif terms is not None:
                terms.end()
            if sweeper is not None:
                sweeper.stop()
            if victim_requeue is not None:
                victim_requeue.stop()
                # A signal in flight makes two API calls, each bounded by the client's timeout.
                victim_requeue.join(2 * settings.cluster.request_timeout_seconds)
            if quotas is not None:
                quotas.stop()
            if cache is not None:
                cache.stop()
            if freeze is not None:
                freeze.cancel()
            if marking_missing is not None:
                marking_missing.cancel()
            gc_pauses.remove()

    app = create_app(
        service=service,
        metrics=metrics,
        readiness=readiness,
        max_request_bytes=settings.server.max_request_bytes,
        lifespan=lifespan,
        gpu_resource=settings.policy.gpu_resource_name,
    )
    inspect = inspect_router(engine=placement, cells=composition.cells, lock=lock, holds=holds, estimates=_term_view(terms, elector, EstimatorController, enabled=settings.estimator.enabled),
                             allox=_term_view(terms, elector, PlacerController,
                                              enabled=settings.estimator.enabled and settings.allox.enabled),
                             allox_off=allox_off_reason(settings, connected=api is not None),
                             exchanges=_exchange_view(quotas, _term_view(terms, elector, ExchangeController, enabled=quotas is not None)))
    app.api.include_router(inspect)
    inspect_app = create_inspect_app(inspect=inspect)
    paired_url = settings.server.paired_scheduler_health_url
    metrics_app = create_metrics_app(
        metrics=metrics, readiness=readiness, paired_scheduler=PairedSchedulerHealth(paired_url) if paired_url is not None else None
    )
    admission_app = None
    if settings.admission.enabled:
        resumed_class = (
            PriorityClassLookup(api, name=settings.admission.resumed_priority_class) if api is not None else None
        )
        if resumed_class is None:
            log.warning("admission webhook without a Kubernetes API: it admits every pod unchanged")
        admission = PodAdmission(preemption=composition.preemption, lock=lock, metrics=metrics, resumed_class=resumed_class,
                                 pool=settings.allox.node_selector)
        validation = ObjectValidation(
            cells=live_cells,
            metrics=metrics,
            gpu_resource=settings.policy.gpu_resource_name,
            reject_invalid=settings.admission.reject_invalid,
            scheduler_name=settings.nudge.scheduler_name,
            preempts_best_effort=settings.preemption.policy == "fitgpp" and settings.preemption.max_preemptions != 0,
            nodes=_node_sizes(settings, cache),
            pool=settings.allox.node_selector,
        )
        admission_app = create_admission_app(
            admission=admission, validation=validation, max_request_bytes=settings.server.max_request_bytes
        )
    runtime = Runtime(
        app=app, metrics_app=metrics_app, inspect_app=inspect_app, admission_app=admission_app, engine=engine, cache=cache, metrics=metrics,
        lock=lock, terms=terms, elector=elector, exchange_quotas=quotas, cells=composition.cells, cells_changed=cells_changed,
    )

    if cache is None:
        log.info(
            "standalone mode: node capacity comes from the Node objects kube-scheduler sends; bind is unavailable",
        )
    return runtime


def allox_off_reason(settings: Settings, *, connected: bool) -> str:
    """Why AlloX admission is not running, naming what turned it off (``kubectl cellfit queue``
    says it): no cluster connection, allox.enabled, or estimator.enabled, beside which it runs."""
    if not connected:
        why = "cellfit runs standalone (no cluster connection)"
    elif not settings.allox.enabled:
        why = "allox.enabled is false"
    elif not settings.estimator.enabled:
        why = ("estimator.enabled is false, and AlloX runs only beside the estimator "
               "(allox.enabled: true has no effect without it)")
    else:
        why = "this replica runs no controllers"
    return f"AlloX admission is not running: {why}"


def _leadership(
    settings: Settings, api: KubernetesApi | None, cache: ClusterCache | None, metrics: ExtenderMetrics,
    *, hived: Cells | None = None, lock: threading.RLock | None = None, quotas: ExchangeQuotas | None = None,
    count_preemption: Callable[[str], None] | None = None,
    reclaimer: Callable[[KubernetesApi, PendingPods], ReclaimController] | None = None,
    kept_room: Callable[[frozenset[str]], Sequence[KeptRoom]] | None = None,
    asked_per_gpu: Callable[[], GpuPodsAsk] | None = None,
    pod_requests: PodRequests | None = None,
) -> tuple[Terms | None, LeaderElector | None]:
    """The live drivers, built afresh for each term, and the election on the controllers' Lease
    that begins and ends the terms (scheduler/cluster/leadership.py). Every replica serves the
    verbs to the kube-scheduler beside it, leader or not."""
    if api is None or cache is None or not (settings.estimator.enabled or settings.nudge.enabled or quotas is not None or reclaimer is not None):
        return None, None
    connected, watched = api, cache
    election = settings.leader_election
    namespace = election.namespace or default_namespace()

    def build() -> list[Driver]:
        # The term's drivers write through an API fenced to the term: a pass under way when the
        # Lease is lost makes no deletion, patch or Event after it (scheduler/cluster/leadership.py).
        fenced = connected.fenced(terms.in_term())
        estimator = _estimator(settings, fenced, watched, metrics, hived=hived, lock=lock)
        placer = _placer(settings, fenced, watched, estimator, metrics, hived=hived, lock=lock, kept_room=kept_room,
                         asked_per_gpu=asked_per_gpu, pod_requests=pod_requests)
        # One list and watch of the profile's pending pods a term, which the nudge and the
        # reclaim both read (scheduler/cluster/pending.py); started first, stopped last.
        pending = PendingPods(api=fenced, scheduler_name=settings.nudge.scheduler_name, constrained=reclaimer is not None)
        nudger = _nudger(settings, fenced, watched, metrics, namespace=namespace, pending=pending)
        exchange = None
        if quotas is not None and hived is not None and lock is not None:
            exchange = ExchangeController(api=fenced, quotas=quotas, engine=hived, lock=lock, settings=settings.exchange,
                                          signal_image=settings.nudge.signal_image,
                                          on_preempt=count_preemption)
        reclaim = reclaimer(fenced, pending) if reclaimer is not None else None
        readers = nudger is not None or reclaim is not None
        return [driver for driver in (pending if readers else None, estimator, placer, nudger, exchange, reclaim) if driver is not None]

    terms = Terms(build)
    if not election.enabled:
        return terms, None

    def stopped() -> None:
        terms.end()
        metrics.standby()

    elector = LeaderElector(
        api=api, settings=election, on_started=terms.begin, on_stopped=stopped,
        on_change=lambda leading: metrics.leader.set(1 if leading else 0),
    )
    return terms, elector


def _reclaimer(
    settings: Settings, composition: Composition, metrics: ExtenderMetrics, *, lock: threading.RLock, cache: ClusterCache | None
) -> Callable[[KubernetesApi, PendingPods], ReclaimController] | None:
    """HiveD's reclaim of the cells kube-scheduler will not preempt for (scheduler/cluster/reclaim.py),
    built afresh for each term; None standalone, under resource fit or with reclaim.enabled false."""
    cells, pods = composition.cells, composition.pods
    if cache is None or not settings.reclaim.enabled or cells is None:
        return None
    remember_victims = cache.remember_victims
    # Made once: each term's controller counts into it (a registry refuses a second of the name).
    reclaimed = Counter(
        "cellfit_reclaimed_pods_total",
        "Opportunistic pods the leader deleted for a waiting guaranteed pod because kube-scheduler preempts only lower "
        "priorities (reclaim section), by the waiting pod's VC.",
        ["vc"], registry=metrics.registry,
    )
    scheduler_name = settings.nudge.scheduler_name

    def build(api: KubernetesApi, pending: PendingPods) -> ReclaimController:
        stranded = StrandedGuarantees(api=api, engine=cells, pods=pods, lock=lock, scheduler_name=scheduler_name,
                                      gpu_resource=settings.policy.gpu_resource_name, after_seconds=settings.reclaim.after_seconds,
                                      pending=pending)
        return ReclaimController(api=api, engine=cells, pods=pods, lock=lock, settings=settings.reclaim,
                                 scheduler_name=scheduler_name, on_reclaim=lambda vc: reclaimed.labels(vc=vc).inc(),
                                 remember_victims=remember_victims, stranded=stranded, jobs=composition.preemption)

    return build


def _nudger(
    settings: Settings, api: KubernetesApi, cache: ClusterCache, metrics: ExtenderMetrics, *, namespace: str, pending: PendingPods
) -> Nudger | None:
    """The requeue nudge: pods kube-scheduler parked while cellfit was away are retried within
    seconds (its signal pod lives in ``namespace``, the Lease's); it reads the term's ``pending``."""
    if not settings.nudge.enabled:
        return None

    def signalled(found: Parked) -> None:
        metrics.requeue_signals.labels(reason="failed" if found.failed else "stale").inc()

    return Nudger(api=api, settings=settings.nudge, namespace=namespace, ready=lambda: cache.ready()[0], on_signal=signalled,
                  pending=pending)


def _victim_requeue(
    settings: Settings, api: KubernetesApi | None, cache: ClusterCache | None, metrics: ExtenderMetrics,
    *, cells: Cells | None = None, lock: threading.RLock | None = None,
) -> VictimRequeue | None:
    """A requeue signal once the watch has seen preemption victims go, and once HiveD's
    ``cells`` (their VCs: a live reload, the cell exchange; discovered nodes joining) have
    changed, as its ``cells_may_have_changed`` is told (scheduler/cluster/nudge.py,
    VictimRequeue). On every replica: the kube-scheduler beside any of them may be the active one."""
    if api is None or cache is None or not settings.nudge.enabled:
        return None
    summary = _cells_summary(cells, lock=lock) if cells is not None and lock is not None else None
    requeue = VictimRequeue(
        api=api, namespace=settings.leader_election.namespace or default_namespace(),
        min_interval_seconds=settings.nudge.min_interval_seconds,
        on_signal=lambda: metrics.requeue_signals.labels(reason="victims-gone").inc(),
        signal_image=settings.nudge.signal_image,
        cells_summary=summary,
        on_cells_signal=lambda: metrics.requeue_signals.labels(reason="cells-changed").inc(),
        on_hold_signal=lambda: metrics.requeue_signals.labels(reason="hold-ended").inc(),
    )
    cache.on_victims_gone = requeue.victims_gone
    cache.on_hold_ended = requeue.hold_ended
    return requeue


def _missing_nodes(
    settings: Settings, *, engine: SchedulingEngine, cache: ClusterCache | None, lock: threading.RLock
) -> Callable[[], dict[str, str]] | None:
    """What marks the configured topology's nodes that have no Node object bad, once the watch
    has synced; None without a configured topology (discovered cells follow the Nodes) or a watch."""
    topology = settings.cells.topology
    if topology is None or cache is None:
        return None
    watched, configured = cache, topology
    return lambda: mark_missing_nodes(topology=configured, engine=engine, cache=watched, lock=lock)


def mark_missing_nodes(
    *, topology: TopologyConfig, engine: SchedulingEngine, cache: ClusterCache, lock: threading.RLock
) -> dict[str, str]:
    """The configured topology's nodes that have no Node object in the synced watch cache, or
    one it could not read (node -> the field that names it), each made bad as a deleted node
    is: no pod is placed on its cells, which would otherwise look free and healthy and carry a
    VC's guarantee on a node cellfit does not know. The Node's arrival (or a version that
    reads) makes its cells healthy (the watch applies it). Each is named in a warning, with its
    field, and for a Node that does not read, why."""
    paths = node_name_paths(topology, prefix="cells")
    with lock:  # the names read and the cells marked together: a Node applied between is not missed
        known = cache.allocatable_by_node().keys()
        unreadable = cache.unreadable_nodes()
        missing = {name: path for name, path in paths.items() if name not in known}
        for name in missing:
            engine.delete_node(name)
    for name, path in missing.items():
        if name in unreadable:
            # Not a typo in the topology: the Node is there, and its own field is what to fix.
            log.warning("a configured cell's node has a Node object that could not be read: its cells are bad, and no pod "
                        "is placed on them until it reads", extra={"node": name, "field": path, "reason": unreadable[name]})
        else:
            log.warning("a configured cell's node has no Node object: its cells are bad, and no pod is placed on them until "
                        "the Node appears", extra={"node": name, "field": path})
    return missing


async def missing_nodes_once_synced(*, ready: Callable[[], bool], mark: Callable[[], object], poll_seconds: float = 1.0) -> None:
    """Wait until ``ready()`` (the watch cache's first sync: before it, every node is missing),
    then ``mark()`` once, on a worker thread (it waits for the engine lock, the loop must not).
    Cancelled with the process's other chores."""
    while not ready():
        await asyncio.sleep(poll_seconds)
    await asyncio.to_thread(mark)


def _cells_summary(cells: Cells, *, lock: threading.RLock) -> Callable[[], str]:
    """The cells' one-line summary (their VCs and topology), read under the engine lock."""
    def summary() -> str:
        with lock:
            return cells.summary
    return summary


def _driver(terms: Terms | None, kind: type[D]) -> D | None:
    """The current term's driver of ``kind``."""
    if terms is None:
        return None
    return next((driver for driver in terms.drivers if isinstance(driver, kind)), None)


def _term_view(
    terms: Terms | None, elector: LeaderElector | None, kind: type[Any], *, enabled: bool
) -> Callable[[], dict[str, Any]] | None:
    """The /v1/inspect view of the current term's driver of ``kind``; on a standby, who leads."""
    if terms is None or not enabled:
        return None

    def view() -> dict[str, Any]:
        driver = _driver(terms, kind)
        if driver is None:
            return {
                "leading": False,
                "leader": elector.holder if elector is not None else "",
                "message": "this replica is a standby: the holder of the controllers' Lease runs this driver",
            }
        return {"leading": True, **driver.inspect()}

    return view


class _AllReady:
    """Ready when every part is, in order (the watch cache, then the exchange's ledger applied)."""

    def __init__(self, *parts: Any) -> None:
        self._parts = parts

    def ready(self) -> tuple[bool, str]:
        whys = []
        for part in self._parts:
            ready, why = part.ready()
            if not ready:
                return False, why
            whys.append(why)
        return True, "; ".join(whys)


def _exchange_quotas(
    settings: Settings, api: KubernetesApi | None, hived: Cells | None, lock: threading.RLock, *, on_moved: Callable[[], None]
) -> ExchangeQuotas | None:
    """The cell exchange's quota moves, on every replica: HiveD with a cluster connection."""
    if api is None or hived is None or not settings.exchange.enabled:
        return None
    namespace = settings.leader_election.namespace or default_namespace()
    return ExchangeQuotas(api=api, engine=hived, lock=lock, base=settings.cells, namespace=namespace, settings=settings.exchange,
                          on_moved=on_moved)


def _exchange_view(
    quotas: ExchangeQuotas | None, controller: Callable[[], dict[str, Any]] | None
) -> Callable[[], dict[str, Any]] | None:
    """/v1/inspect/exchanges: the ledger and the quotas every replica applies, and the leader's board."""
    if quotas is None:
        return None
    return lambda: {**quotas.inspect(), "controller": controller() if controller is not None else {"leading": False}}


def _node_sizes(settings: Settings, cache: ClusterCache | None) -> NodeSizes | None:
    """The webhook's view of the nodes interchangeable Jobs run on (allox.nodeSelector's)."""
    if cache is None:
        return None
    pool = settings.allox.node_selector
    return NodeSizes(allocatable=lambda: list(cache.allocatable_by_node(pool).values()), pooled=bool(pool),
                     reserved_cpu_per_gpu=settings.allox.reserved_cpu_per_gpu if settings.allox.enabled else 0.0)


def _estimator(
    settings: Settings, api: KubernetesApi | None, cache: ClusterCache | None, metrics: ExtenderMetrics,
    *, hived: Cells | None = None, lock: threading.RLock | None = None,
) -> EstimatorController | None:
    """The sampling-pod estimator beside the extender: it needs the cluster (it creates pods).
    Its samples run on allox.nodeSelector's nodes, and a configuration no node there (or, under
    HiveD, no virtual cluster) could ever run is not sampled."""
    if api is None or cache is None or cache.interchangeable is None or not settings.estimator.enabled:
        return None
    gpu_resource = settings.policy.gpu_resource_name
    cells = LiveCells(hived, lock=lock) if hived is not None and lock is not None else None

    def capacity() -> Capacity:
        total = cache.capacity()
        return Capacity(cpu_millis=total.cpu_millis, gpus=total.gpus)

    controller = EstimatorController(
        api=api,
        settings=settings.estimator,
        gpu_resource=settings.policy.gpu_resource_name,
        capacity=capacity,
        jobs=cache.interchangeable,
        on_estimate=lambda e: metrics.estimates.labels(configuration=e.configuration, method=e.method).inc(),
        on_error=metrics.estimate_error.observe,
        pool=settings.allox.node_selector,
        nodes=lambda selector: list(cache.allocatable_by_node(selector).values()),
        node_labels=cache.node_labels,
        never_placed=(lambda pod, configuration: configured_pod_problems(pod, configuration, cells=cells, gpu_resource=gpu_resource))
        if cells is not None else None,
        # No pass (no configuration judged never to run) on part of the nodes: at a start the
        # cache applies the listed nodes one a step, and discovered cells follow them.
        nodes_synced=cache.nodes_synced,
    )
    metrics.track_sampling(lambda: controller.active_pods, lambda: controller.share)
    metrics.track_estimator(controller.inspect)
    return controller


def _placer(
    settings: Settings,
    api: KubernetesApi | None,
    cache: ClusterCache | None,
    estimator: EstimatorController | None,
    metrics: ExtenderMetrics,
    *,
    hived: Cells | None = None,
    lock: threading.RLock | None = None,
    kept_room: Callable[[frozenset[str]], Sequence[KeptRoom]] | None = None,
    asked_per_gpu: Callable[[], GpuPodsAsk] | None = None,
    pod_requests: PodRequests | None = None,
) -> PlacerController | None:
    """AlloX admission beside the estimator, whose watch of interchangeable Jobs it reads;
    under HiveD a Job's GPU configuration uses only its VC's free guarantee, read from the
    engine's own view under the engine lock (placer/guarantee.py)."""
    if api is None or cache is None or estimator is None or not settings.allox.enabled:
        return None
    guarantees: Callable[[frozenset[str]], Guarantees] | None = None
    if hived is not None and lock is not None:
        cells, engine_lock = hived, lock

        def read_guarantees(running: frozenset[str]) -> Guarantees:
            except_pods = cache.pods_owned_by(running) | cache.leaving_pods(within=LEAVING_FREE_SECONDS)
            within = cache.nodes_carrying(settings.allox.node_selector)  # AlloX's pods go only there
            with engine_lock:
                view, default_vc = cells.inspect_guarantees(except_pods=except_pods, within=within), cells.default_vc
                anywhere = None if within is None else cells.inspect_guarantees(except_pods=except_pods)
                # The opportunistic pods' requests on the VCs' cells, read under the same lock:
                # the cores and memory HiveD's reclaim frees beside their GPUs.
                return Guarantees(cells=guarantee_views(view, requests=pod_requests), default_vc=default_vc,
                                  anywhere=None if anywhere is None else guarantee_views(anywhere, requests=pod_requests))

        guarantees = read_guarantees

    def decided(seconds: float, decision: Any) -> None:
        metrics.allox_decision_duration.observe(seconds)
        counts: dict[str, int] = {"cpu": 0, "gpu": 0}
        for queued in decision.queue:
            counts[queued.kind] = counts.get(queued.kind, 0) + 1
        for kind, count in counts.items():
            metrics.allox_queue.labels(kind=kind).set(count)
        metrics.allox_fairness_spread.set(decision.progress_spread)
        if decision.undecided_machines:
            metrics.allox_decisions_cut_short.inc()

    return PlacerController(
        api=api,
        jobs=estimator,
        free_by_node=lambda running: cache.free_by_node(settings.allox.node_selector, except_owners=running,
                                                        leaving_within=LEAVING_FREE_SECONDS),
        capacity=lambda: cache.capacity(settings.allox.node_selector),
        allocatable_by_node=lambda: cache.allocatable_by_node(settings.allox.node_selector),
        settings=settings.allox,
        gpu_resource=settings.policy.gpu_resource_name,
        on_decision=decided,
        on_start=lambda kind, mechanism: metrics.allox_placements.labels(kind=kind, mechanism=mechanism).inc(),
        best_effort_gpus=lambda: cache.best_effort_gpus(settings.allox.node_selector),
        guarantees=guarantees,
        job_pods=lambda owners: cache.job_pods(owners, settings.allox.node_selector),
        kept_room=kept_room,
        asked_per_gpu=asked_per_gpu,
        nodes_may_join=settings.estimator.nodes_may_join,
        joining_limit_seconds=settings.estimator.pending_limit_seconds,
        allocatable_carrying=lambda labels: cache.allocatable_by_node({**settings.allox.node_selector, **labels}),
        pod_webhook=settings.admission.enabled,
    )


def _kept_room(composition: Composition, *, lock: threading.RLock) -> Callable[[frozenset[str]], Sequence[KeptRoom]]:
    """The room FitGpp's holds and kube-scheduler's nominations keep for pending pods, which
    AlloX must not count free (placer/guarantee.py kept_room), read under the engine lock."""
    holds, pods, cells = composition.holds, composition.pods, composition.cells
    default_vc = cells.default_vc if cells is not None else None
    return lambda running: _locked(lock, lambda: kept_room(
        holds=holds.holds() if holds is not None else [], pods=list(pods.pods()), except_owners=running, default_vc=default_vc,
        booked=cells.booked_nodes().keys() if cells is not None else frozenset()))


def _locked(lock: threading.RLock, read: Callable[[], T]) -> T:
    with lock:
        return read()
