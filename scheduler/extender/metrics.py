"""Prometheus metrics of the extender. Names follow Prometheus conventions (``_seconds``,
``_total``); histogram buckets start at 100 µs because the verbs are sub-millisecond and the
client library's default buckets (from 5 ms) would put every request in the first one."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Final, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from scheduler.constants import EXTENDER_VERBS, JOB_CLASS_BEST_EFFORT, JOB_CLASS_TRIAL

# 100 µs .. 13.1 s, doubling: kube-scheduler's framework extension-point buckets, one decade
# wider, and on past its extender timeout (5 s in the chart): a bind waiting on a loaded API
# server took over 1.6 s at the median in a burst, which buckets ending at 1.6 s showed as
# exactly 1.6 s at every quantile.
LATENCY_BUCKETS = tuple(0.0001 * 2**exponent for exponent in range(18))


JOB_CLASSES: Final = (JOB_CLASS_TRIAL, JOB_CLASS_BEST_EFFORT)

# cellfit_config_reloads_total's results (scheduler.extender.config_changes.ReloadResult).
CONFIG_RELOAD_RESULTS: Final = ("applied", "invalid", "needs_restart")


def _entry(read: Callable[[], Mapping[str, float]], key: str, default: float) -> Callable[[], float]:
    """A scrape-time gauge's function: ``read()[key]``, ``default`` when absent."""
    return lambda: read().get(key, default)


class ExtenderMetrics:
    """All metrics of one service instance, in their own registry (tests build many)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.request_duration = Histogram(
            "cellfit_extender_request_duration_seconds",
            "Time to answer one kube-scheduler extender call, body read to response encoded.",
            ["verb"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.requests = Counter(
            "cellfit_extender_requests_total",
            "Extender calls by verb and result: ok; rejected (HTTP 4xx, or 503 while the watch cache "
            "syncs); error (the verb's Error field set, or HTTP 500).",
            ["verb", "result"],
            registry=self.registry,
        )
        self.node_verdicts = Counter(
            "cellfit_filter_node_verdicts_total",
            "Filter verdicts per offered node: feasible, failed (preemption may help), unresolvable.",
            ["verdict"],
            registry=self.registry,
        )
        self.preemption_victims = Counter(
            "cellfit_preempt_victims_total",
            "Victims cellfit accepted in preempt answers.",
            registry=self.registry,
        )
        self.preemptions = _PreemptionCounter(Counter(
            "cellfit_preemptions_total",
            "Preemptions answered, by the preemptor's job class (trial, best-effort; other: a "
            "cellfit.io/job-class label naming neither) and the rule that chose the victims "
            "(fitgpp, fallback, reclaim: HiveD taking a VC's cells back, placement).",
            ["preemptor_class", "rule"],
            registry=self.registry,
        ))
        self.bindings = Counter(
            "cellfit_bindings_total",
            "Bind verb outcomes: bound, conflict (no longer fits), api_error, unavailable.",
            ["result"],
            registry=self.registry,
        )
        self.binding_wait = Histogram(
            "cellfit_bind_api_wait_seconds",
            "Time the bind verb waited for the Kubernetes API's answer to its Binding (the rest of "
            "cellfit_extender_request_duration_seconds{verb=\"bind\"} is cellfit's own).",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.cpu_by_verb = Counter(
            "cellfit_extender_cpu_seconds_total",
            "CPU time of the verbs' own work (decoding, deciding, answering; for bind also the API "
            "request written and its answer read), summed over the steps each request runs on its "
            "thread: the waits between them are not counted. HTTP parsing is not included.",
            ["verb"],
            registry=self.registry,
        )
        self.admission_reviews = Counter(
            "cellfit_admission_reviews_total",
            "Pod-create admission reviews answered: resumed (given the resumed PriorityClass), placed "
            "(rewritten into the configuration AlloX chose), refused (a placed pod a sidecar injected after cellfit tips "
            "over its pod-level resources), unchanged.",
            ["result"],
            registry=self.registry,
        )
        self.admission_validations = Counter(
            "cellfit_admission_validations_total",
            "Pods, Jobs and CronJobs reviewed by the validating webhook, by kind (pod, job, cronjob) and result: valid, "
            "warned (admitted with warnings), rejected (admission.rejectInvalid).",
            ["kind", "result"],
            registry=self.registry,
        )
        self.config_reload_outcomes = Counter(
            "cellfit_config_reloads_total",
            "New content of the configuration file, by outcome: applied (live), invalid (kept the "
            "running configuration), needs_restart (some changes wait for a restart).",
            ["result"],
            registry=self.registry,
        )
        self.config_in_effect = Gauge(
            "cellfit_config_in_effect",
            "1 while the running configuration is the configuration file's; 0 while the file holds "
            "changes not in effect (invalid, refused by the running cells, or waiting for a "
            "restart): a restart would run another configuration, or refuse to start. Alert on 0.",
            registry=self.registry,
        )
        self.config_in_effect.set(1)
        self.watch_cache_synced = Gauge(
            "cellfit_watch_cache_synced",
            "1 once the watch cache has listed Nodes, Pods and Jobs and follows their watches "
            "(/readyz answers 200; always 1 standalone); 0 while it lists or relists. The verbs "
            "answer 503 meanwhile: alert when it stays 0.",
            registry=self.registry,
        )
        self.certificate_expiry = Gauge(
            "cellfit_admission_certificate_expiry_timestamp_seconds",
            "When the certificate the admission webhook presents ends (its notAfter, Unix "
            "seconds); absent without the webhook. The API server refuses the webhook after it.",
            registry=None,  # registered by track_certificate: no webhook, no series
        )
        self.estimator_view: Callable[[], Mapping[str, Any]] | None = None
        self.registry.register(_EstimatorCollector(self))
        self.cache_objects = Gauge(
            "cellfit_cache_objects",
            "Objects by kind: with a cluster connection, what the watch cache holds (nodes, pods, "
            "jobs); standalone, the nodes kube-scheduler sent and the pods bound through cellfit.",
            ["kind"],
            registry=self.registry,
        )
        self.estimates = Counter(
            "cellfit_estimator_estimates_total",
            "Configuration estimates written on interchangeable Jobs, by configuration and method "
            "(samples, proportional, posterior, history, lower-bound).",
            ["configuration", "method"],
            registry=self.registry,
        )
        self.estimate_error = Histogram(
            "cellfit_estimator_estimate_error_ratio",
            "|estimate - real runtime| / real runtime of finished Jobs, for the configuration they ran in.",
            buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0),
            registry=self.registry,
        )
        self.sampling_pods = Gauge(
            "cellfit_estimator_sampling_pods",
            "Sampling pods pending or running (they count against estimator.maxClusterShare).",
            registry=self.registry,
        )
        self.allox_decision_duration = Histogram(
            "cellfit_allox_decision_duration_seconds",
            "Time of one AlloX admission decision: the matching of the Jobs read that picks the starts (in the solver "
            "process with allox.solverProcess, sending and answering included). Reading the Jobs before it is not "
            "counted (lastDecision.secondsFromState in GET /v1/inspect/allox has it), nor the queue's positions, "
            "planned after the starts are carried out.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.allox_queue = Gauge(
            "cellfit_allox_queue_jobs",
            "Interchangeable Jobs waiting for AlloX, by the kind the matching plans them on.",
            ["kind"],
            registry=self.registry,
        )
        self.allox_fairness_spread = Gauge(
            "cellfit_allox_fairness_spread",
            "Standard deviation of the users' AlloX progress (§3.3.2: dominant shares of their running Jobs, "
            "discounted on the slower kind) over the users with interchangeable Jobs waiting or running, after the last decision.",
            registry=self.registry,
        )
        self.allox_decisions_cut_short = Counter(
            "cellfit_allox_decisions_cut_short_total",
            "AlloX admission decisions stopped at allox.decisionBudgetSeconds: their starts were carried out and the "
            "free machines they left were decided by a pass run at once (many users at a small alpha).",
            registry=self.registry,
        )
        self.allox_placements = Counter(
            "cellfit_allox_placements_total",
            "Interchangeable Jobs started by AlloX admission, by kind and the placer's mechanism (template, webhook).",
            ["kind", "mechanism"],
            registry=self.registry,
        )
        self.sampling_share = Gauge(
            "cellfit_estimator_sampling_share",
            "What pending and running sampling pods request, as a share of the cluster's CPUs and GPUs "
            "(capped by estimator.maxClusterShare, one pod always allowed).",
            ["resource"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "cellfit_leader",
            "1 while this replica holds the controllers' Lease and runs the estimator, AlloX "
            "admission, the placer and the nudge (leaderElection); every replica serves the verbs.",
            registry=self.registry,
        )
        self.requeue_signals = Counter(
            "cellfit_requeue_signals_total",
            "Requeue signals sent (scheduler/cluster/nudge.py): kube-scheduler retried the pods it "
            "had parked, some of them because their last attempt met an extender error (failed) or "
            "unschedulable since before this replica took charge (stale), or once the watch saw the "
            "victims of a preemption go (victims-gone), or once this replica's virtual clusters or cells "
            "changed (cells-changed), or once a room hold that kept pods off ended without its pod "
            "bound (hold-ended).",
            ["reason"],
            registry=self.registry,
        )
        self.listener_refusals = Counter(
            "cellfit_listener_refusals_total",
            "Connections and requests a listener refused or cut, by listener (extender, metrics, "
            "admission) and reason: connection_limit (maxConnections), header_limit "
            "(maxHeaderBytes or maxHeaderCount, HTTP 431), read_timeout (readTimeoutSeconds, HTTP "
            "408), invalid_request (not HTTP, 400), tls_handshake (failed or timed out), "
            "write_timeout (an answer left unread for idleTimeoutSeconds). Every one "
            "is counted; the log says only some (it is rate-limited).",
            ["listener", "reason"],
            registry=self.registry,
        )
        self.listener_connections = Gauge(
            "cellfit_listener_connections",
            "Open connections by listener, TLS handshakes in progress included: at its "
            "maxConnections, the next one is refused.",
            ["listener"],
            registry=self.registry,
        )
        # Label children resolved once: .labels() costs a lock and a dict lookup per call.
        self.duration_by_verb = {verb: self.request_duration.labels(verb=verb) for verb in EXTENDER_VERBS}
        self.cpu_seconds_by_verb = {verb: self.cpu_by_verb.labels(verb=verb) for verb in EXTENDER_VERBS}
        self.bindings_bound = self.bindings.labels(result="bound")
        self.verdicts = {v: self.node_verdicts.labels(verdict=v) for v in ("feasible", "failed", "unresolvable")}
        # Every outcome exported from startup, so that an alert on increase(...[result="invalid"])
        # sees the first one.
        self.config_reloads = {r: self.config_reload_outcomes.labels(result=r) for r in CONFIG_RELOAD_RESULTS}
        self.answered = {
            (verb, result): self.requests.labels(verb=verb, result=result)
            for verb in EXTENDER_VERBS
            for result in ("ok", "rejected", "error")
        }

    def track_listener(self, listener: str, *, reasons: Iterable[str], connections: Callable[[], int]) -> Callable[[str], None]:
        """Export ``listener``'s open ``connections()`` at scrape time, and every ``reasons``
        from startup (an alert on increase() sees the first); returns what counts a refusal."""
        self.listener_connections.labels(listener=listener).set_function(lambda: float(connections()))
        counters = {reason: self.listener_refusals.labels(listener=listener, reason=reason) for reason in reasons}
        return lambda reason: counters[reason].inc()

    def track_sizes(self, sizes: Callable[[], Mapping[str, int]], kinds: tuple[str, ...]) -> None:
        """Report ``sizes()[kind]`` at scrape time for each kind."""
        for kind in kinds:
            self.cache_objects.labels(kind=kind).set_function(_entry(sizes, kind, 0))

    def track_sampling(self, active_pods: Callable[[], int], share: Callable[[], Mapping[str, float]]) -> None:
        self.sampling_pods.set_function(lambda: float(active_pods()))
        for resource in ("cpu", "gpu"):
            self.sampling_share.labels(resource=resource).set_function(_entry(share, resource, 0.0))

    def track_thread_cpu(self) -> None:
        """Each thread's CPU time, read at scrape time (cellfit_thread_cpu_seconds_total)."""
        self.registry.register(_ThreadCpuCollector())

    def track_readiness(self, ready: Callable[[], bool]) -> None:
        """The watch cache's readiness (scheduler/cluster/cache.py), read at scrape time."""
        self.watch_cache_synced.set_function(lambda: 1.0 if ready() else 0.0)

    def track_certificate(self, not_after: Callable[[], float | None]) -> None:
        """The webhook certificate's end, read at scrape time (NaN when it cannot be read)."""
        self.certificate_expiry.set_function(lambda: float("nan") if (end := not_after()) is None else end)
        self.registry.register(self.certificate_expiry)

    def track_estimator(self, view: Callable[[], Mapping[str, Any]] | None) -> None:
        """The estimator's inspect view (EstimatorController.inspect), read at scrape time: Jobs
        per state, failed sampling pods of Jobs still sampling. None: no estimator (standby)."""
        self.estimator_view = view

    def standby(self) -> None:
        """This replica's term as the controllers' leader ended: what only the leader knows (its
        sampling, its estimator's Jobs, AlloX's queue and fairness) is no longer exported from
        here, so that a dashboard summing over replicas counts the new leader's alone."""
        self.track_sampling(lambda: 0, lambda: {})
        self.track_estimator(None)
        for kind in ("cpu", "gpu"):
            self.allox_queue.labels(kind=kind).set(0)
        self.allox_fairness_spread.set(0)

    def track_resume_holds(self, stats: Callable[[], Mapping[str, int]]) -> None:
        """FitGpp's resume holds (scheduler/preemption/holds.py), read at scrape time."""
        self.registry.register(_RoomHoldsCollector(stats))

    def track_cells(self, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        """HiveD gauges, read from the engine at scrape time."""
        self.registry.register(_CellsCollector(snapshot))

    def track_exchange(self, snapshot: Callable[[], Mapping[str, Any]]) -> Callable[[str], None]:
        """The cell exchange's gauges, read from its ledger at scrape time
        (ExchangeQuotas.metrics); returns what counts a pod preempted for it, by VC."""
        self.registry.register(_ExchangeCollector(snapshot))
        preempted = Counter(
            "cellfit_exchange_preemptions_total",
            "Guaranteed pods preempted because they still held cells that changed hands when the grace "
            "period (exchange.returnGraceSeconds) ended, by their VC.",
            ["vc"],
            registry=self.registry,
        )
        return lambda vc: preempted.labels(vc=vc).inc()


class _PreemptionCounter:
    """cellfit_preemptions_total, whose preemptor_class is the pod's cellfit.io/job-class label:
    a value that is no job class (nothing refuses one under preemption.policy placement) counts
    as ``other``, so that a label written per Job makes no series per Job."""

    def __init__(self, counter: Counter) -> None:
        self._counter = counter

    def labels(self, *, preemptor_class: str, rule: str) -> Counter:
        known = preemptor_class if preemptor_class in JOB_CLASSES else "other"
        return self._counter.labels(preemptor_class=known, rule=rule)


# The estimator's Job states (estimator/controller.py JobState), exported from startup.
ESTIMATOR_JOB_STATES: Final = ("sampling", "waiting-for-capacity", "estimated", "user-estimate", "invalid", "never-runs",
                               "failed", "unsuspended", "finished")


class _EstimatorCollector(Collector):
    """Counts from the estimator's view at scrape time; zeros where no estimator runs."""

    def __init__(self, metrics: ExtenderMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        view = self._metrics.estimator_view
        jobs = list((view() if view is not None else {}).get("jobs") or [])
        by_state = GaugeMetricFamily(
            "cellfit_estimator_jobs",
            "Interchangeable Jobs the estimator follows, by state (failed: sampling failed for every "
            "configuration, Estimated=False SamplingFailed; invalid: InvalidSpec).",
            labels=["state"],
        )
        for state in ESTIMATOR_JOB_STATES:
            by_state.add_metric([state], sum(1 for job in jobs if job.get("state") == state))
        failed = GaugeMetricFamily(
            "cellfit_estimator_failed_sampling_pods",
            "Sampling pods that failed (crash, OOM, image pull, eviction) of Jobs still sampling: "
            "each is retried up to estimator.maxAttempts, then its configuration is left out.",
            value=sum(1 for job in jobs if job.get("state") in ("sampling", "waiting-for-capacity")
                      for sample in job.get("samples") or [] if sample.get("state") == "failed"),
        )
        yield from (by_state, failed)


class _RoomHoldsCollector(Collector):
    def __init__(self, stats: Callable[[], Mapping[str, int]]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        stats = self._stats()
        yield GaugeMetricFamily(
            "cellfit_resume_holds",
            "Holds (one preempted best-effort Job, one node) keeping room for the Job's pending pods.",
            value=stats["resumeHolds"],
        )
        yield GaugeMetricFamily(
            "cellfit_preemptor_holds",
            "Holds keeping the room FitGpp's victims left for the pod they were preempted for, until it is bound.",
            value=stats["preemptorHolds"],
        )
        yield CounterMetricFamily(
            "cellfit_resume_hold_kept_off",
            "Nodes filter kept a pod off because they keep room for a resuming Job or a preemptor.",
            value=stats["resumeHoldKeptOff"],
        )
        yield CounterMetricFamily(
            "cellfit_resume_holds_lapsed",
            "Holds (resume or preemptor) given up preemption.resumeHoldSeconds after they first kept a "
            "pod off (the pod they kept room for was not placed there: a new taint, a changed label, a "
            "scheduling gate).",
            value=stats["resumeHoldsLapsed"],
        )


class _ThreadCpuCollector(Collector):
    """CPU time of each live thread, by name: MainThread runs the event loop (HTTP serving and
    the verbs), reflector-<kind> the watches (decoding events, applying them to the engine), the
    others the controllers. Linux thread CPU clocks; a thread that ended is no longer counted."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "cellfit_thread_cpu_seconds",
            "CPU time of each live thread by name (MainThread: the event loop, which serves HTTP and "
            "runs the verbs; reflector-<kind>: a watch; the rest: controllers and pools).",
            labels=["thread"],
        )
        seconds: dict[str, float] = {}
        for thread in threading.enumerate():
            if thread.ident is None:
                continue
            try:
                used = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except (OSError, AttributeError):  # ended meanwhile, or no thread clocks here
                continue
            seconds[thread.name] = seconds.get(thread.name, 0.0) + used
        for name, used in sorted(seconds.items()):
            family.add_metric([name], used)
        yield family


_CELL_STATES = ("used", "free", "opportunistic", "bad")


class _CellsCollector(Collector):
    def __init__(self, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self._snapshot = snapshot

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # families depend on the live topology; collected at scrape time only

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snapshot = self._snapshot()
        vc_cells = GaugeMetricFamily(
            "cellfit_vc_cells",
            "A virtual cluster's cells per cell type and state, each cell in one state, the first that holds: "
            "bad (a GPU of it bad: its node cordoned, not Ready, deleted or short of GPUs), used (guaranteed pods on it), "
            "opportunistic (only opportunistic pods on it), free (its quota not bound, and its cells with no pod).",
            labels=["vc", "cell_type", "state"],
        )
        for row in snapshot["virtualClusters"]:
            for state in _CELL_STATES:
                vc_cells.add_metric([row["vc"], row["cellType"], state], row[state])
        physical = GaugeMetricFamily(
            "cellfit_physical_cells",
            "Physical cells per cell type and state (used, free, opportunistic, bad).",
            labels=["cell_type", "state"],
        )
        for row in snapshot["physical"]:
            for state in _CELL_STATES:
                physical.add_metric([row["cellType"], state], row[state])
        fragmentation = GaugeMetricFamily(
            "cellfit_fragmentation_ratio",
            "Share of node-level cells that cannot host a whole-node request, per node cell type.",
            labels=["node_type"],
        )
        for node_type, ratio in snapshot["fragmentation"].items():
            fragmentation.add_metric([node_type], ratio)
        fragmentation.add_metric(["all"], snapshot["fragmentationTotal"])
        yield from (vc_cells, physical, fragmentation)


class _ExchangeCollector(Collector):
    """The cell exchange's ledger at scrape time (every replica follows it)."""

    def __init__(self, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self._snapshot()
        hours = GaugeMetricFamily(
            "cellfit_exchange_gpu_hours",
            "GPU-hours of the cell exchanges matched (the ledger's), per VC and role: lent (its cells "
            "used by others) or borrowed (others' cells it used).",
            labels=["vc", "role"],
        )
        for vc, roles in sorted(snap.get("exchanged", {}).items()):
            for role in ("lent", "borrowed"):
                hours.add_metric([vc, role], roles.get(role, 0.0))
        surplus = GaugeMetricFamily(
            "cellfit_exchange_surplus_gpu_hours",
            "Each VC's surplus in the cell exchange (GPU-hours lent minus borrowed): the arbiter serves "
            "the requests of the highest surplus first, from the offers of the lowest.",
            labels=["vc"],
        )
        for vc, value in sorted(snap.get("surplus", {}).items()):
            surplus.add_metric([vc], value)
        exchanges = GaugeMetricFamily(
            "cellfit_exchanges", "Cell exchanges matched whose window has not opened (matched) and under way (active).",
            labels=["state"],
        )
        for state in ("matched", "active"):
            exchanges.add_metric([state], snap.get(state, 0))
        yield from (hours, surplus, exchanges)
