"""The estimator's live driver: follows interchangeable Jobs and their sampling pods (from the
watch cache's one Job watch and one pod watch, scheduler/cluster/feed.py), asks the
planner what to do for each Job, and does it through the Kubernetes API (create or stop sampling
pods, write ``cellfit.io/estimate``, Events and the ``Estimated`` condition).

State lives in the cluster, as HiveD's bind-info does: sampling pods carry their run
(annotations), finished pods keep their results until the Job is deleted, samples stopped as long
and failed runs whose pods will not stay are recorded on the Job (``cellfit.io/sampling``) before
their pod is deleted, and the estimate is an annotation. A restarted controller lists all of it
and decides the same; sampling pod names are deterministic, so it never starts a run twice.

One worker thread reconciles Jobs whose objects changed, and every ``resyncSeconds`` all of them
(running samples' long deadlines, the sampling budget). It holds no lock of the extender's while
it decides: what it reads of the cluster (its capacity, each node's allocatable once a pass per
node selector, and under HiveD whether a GPU configuration could ever be placed, a memoised
lookup) comes through callables that take the watch cache's or the engine's lock briefly.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Collection, Literal, Mapping, Sequence

import msgspec

from estimator.contract import encode_estimate, estimate_errors, parse_estimate, parse_iterations
from estimator.model import ConfigurationEstimate, ModelSettings, Prior, Sample, prior_from_history
from estimator.objects import (
    ANNOTATION_SAMPLE_CONFIGURATION,
    ANNOTATION_SAMPLE_DIGEST,
    ANNOTATION_SAMPLE_ITERATIONS,
    ANNOTATION_SAMPLE_LENGTH,
    ANNOTATION_SAMPLE_PILOT,
    ANNOTATION_SAMPLING,
    JOB_DECODER,
    LABEL_JOB_FAMILY,
    LABEL_SAMPLE_JOB,
    Job,
    Pod,
    misplaced_annotations,
    sample_pod,
    template_kind,
    timestamp,
    unschedulable_since,
)
from estimator.planner import CreateSample, Decision, EstimatorSettings as PlannerSettings, SampleKey, SamplePod, StopSample, decide
from estimator.sample_pod import beyond_every_node, build_sample_pod, configuration_digest
from scheduler.kube.joining import affinity_met, awaited_pool, judged_terms, said as pool_said
from estimator.sampling import SamplingRatio, SamplingSettings, plan, pods_of, waves_of
from placer.configuration import Configuration, Configurations, configuration_errors, parse_configurations_cached
from placer.rewrite import PoolConflict
from scheduler.cluster.api import KubernetesApi
from scheduler.cluster.feed import InterchangeableJobs
from scheduler.config import EstimatorSettings
from scheduler.constants import (
    ANNOTATION_CONFIGURATIONS,
    ANNOTATION_ESTIMATE,
    ANNOTATION_ITERATIONS,
    ANNOTATION_PLACEMENT,
    RESOURCE_CPU,
)
from scheduler.core.resources import Resources, cpu_millis
from scheduler.errors import CellfitError, InvalidAnnotation, InvalidRequest, KubernetesApiError
from scheduler.kube import wire
from scheduler.kube.translate import pod_requests
from scheduler.kube.wire import annotation_pointer
from scheduler.wording import duration

log = logging.getLogger(__name__)

CONDITION_ESTIMATED = "Estimated"
# The Event on a Job whose user wrote cellfit's Job-level annotations on its pod template.
MISPLACED_ANNOTATION = "AnnotationMisplaced"
CREATE_CONCURRENCY = 16
# A sampling pod the scheduler has found no node for (PodScheduled False, Unschedulable) this long
# stops counting against estimator.maxClusterShare, up to as much again as that share: it holds
# nothing on any node, and another tenant's samples must not wait behind it for
# pendingLimitSeconds x maxAttempts (it still fails after pendingLimitSeconds, as before).
UNSCHEDULABLE_GRACE_SECONDS = 120.0
# How long a node size of a pool the estimator saw still counts after the cache stops showing it:
# a node deleted and re-created under its name (a VM replaced, a kubelet re-registering) is out
# of the cache between its two watch events, and a configuration only it holds judged never to
# run in that gap lost its unbound samples and, settled on the Job's other configuration, never
# came back. A node that left for good is judged gone this much later.
NODE_RETURN_SECONDS = 120.0
# What a configuration still waiting for a node of estimator.nodesMayJoin is told once the Job's
# other configurations are sampled and the Job is estimated without it.
_AWAITING = "awaiting"  # cellfit.io/sampling: the kinds an estimate was written without, still sampled
_WAITED_WITHOUT = ("its sampling pod still waits for a node of estimator.nodesMayJoin ({labels}) to join; "
                   "the Job is estimated from its other configurations, so AlloX can start it now")
# What a configuration no current node meets is told, where an autoscaler may be what adds it.
NODES_MAY_JOIN_HINT = "; for a pool an autoscaler scales up from zero, list its nodes' labels in estimator.nodesMayJoin"
JobState = Literal[
    "sampling", "waiting-for-capacity", "estimated", "user-estimate", "invalid", "never-runs", "failed", "unsuspended", "finished"
]


@dataclass
class JobView:
    """What ``GET /v1/inspect/estimates`` shows of one Job."""

    namespace: str
    name: str
    state: JobState
    message: str = ""
    samples: list[dict[str, Any]] = field(default_factory=list)
    estimate: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Capacity:
    """The cluster's allocatable CPUs (millicores) and GPUs, which the sampling budget is a share of."""

    cpu_millis: int
    gpus: int


@dataclass(frozen=True)
class Held:
    """What one Job's pending and running sampling pods request (CPU millicores, GPUs, pods), and
    the (millicores, GPUs) of each of them the scheduler has found no node for since
    ``UNSCHEDULABLE_GRACE_SECONDS`` (``parked``: counted apart, see ``reconcile``)."""

    cpu: int = 0
    gpus: int = 0
    count: int = 0
    parked: tuple[tuple[int, int], ...] = ()


def planner_settings(settings: EstimatorSettings) -> PlannerSettings:
    return PlannerSettings(
        sampling=SamplingSettings(
            short_fraction=settings.short_fraction,
            long_fraction=settings.long_fraction,
            thin_limit=settings.thin_limit,
            max_pilots=settings.max_pilots,
            long_factor=settings.long_factor,
            long_min_seconds=settings.long_min_seconds,
            short_after_long=settings.short_after_long,
        ),
        model=ModelSettings(timing_noise_fraction=settings.timing_noise_fraction, memory_headroom=settings.memory_headroom),
        max_attempts=settings.max_attempts,
        history_skip_cov=settings.history_skip_cov,
        history_skip_min_jobs=settings.history_skip_min_jobs,
    )


class EstimatorController:
    def __init__(
        self,
        *,
        api: KubernetesApi,
        settings: EstimatorSettings,
        gpu_resource: str,
        capacity: Callable[[], Capacity],
        jobs: InterchangeableJobs,
        clock: Callable[[], float] = time.time,
        on_estimate: Callable[[ConfigurationEstimate], None] | None = None,
        on_error: Callable[[float], None] | None = None,
        pool: Mapping[str, str] | None = None,
        nodes: Callable[[Mapping[str, str]], Collection[Resources]] | None = None,
        never_placed: Callable[[Mapping[str, Any], Configuration], Sequence[str]] | None = None,
        nodes_synced: Callable[[], bool] | None = None,
        node_labels: Callable[[Mapping[str, str]], Collection[Mapping[str, str]]] | None = None,
        elapsed: Callable[[], float] | None = None,
    ) -> None:
        """``pool``: the labels of the nodes interchangeable Jobs run on (``allox.nodeSelector``),
        which every sampling pod's node selector carries. ``nodes(selector)``: each node's
        allocatable among those carrying every label of ``selector``; a configuration no one of
        them could ever hold is not sampled. ``never_placed(pod, configuration)``: why the
        scheduler could never place a sampling pod built so (HiveD: no virtual cluster, or none
        that can ever hold its GPUs), each reason led by the field; none, it could.
        ``nodes_synced()``: whether the watch cache has listed the nodes and applied every one
        of them (and, under HiveD, the cells discovered from them): before that ``nodes`` may
        hold only some, and no pass runs (None: always). ``elapsed``: a monotonic clock, that
        measures ``NODE_RETURN_SECONDS`` (a wall clock's step must not end the memory of a node
        early); None: ``time.monotonic`` under the wall clock, else the injected ``clock``."""
        self._api = api
        self._pool = dict(pool or {})
        self._nodes = nodes
        self._never_placed = never_placed
        self._nodes_synced = nodes_synced
        # Each node's labels among those carrying a selector: a required node affinity no node's
        # labels meet never runs (user24, F16). None: not judged.
        self._node_labels = node_labels
        # Label sets by selector -> when a pass last saw a node carrying them (NODE_RETURN_SECONDS).
        self._labels_seen: dict[frozenset[tuple[str, str]], dict[frozenset[tuple[str, str]], float]] = {}
        self._pass_labels: dict[frozenset[tuple[str, str]], list[dict[str, str]]] = {}
        self._feed = jobs
        self._pod_feed = jobs.sampling_pods
        self._jobs_listed = threading.Event()  # the feed replayed or listed the Jobs to this term
        self._pods_listed = threading.Event()  # the pod feed replayed or listed the sampling pods
        self._settings = settings
        self._planner = planner_settings(settings)
        self._gpu_resource = gpu_resource
        self._capacity = capacity
        self._clock = clock
        self._elapsed = elapsed if elapsed is not None else time.monotonic if clock is time.time else clock
        self._on_estimate = on_estimate
        self._on_error = on_error
        self._lock = threading.Lock()
        self._recording = threading.Lock()  # writes of cellfit.io/sampling from the creators' pool
        self._jobs: dict[str, Job] = {}  # interchangeable Jobs by UID
        # Sampling pods by Job UID, then namespace and name: a pod elsewhere under a sample's name
        # must not stand in for it.
        self._pods: dict[str, dict[tuple[str, str], Pod]] = {}
        self._ignored: set[tuple[str, str]] = set()  # pods labelled as samples that are not, logged once
        # PriorityClasses the API server found missing, logged once each until a run is created
        # again (every pass tries each Job's runs: a warning a pass per Job was the log's bulk).
        self._missing_classes: set[str] = set()
        # Per Job UID: the PriorityClass its last sampling pod was refused for, told in its view
        # (kubectl cellfit why) in place of runs "under way" that were never created.
        self._class_refused: dict[str, str] = {}
        # Each Job's namespace, from when it had configurations until it is deleted: a Job that lost
        # them may still own sampling pods, deleted with it.
        self._namespaces: dict[str, str] = {}
        self._views: dict[str, JobView] = {}
        self._said: dict[str, set[str]] = {}  # events and conditions already written, per Job
        # Per Job UID: cellfit's Job-level annotations on its pod template, as last told (an
        # Event, once: the Job's user reads kubectl describe, and nothing else says it), and
        # the Jobs to tell in the next pass (written from the worker, not the watch's thread).
        self._misplaced: dict[str, tuple[str, ...]] = {}
        self._misplaced_untold: dict[str, Job] = {}
        # (namespace, family, kind) -> s per iteration: a family is a namespace's, so one tenant's
        # Jobs cannot shift another's estimates (or let it skip sampling) by taking its label.
        self._history: dict[tuple[str, str, str], deque[float]] = {}
        self._task_spread: dict[tuple[str, str, str], deque[float]] = {}  # (namespace, family, kind) -> pilots' CoV
        self._recorded: set[str] = set()  # finished Jobs already counted in the history
        self._ratio = SamplingRatio()
        self._dirty: set[str] = set()
        self._subscribers: list[Callable[[], None]] = []
        self._waiting: set[str] = set()  # Jobs with runs deferred by the sampling budget
        self._holding: dict[str, Held] = {}  # per Job: what its sampling pods request
        self._written_sampling: dict[str, dict[str, Any]] = {}  # cellfit.io/sampling as last written
        # Per Job: its sampling pod in each configuration, as built, while the Job is unchanged.
        self._probes: dict[str, tuple[tuple[str, str | None, bytes], dict[str, _Probe]]] = {}
        self._pass_nodes: dict[frozenset[tuple[str, str]], list[Resources]] = {}  # node sizes by selector, this pass
        self._pass_time = 0.0  # the monotonic clock's (``elapsed``) reading at this pass's start
        # Node sizes by selector -> when a pass last saw a node of that size (NODE_RETURN_SECONDS).
        self._sizes_seen: dict[frozenset[tuple[str, str]], dict[Resources, float]] = {}
        # Each selector looked up -> the Jobs whose judgement asked for it: every pass looks each
        # up again while one of them is left, whether or not it judges them (a kind whose runs are
        # placed is not judged), so a node gone is remembered from when it was last in the cache.
        self._selector_users: dict[frozenset[tuple[str, str]], set[str]] = {}
        self._judging: str | None = None  # the Job whose configurations this pass judges
        # Pod creations of one pass go out together: the API server, not this thread, sets the pace.
        self._creator = ThreadPoolExecutor(max_workers=CREATE_CONCURRENCY, thread_name_prefix="estimator-create")
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.active_pods = 0
        # What pending and running sampling pods request, as a share of the cluster (by resource).
        self.share: dict[str, float] = {"cpu": 0.0, "gpu": 0.0}
        self._worker = threading.Thread(target=self._run, name="estimator", daemon=True)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._feed.subscribe(self)
        self._pod_feed.subscribe(self)
        self._worker.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._feed.unsubscribe(self)
        self._pod_feed.unsubscribe(self)
        self._creator.shutdown(wait=False)

    @property
    def synced(self) -> bool:
        """The watch cache has replayed (or listed) both the Jobs and the sampling pods to this
        term, and has applied the whole node list: a pass that saw only the nodes applied so far
        (one a step at a start) would take a configuration only the others hold for one no node
        could ever run."""
        return self._jobs_listed.is_set() and self._pods_listed.is_set() and self._nodes_ready()

    def _nodes_ready(self) -> bool:
        return self._nodes_synced is None or self._nodes_synced()

    def inspect(self) -> dict[str, Any]:
        with self._lock:
            views = sorted(self._views.values(), key=lambda v: (v.namespace, v.name))
            history = {f"{namespace}/{family}/{kind}": len(values) for (namespace, family, kind), values in self._history.items()}
            return {
                "synced": self.synced,
                "activeSamplingPods": self.active_pods,
                "families": history,
                "jobs": [
                    {"namespace": v.namespace, "name": v.name, "state": v.state, "message": v.message,
                     "samples": v.samples, "estimate": v.estimate}
                    for v in views
                ],
            }

    # ------------------------------------------------------------------ watch callbacks

    # The interchangeable Jobs come from the watch cache's one Job watch (feed.JobSubscriber),
    # as the API server's bytes: decoded whole here, the only reader of their pod templates.

    def replace_jobs(self, jobs: Sequence[bytes]) -> None:
        self._replace_jobs([job for job in map(_decoded_job, jobs) if job is not None])
        self._jobs_listed.set()

    def apply_job(self, job: bytes) -> None:
        decoded = _decoded_job(job)
        if decoded is not None:
            self._apply_job(decoded)

    def forget_job(self, uid: str) -> None:
        # It lost its configurations: an ordinary Job now, whose sampling pods (owned by it) end
        # on their own, or count again should the configurations come back.
        with self._lock:
            self._forget_job(uid)
            self._forget_misplaced(uid)
        self._notify()

    def _replace_jobs(self, jobs: Sequence[Job]) -> None:
        with self._lock:
            listed = {job.metadata.uid for job in jobs if ANNOTATION_CONFIGURATIONS in job.annotations}
            for uid in set(self._jobs) - listed:
                self._forget_job(uid)
            # A Job followed for its misplaced annotations alone and gone from the list (deleted
            # while the watch was down) is forgotten as at its deletion: not told, not kept.
            present = {job.metadata.uid for job in jobs}
            for uid in (set(self._misplaced) | set(self._misplaced_untold)) - present:
                self._forget_misplaced(uid)
        for job in jobs:
            self._apply_job(job)

    def _apply_job(self, job: Job) -> None:
        uid = job.metadata.uid
        misplaced = misplaced_annotations(job)
        with self._lock:
            if misplaced != self._misplaced.get(uid, ()):
                self._misplaced[uid] = misplaced
                self._misplaced_untold[uid] = job
                self._wake.set()
            if ANNOTATION_CONFIGURATIONS not in job.annotations:
                if uid in self._jobs:
                    self._forget_job(uid)
                return
            self._jobs[uid] = job
            self._namespaces[uid] = job.metadata.namespace
            self._dirty.add(uid)
        self._wake.set()
        self._notify()

    # ------------------------------------------------------------------ the Jobs, for the placer

    def interchangeable_jobs(self) -> list[Job]:
        """Every Job with ``cellfit.io/configurations`` the watch holds (AlloX admission's input)."""
        with self._lock:
            return list(self._jobs.values())

    def subscribe(self, on_change: Callable[[], None]) -> None:
        """``on_change()`` after every change of an interchangeable Job (from the watch thread)."""
        self._subscribers.append(on_change)

    def _notify(self) -> None:
        for on_change in self._subscribers:
            on_change()

    def delete_job(self, uid: str) -> None:
        with self._lock:
            pods = list(self._pods_of(uid).values())
            self._forget_job(uid)
            self._forget_misplaced(uid)
            self._namespaces.pop(uid, None)
        self._notify()
        # Garbage collection deletes them too (they are owned by the Job); not waiting for it. The
        # deletions go out from the creators' pool: this runs on the Job watch's thread.
        for pod in filter(_live, pods):
            self._creator.submit(self._delete_sampling_pod, pod)

    def _delete_sampling_pod(self, pod: Pod) -> None:
        self._attempt(lambda: self._api.delete_pod(namespace=pod.metadata.namespace, name=pod.metadata.name, uid=pod.metadata.uid),
                      what=f"delete sampling pod {pod.metadata.name}")

    def _forget_misplaced(self, uid: str) -> None:
        self._misplaced.pop(uid, None)
        self._misplaced_untold.pop(uid, None)

    def _forget_job(self, uid: str) -> None:
        self._jobs.pop(uid, None)
        self._views.pop(uid, None)
        self._said.pop(uid, None)
        self._dirty.discard(uid)
        self._waiting.discard(uid)
        self._written_sampling.pop(uid, None)
        self._probes.pop(uid, None)
        self._class_refused.pop(uid, None)

    # The sampling pods come from the watch cache's one pod watch (feed.PodSubscriber), read with
    # this package's Pod (container states, termination messages) for them alone.

    def replace_pods(self, pods: Sequence[Pod]) -> None:
        self._replace_pods(pods)
        self._pods_listed.set()

    def _replace_pods(self, pods: Sequence[Pod]) -> None:
        listed = list(pods)
        with self._lock:
            before, self._pods = self._pods, {}
            self._ignored &= {_where(pod) for pod in listed}
            for pod in listed:
                self._keep_pod(pod, before=before)
            self._dirty.update(self._jobs)
        self._wake.set()

    def apply_pod(self, pod: Pod) -> None:
        with self._lock:
            job_uid = self._keep_pod(pod, before=self._pods)
            if job_uid:
                self._dirty.add(job_uid)
        self._wake.set()

    def delete_pod(self, pod: Pod) -> None:
        job_uid = (pod.metadata.labels or {}).get(LABEL_SAMPLE_JOB, "")
        with self._lock:
            self._pods.get(job_uid, {}).pop(_where(pod), None)
            self._ignored.discard(_where(pod))
            self._dirty.add(job_uid)
        self._wake.set()

    def _keep_pod(self, pod: Pod, *, before: Mapping[str, Mapping[tuple[str, str], Pod]]) -> str:
        """Keeps a sampling pod under its Job's UID; a pod that only claims to be one (labelled
        with a Job's UID, not owned by that Job) is ignored, and left alone. A pod kept before
        (``before``: the same pod, by its UID) stays kept without its owner: an orphaning
        deletion of its Job takes the owner off first, and the estimator still deletes it."""
        labelled = (pod.metadata.labels or {}).get(LABEL_SAMPLE_JOB, "")
        kept = before.get(labelled, {}).get(_where(pod))
        if pod.sample_job is None and (kept is None or kept.metadata.uid != pod.metadata.uid):
            self._pods.get(labelled, {}).pop(_where(pod), None)
            self._ignore(pod, why="not owned by the Job its label names")
            return labelled
        self._pods.setdefault(labelled, {})[_where(pod)] = pod
        return labelled

    def _pods_of(self, uid: str) -> dict[str, Pod]:
        """The Job's sampling pods by name: those in its namespace (an owner reference across
        namespaces is no owner: anyone may write one). Under the lock."""
        namespace = self._namespaces.get(uid)
        if namespace is None:  # a Job never seen with configurations: none of its pods is read
            return {}
        pods = {}
        for (where, name), pod in self._pods.get(uid, {}).items():
            if where == namespace:
                pods[name] = pod
            else:
                self._ignore(pod, why=f"not in the namespace of the Job its label names ({namespace})")
        return pods

    def _ignore(self, pod: Pod, *, why: str) -> None:
        """Says once, in the log only (an Event on the Job would let anyone who labels pods write
        to it), that a pod labelled as a sampling pod is not one: it is neither read nor deleted."""
        if _where(pod) in self._ignored:
            return
        self._ignored.add(_where(pod))
        log.warning("estimator ignores a pod labelled as a sampling pod", extra={
            "pod": "/".join(_where(pod)), "job_uid": (pod.metadata.labels or {}).get(LABEL_SAMPLE_JOB, ""), "reason": why})

    # ------------------------------------------------------------------ the worker

    def _run(self) -> None:
        next_resync = 0.0
        while not self._stop.is_set():
            self._wake.wait(timeout=max(0.05, next_resync - time.monotonic()))
            self._wake.clear()
            if self._stop.is_set() or not self.synced:
                continue
            everything = time.monotonic() >= next_resync
            if everything:
                next_resync = time.monotonic() + self._settings.resync_seconds
            try:
                self.reconcile(everything=everything)
            except Exception:  # a defect must not end estimation for every Job
                log.exception("estimator reconcile failed")

    def reconcile(self, *, everything: bool = True) -> None:
        """One pass, in creation order (the sampling budget goes to the oldest Jobs first): over
        every Job when ``everything`` (the periodic resync: long deadlines), else over the Jobs
        whose objects changed and those waiting for the budget. Pod creations of the whole pass
        go out in parallel at its end. None before the nodes are all applied (``nodes_synced``)."""
        self._tell_misplaced()
        if not self._nodes_ready():
            return
        now = self._clock()
        with self._lock:
            # The resync skips Jobs already settled (estimated, user-set, invalid, failed,
            # finished) unless they changed: only running samples have deadlines to check.
            # A configuration no node could run is looked at again: a larger node may have joined.
            unsettled = {uid for uid, view in self._views.items() if view.state in ("sampling", "waiting-for-capacity", "never-runs")}
            base = (set(self._jobs) - set(self._views)) | unsettled if everything else set()
            chosen = (base | self._dirty | self._waiting) & set(self._jobs)
            self._dirty.clear()
            # A Job whose last sampling pod was refused for a missing PriorityClass comes last: its
            # runs, tried again every pass until the class exists, take only the budget the others
            # leave (first, they took it at every pass from every younger Job, for ever).
            jobs = sorted((self._jobs[uid] for uid in chosen),
                          key=lambda j: (j.metadata.uid in self._class_refused, j.metadata.creationTimestamp or "", j.metadata.name))
            pods = {uid: self._pods_of(uid) for uid in chosen}
            # What each Job's sampling pods hold, recounted only for the Jobs whose objects changed
            # (a pod event marks its Job dirty): a pass must not cost every pod of every Job.
            for uid in chosen:
                self._holding[uid] = self._held_by(self._jobs[uid], pods[uid].values(), now=now)
            for uid in set(self._holding) - set(self._jobs):
                del self._holding[uid]
            held = list(self._holding.values())
        capacity = self._capacity()
        self._pass_nodes, self._pass_labels, self._pass_time = {}, {}, self._elapsed()
        now_elapsed = self._pass_time
        self._labels_seen = {key: recent for key, seen in self._labels_seen.items()
                             if (recent := {labels: at for labels, at in seen.items() if now_elapsed - at <= NODE_RETURN_SECONDS})}
        self._sizes_seen = {key: lately for key, sizes in self._sizes_seen.items()
                            if (lately := {size: seen for size, seen in sizes.items() if now_elapsed - seen <= NODE_RETURN_SECONDS})}
        self._remember_nodes()  # after the lapsed are forgotten: this pass's lookups keep the rest
        budget = _Budget(
            limit_cpu=self._settings.max_cluster_share * capacity.cpu_millis,
            limit_gpu=self._settings.max_cluster_share * capacity.gpus,
        )
        # Sampling pods the scheduler has found no node for since UNSCHEDULABLE_GRACE_SECONDS
        # (a full cluster, a VC's quota in use, a node selector no node carries) hold nothing: up
        # to as much again as the budget, they no longer count against it, so every other Job's
        # samples do not wait behind them; beyond that they count (a cluster that places none of
        # them must not collect an unbounded queue of samples that all start once room frees).
        parked = _Budget(limit_cpu=budget.limit_cpu, limit_gpu=budget.limit_gpu)
        for holding in held:  # what pending and running sampling pods already hold
            budget.cpu += holding.cpu
            budget.gpus += holding.gpus
            budget.pods += holding.count
            for cost in holding.parked:
                if not parked.admit(cost):
                    budget.take(cost)
        self.active_pods = budget.pods + parked.pods
        creations: list[tuple[Job, dict[str, Any]]] = []
        for job in jobs:
            try:
                creations += self._reconcile_job(job, pods[job.metadata.uid], self._configurations(job), budget, now)
            except KubernetesApiError as error:
                log.warning("estimator could not act on a job", extra={"job": _key(job), "reason": str(error)})
            except Exception:  # a defect on one Job must not stall every other Job's sampling
                log.exception("estimator failed on a job", extra={"job": _key(job)})
        self.active_pods = budget.pods + parked.pods
        self.share = {
            "cpu": budget.cpu / capacity.cpu_millis if capacity.cpu_millis else 0.0,
            "gpu": budget.gpus / capacity.gpus if capacity.gpus else 0.0,
        }
        if creations:
            with self._lock:  # counted now: a pass before their watch events must not admit more
                for job, body in creations:
                    configurations = self._configurations(job)
                    kind = body["metadata"]["annotations"][ANNOTATION_SAMPLE_CONFIGURATION]
                    if configurations is not None and kind in configurations:
                        cpu, gpus = self._cost(configurations[kind])
                        before = self._holding.get(job.metadata.uid, Held())
                        self._holding[job.metadata.uid] = replace(before, cpu=before.cpu + cpu, gpus=before.gpus + gpus, count=before.count + 1)
            list(self._creator.map(lambda item: self._create(*item), creations))

    def _held_by(self, job: Job, pods: Any, *, now: float) -> Held:
        """CPU millicores, GPUs and pods that ``job``'s pending and running sampling pods request,
        those unschedulable since ``UNSCHEDULABLE_GRACE_SECONDS`` apart."""
        configurations = self._configurations(job)
        cpu = gpus = count = 0
        parked: list[tuple[int, int]] = []
        if configurations is None:
            return Held()
        for pod in pods:
            kind = (pod.metadata.annotations or {}).get(ANNOTATION_SAMPLE_CONFIGURATION)
            if _live(pod) and kind in configurations:
                cost = self._cost(configurations[kind])  # type: ignore[index]
                since = unschedulable_since(pod)
                if since is not None and now - since >= UNSCHEDULABLE_GRACE_SECONDS:
                    parked.append(cost)
                else:
                    cpu, gpus, count = cpu + cost[0], gpus + cost[1], count + 1
        return Held(cpu, gpus, count, tuple(parked))

    def _create(self, job: Job, body: dict[str, Any]) -> None:
        try:
            self._api.create_pod(namespace=job.metadata.namespace, pod=body)
        except KubernetesApiError as error:
            if error.status == 409:
                return  # created before a restart; its watch event is on the way
            missing = _missing_priority_class(error)
            if missing is not None:
                # The cluster's setup, not the Job: no attempt is spent, and the runs are
                # created once the class exists.
                self._event(job, "SamplingPodRejected", self._no_priority_class(missing), warning=True, once=f"no PriorityClass {missing}")
                self._class_refused[job.metadata.uid] = missing
                self._not_held(job, body)
                if missing not in self._missing_classes:
                    self._missing_classes.add(missing)
                    log.warning("sampling pods not created: their PriorityClass does not exist",
                                extra={"job": _key(job), "priority_class": missing, "setting": self._priority_class_field()})
                return
            name = body["metadata"]["name"]
            # Once per refusal, not per pod: the API server's message names each pod it refuses,
            # and the next attempt's (another name) said the same thing again, Event after Event.
            self._event(job, "SamplingPodRejected", f"sampling pod {name} not created: {error}", warning=True, once=str(error).replace(name, "<pod>"))
            log.warning("sampling pod not created", extra={"job": _key(job), "pod": body["metadata"]["name"], "reason": str(error)})
            if _refused_for_good(error):
                self._record_refused(job, body, f"not created: {error}")
        else:
            self._missing_classes.discard(body["spec"].get("priorityClassName") or "")
            self._class_refused.pop(job.metadata.uid, None)

    def _not_held(self, job: Job, body: Mapping[str, Any]) -> None:
        """A run counted as held when its creation was sent (reconcile), not created: it holds
        nothing until the Job's next recount (the loop is not woken for it: the Job, waiting for
        the budget itself, would be tried again at once, and fail again)."""
        configurations = self._configurations(job)
        kind = body["metadata"]["annotations"][ANNOTATION_SAMPLE_CONFIGURATION]
        if configurations is None or kind not in configurations:
            return
        cpu, gpus = self._cost(configurations[kind])
        with self._lock:
            before = self._holding.get(job.metadata.uid)
            if before is None or before.count == 0:
                return  # recounted since: the watch holds no such pod
            self._holding[job.metadata.uid] = replace(before, cpu=max(0, before.cpu - cpu), gpus=max(0, before.gpus - gpus),
                                                      count=before.count - 1)

    def _priority_class_field(self) -> str:
        return "estimator.priorityClassName" if self._settings.priority_class_name else "spec.template.spec.priorityClassName"

    def _no_priority_class(self, name: str) -> str:
        if self._settings.priority_class_name:
            fix = ("an administrator creates it (kubectl apply -f deploy/priority-classes.yaml, or the Helm chart) "
                   "or names an existing class in cellfit's estimator.priorityClassName")
        else:
            fix = "create it, or name an existing class in the Job's spec.template.spec.priorityClassName"
        return (f"sampling pods not created: their PriorityClass '{name}' ({self._priority_class_field()}) does not "
                f"exist; {fix}. No sampling attempt is counted: sampling starts once it exists")

    def _record_refused(self, job: Job, body: Mapping[str, Any], failure: str) -> None:
        """A run the API server refuses for good (a LimitRange, an admission webhook, an invalid
        pod) is a failed attempt, recorded on the Job as a failed run whose pod is gone: retried
        under the next name, then its configuration fails, and the Job is estimated without it."""
        notes = body["metadata"]["annotations"]
        key = SampleKey(configuration=notes[ANNOTATION_SAMPLE_CONFIGURATION], pilot=int(notes[ANNOTATION_SAMPLE_PILOT]), length=notes[ANNOTATION_SAMPLE_LENGTH])
        with self._recording:  # the creations of one pass end in parallel: one read-merge-write at a time
            sampling = self._sampling(job)
            sampling.setdefault("failed", {})[body["metadata"]["name"]] = failure
            sampling.setdefault("runs", {})[body["metadata"]["name"]] = _run_record(key, int(notes[ANNOTATION_SAMPLE_ITERATIONS]), notes.get(ANNOTATION_SAMPLE_DIGEST))
            self._attempt(lambda: self._record_sampling(job, sampling), what=f"record the refused run of {_key(job)}")

    def _configurations(self, job: Job) -> Configurations | None:
        try:
            return parse_configurations_cached(job.annotations.get(ANNOTATION_CONFIGURATIONS))
        except InvalidAnnotation:
            return None

    def _cost(self, configuration: Configuration) -> tuple[int, int]:
        cpu = configuration.requests.get(RESOURCE_CPU) or configuration.limits.get(RESOURCE_CPU) or "0"
        return cpu_millis(cpu, field="cpu"), configuration.device_count(self._gpu_resource)

    def _reconcile_job(
        self, job: Job, pods: Mapping[str, Pod], configurations: Configurations | None, budget: _Budget, now: float
    ) -> list[tuple[Job, dict[str, Any]]]:
        """The sampling pods to create for ``job`` (after acting on everything else)."""
        uid = job.metadata.uid
        iterations = self._iterations_to_sample(job, configurations)
        if iterations is None or configurations is None:
            # Finished, estimated, unsuspended or invalid midway: runs still under way inform
            # nothing now and would keep holding their share of the cluster.
            for pod in filter(_live, pods.values()):
                self._delete_sampling_pod(pod)
            return []
        sampling = self._sampling(job)
        pod_count = pods_of(completions=job.spec.completions, parallelism=job.spec.parallelism)
        waves = waves_of(completions=job.spec.completions, parallelism=job.spec.parallelism)
        ratio = sampling.get("ratio")
        wide = pod_count >= max(2, self._planner.sampling.thin_limit)
        if wide and not isinstance(ratio, (int, float)):
            # Drawn once and kept on the Job: a restart must pick the same pilots.
            with self._lock:
                ratio = self._ratio.next_ratio()
            sampling["ratio"] = ratio
            self._record_sampling(job, sampling)
        sample_plan = plan(job_uid=uid, iterations=iterations, pods=pod_count, ratio=float(ratio or 0.03), settings=self._planner.sampling)
        digests = _digests(configurations)
        pods = self._without_stale(pods, digests)
        never, awaiting = self._never_runs(job, pods, configurations)
        if never is not None and len(never) == len(configurations.kinds):
            with self._lock:
                self._waiting.discard(uid)
            return []
        sample_pods = _sample_pods(pods, sampling, digests=digests, now=now, pending_limit_seconds=self._settings.pending_limit_seconds)
        priors = self._priors(job, configurations)

        def deciding(left_out: Mapping[str, object]) -> Decision:
            return decide(
                configurations=[kind for kind in configurations.kinds if kind not in left_out],
                plan=sample_plan,
                job_iterations=iterations,
                waves=waves,
                pods=sample_pods,
                priors=priors,
                settings=self._planner,
            )

        never = never or {}
        decision = deciding(never)
        if decision.estimates is None and awaiting:
            # Its other configurations all sampled, the Job is not held back for a node that may
            # take up to pendingLimitSeconds x maxAttempts to join, or never (a node group at its
            # maximum): it is estimated without those awaiting one, and AlloX may start it now.
            without = deciding({**never, **awaiting})
            if without.estimates:
                # The waiting configurations' runs still go on (retried, the short after the long).
                decision = replace(without, create=decision.create, stop=decision.stop, in_progress=decision.in_progress)
                never = {**never, **{kind: _WAITED_WITHOUT.format(labels=why.labels) for kind, why in awaiting.items()}}
        waited = sorted(awaiting) if decision.estimates is not None and any(kind in never for kind in awaiting) else []
        if waited != _awaited_kinds(sampling):
            if waited:
                sampling[_AWAITING] = waited
            else:
                sampling.pop(_AWAITING, None)
            self._record_sampling(job, sampling)
        return self._act(job, pods, configurations, decision, sampling, sample_pods, budget, never=never, awaiting=awaiting)

    def _never_runs(
        self, job: Job, pods: Mapping[str, Pod], configurations: Configurations
    ) -> tuple[dict[str, str] | None, dict[str, _Awaiting]]:
        """The configurations no node could ever run, with why, naming the field: more of a
        resource a pod than any node (of ``allox.nodeSelector``'s pool) has, a node selector or
        required affinity outside that pool, or (HiveD) no virtual cluster that could ever place
        its GPUs. Told once (an Event each, and with none left to sample the condition
        ``Estimated=False``, reason ``NeverRuns``); their runs under way are deleted, none is
        started. None when every configuration could run. Beside them, those no current node
        meets that a node of ``estimator.nodesMayJoin`` would: sampled, told once
        (``ConfigurationAwaitsNode``), their pods left Pending for the autoscaler."""
        if self._nodes is None and self._never_placed is None and not self._pool:
            return None, {}
        never: dict[str, str] = {}
        awaiting: dict[str, _Awaiting] = {}
        # A run bound to a node, or running, proves that a node holds its configuration, whatever
        # the nodes known now (one leaving, a relist under way) seem to say.
        placed = {(pod.metadata.annotations or {}).get(ANNOTATION_SAMPLE_CONFIGURATION) for pod in pods.values() if _live(pod) and pod.placed}
        self._judging = job.metadata.uid
        try:
            for kind, probe in self._probes_of(job, configurations).items():
                if kind in placed:
                    continue
                reason = probe.conflict or self._never_holds(kind, probe, configurations[kind])  # type: ignore[index]
                if isinstance(reason, _Awaiting):
                    awaiting[kind] = reason
                elif reason is not None:
                    never[kind] = reason
        finally:
            self._judging = None
        self._tell_awaiting(job, awaiting)
        if not never:
            return None, awaiting
        reasons: dict[str, list[str]] = {}  # one reason (a template's selector) may be every configuration's
        for named, why in never.items():
            reasons.setdefault(why, []).append(named)
        for why, named_ones in reasons.items():
            told = " and ".join(named_ones) + (" is" if len(named_ones) == 1 else " are")
            self._event(job, "ConfigurationNeverRuns", f"{told} not sampled: {why}", warning=True, once=why)
        for pod in pods.values():
            if _live(pod) and (pod.metadata.annotations or {}).get(ANNOTATION_SAMPLE_CONFIGURATION) in never:
                self._delete_sampling_pod(pod)
        if len(never) == len(configurations.kinds):
            message = "nothing is sampled or started: " + "; ".join(reasons)
            self._condition(job, status="False", reason="NeverRuns", message=message)
            self._view(job, "never-runs", message)
        return never, awaiting

    def _tell_awaiting(self, job: Job, awaiting: Mapping[str, _Awaiting]) -> None:
        """The configurations sampled on a node yet to join, told once: what no node meets now,
        and how long their pods wait for the autoscaler (the existing pending limit a run)."""
        grouped: dict[_Awaiting, list[str]] = {}
        for kind, why in awaiting.items():
            grouped.setdefault(why, []).append(kind)
        for why, kinds in grouped.items():
            one = len(kinds) == 1
            message = (
                f"{' and '.join(kinds)} {'is' if one else 'are'} sampled on a node that has yet to join: {why.now}; "
                f"{'its sampling pod waits' if one else 'their sampling pods wait'} up to "
                f"{self._settings.pending_limit_seconds:.0f} s a run (estimator.pendingLimitSeconds, "
                f"{self._settings.max_attempts} runs) for the autoscaler to add one (estimator.nodesMayJoin: {why.labels})"
            )
            self._event(job, "ConfigurationAwaitsNode", message, warning=False, once=message)

    def _probes_of(self, job: Job, configurations: Configurations) -> dict[str, _Probe]:
        """A sampling pod of each configuration, as built, and what it asks, kept while the Job
        is unchanged (a resync looks at every sampling Job)."""
        key = (job.metadata.resourceVersion, job.annotations.get(ANNOTATION_CONFIGURATIONS), bytes(job.spec.template))
        kept = self._probes.get(job.metadata.uid)
        if kept is not None and kept[0] == key:
            return kept[1]
        template = json.loads(bytes(job.spec.template))
        probes: dict[str, _Probe] = {}
        for kind in configurations.kinds:
            try:
                body = build_sample_pod(
                    job_name=job.metadata.name, job_namespace=job.metadata.namespace, job_uid=job.metadata.uid, template=template,
                    configuration=configurations[kind], run=_PROBE_RUN, indexed=False,
                    scheduler_name=self._settings.scheduler_name, priority_class_name=None, pool=self._pool,
                )
            except PoolConflict as conflict:  # it selects nodes outside allox.nodeSelector's
                probes[kind] = _Probe(body={}, asks=None, conflict=str(conflict))
                continue
            try:
                asks = pod_requests(msgspec.convert(body["spec"], wire.PodSpec), gpu_resource=self._gpu_resource, field="spec")
            except (InvalidRequest, msgspec.ValidationError):
                asks = None  # a quantity the scheduler cannot read: its own refusal says which
            probes[kind] = _Probe(body=body, asks=asks)
        with self._lock:
            self._probes[job.metadata.uid] = (key, probes)
        return probes

    def _remember_nodes(self) -> None:
        """At a pass's start, each selector a Job still here asked for looked up again (its
        sizes and label sets stamped with this pass's time), those of Jobs gone forgotten: a
        node is remembered for ``NODE_RETURN_SECONDS`` from the last pass that saw it in the
        cache, not from the last that judged a configuration selecting it."""
        with self._lock:
            present = set(self._jobs)
        self._selector_users = {key: left for key, users in self._selector_users.items() if (left := users & present)}
        for key in self._selector_users:
            if self._nodes is not None:
                self._nodes_carrying(dict(key))
            if self._node_labels is not None:
                self._labels_carrying(dict(key))
        for kept in (self._sizes_seen, self._labels_seen):
            for key in set(kept) - set(self._selector_users):
                del kept[key]

    def _asked(self, key: frozenset[tuple[str, str]]) -> None:
        """``key``'s selector asked for by the Job being judged: looked up every pass while it is here."""
        if self._judging is not None:
            self._selector_users.setdefault(key, set()).add(self._judging)

    def _nodes_carrying(self, selector: Mapping[str, str]) -> list[Resources]:
        """Each node's allocatable among those carrying ``selector``, read once a pass per
        selector, and each size a pass saw there within ``NODE_RETURN_SECONDS`` that none has now
        (a node deleted and re-created under its name is out of the cache for a moment)."""
        assert self._nodes is not None
        key = frozenset(selector.items())
        self._asked(key)
        if key not in self._pass_nodes:
            current = list(self._nodes(selector))
            seen = self._sizes_seen.setdefault(key, {})
            seen.update(dict.fromkeys(current, self._pass_time))
            present = set(current)
            self._pass_nodes[key] = current + [size for size in seen if size not in present]
        return self._pass_nodes[key]

    def _never_holds(self, kind: str, probe: _Probe, configuration: Configuration) -> str | _Awaiting | None:
        """Why no node could ever run ``probe``, a sampling pod of ``kind``; what no node meets
        now where a node of ``estimator.nodesMayJoin`` would (:class:`_Awaiting`); None when a
        node could."""
        asks, body = probe.asks, probe.body
        if asks is None:
            return None
        joining: _Awaiting | None = None
        if self._nodes is not None:
            spec = body["spec"]
            selector = spec.get("nodeSelector") or {}
            # Only a listed pool's nodes run it: its nodes up now (none, or a smaller one added for
            # another pod) are not the node the autoscaler sizes for its Pending pod, so neither
            # their absence nor their sizes make it never-runs (scheduler/kube/joining.py).
            pool = awaited_pool(selector=selector, spec=spec, pool=self._pool, may_join=self._settings.nodes_may_join)
            carrying = self._nodes_carrying(selector)
            unmet = self._selector_matching_no_node(kind, selector=selector, configuration=configuration) if not carrying else None
            if unmet is None:
                # Sizes are judged against the nodes there are (none carrying the selector: not
                # judged): an unlisted pool's node templates are not known here.
                beyond = beyond_every_node(asks, carrying, pooled=bool(self._pool))
                if beyond is not None:
                    field = f"{ANNOTATION_CONFIGURATIONS}.{kind}.resources: {beyond}"
                    if pool is None:
                        return field
                    unmet = _Unmet(never=field, now=field.removesuffix(": no node could ever run it") + " now")
                else:
                    unmet = self._affinity_meeting_no_node(spec, selector=selector)
            if unmet is not None:
                if pool is None:
                    return unmet.never + NODES_MAY_JOIN_HINT
                joining = _Awaiting(now=unmet.now, labels=pool_said(pool))
        # HiveD's virtual clusters are configured, not found on nodes: a node joining changes none.
        if self._never_placed is not None and asks.gpus > 0:
            problems = self._never_placed(body, configuration)
            if problems:
                return "; ".join(problems) + ": HiveD never places it"
        return joining

    def _selector_matching_no_node(self, kind: str, *, selector: Mapping[str, str], configuration: Configuration) -> _Unmet | None:
        """Why a sampling pod whose node selector ``selector`` no node carries (nor carried within
        ``NODE_RETURN_SECONDS``) never runs, naming the field whose labels no node of the pool
        carries: the configuration's, else the template's. None where no node of the pool is
        known at all (nothing to judge by: the cluster is not listed yet, or empty)."""
        if not self._nodes_carrying(self._pool):
            return None
        where = "no node of allox.nodeSelector's pool carries" if self._pool else "no node carries"
        ours = dict(configuration.node_selector)
        template = {k: v for k, v in selector.items() if k not in ours and k not in self._pool}
        fields = []
        if ours and not self._nodes_carrying({**self._pool, **ours}):
            fields.append((f"{ANNOTATION_CONFIGURATIONS}.{kind}.nodeSelector", ours))
        elif template and not self._nodes_carrying({**self._pool, **template}):
            fields.append(("spec.template.spec.nodeSelector", template))
        else:  # each selects nodes, none both
            fields = [("spec.template.spec.nodeSelector", template), (f"{ANNOTATION_CONFIGURATIONS}.{kind}.nodeSelector", ours)]
        said = " and ".join(f"{field} ({', '.join(f'{k}={v}' for k, v in sorted(labels.items()))})" for field, labels in fields)
        # One label is "it"; several, which nodes may carry one by one, "them all".
        which = "both" if len(fields) > 1 else "it" if len(fields[0][1]) == 1 else "them all"
        return _Unmet(never=f"{said}: {where} {which}, so no node could ever run it", now=f"{where} {said} now")

    def _affinity_meeting_no_node(self, spec: Mapping[str, Any], *, selector: Mapping[str, str]) -> _Unmet | None:
        """Why a sampling pod whose required node affinity (the template's) no node carrying its
        node selector meets, by kube-scheduler's rules over their labels, never runs; None when
        one does, no such node is known, or a term names node fields (a node of any name may
        join)."""
        if self._node_labels is None:
            return None
        if judged_terms(spec) is None:
            return None
        labelled = self._labels_carrying(selector)
        if not labelled or any(affinity_met(spec, labels=labels) for labels in labelled):
            return None
        where = "no node of allox.nodeSelector's pool meets" if self._pool else "no node meets"
        field = "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        return _Unmet(never=f"{field}: {where} it (by its labels), so no node could ever run it", now=f"{where} {field} now")

    def _labels_carrying(self, selector: Mapping[str, str]) -> list[dict[str, str]]:
        """Each node's labels among those carrying ``selector``, read once a pass per selector,
        and each label set a pass saw there within ``NODE_RETURN_SECONDS`` that none has now."""
        assert self._node_labels is not None
        key = frozenset(selector.items())
        self._asked(key)
        if key not in self._pass_labels:
            current = {frozenset(labels.items()) for labels in self._node_labels(selector)}
            seen = self._labels_seen.setdefault(key, {})
            seen.update(dict.fromkeys(current, self._pass_time))
            self._pass_labels[key] = [dict(labels) for labels in seen]
        return self._pass_labels[key]

    def _iterations_to_sample(self, job: Job, configurations: Configurations | None) -> int | None:
        """The Job's iterations when it is to be sampled; None, after telling why, when not."""
        annotations = job.annotations
        if job.finished:
            self._finished(job)
            return None
        estimate_text = annotations.get(ANNOTATION_ESTIMATE)
        if estimate_text is not None:
            # Every mistake at once, as the webhook warned of them. A suspended Job whose
            # configurations do not read: nothing to sample, but nothing to start either (the
            # placer leaves such a Job to be told here, with the field).
            unread = configurations is None and job.suspended
            problems = (_configurations_errors(job) if unread else []) + estimate_errors(estimate_text)
            if problems:
                self._invalid(job, *problems)
            if problems or unread:
                return None
            recorded = parse_estimate(estimate_text)
            changed = _changed_since(recorded.document, _digests(configurations)) if configurations is not None and job.suspended else []
            if changed:
                self._withdraw(job, estimate_text, changed)
                return None
            if not (recorded.by_cellfit and job.suspended and configurations is not None and _awaited_kinds(self._sampling(job))):
                state: JobState = "estimated" if recorded.by_cellfit else "user-estimate"
                self._view(job, state, "", estimate=recorded.document)
                return None
            # Estimated without a configuration waiting for its pool's node (below): its runs go on
            # while the Job waits in AlloX's queue, and the estimate gains it if they finish first.
        if not job.suspended:
            # cellfit does not suspend Jobs itself (no webhook on Job creation): a Job submitted
            # without suspend: true runs as written, and its user is told.
            message = not_estimated_message(job)
            self._event(job, "NotEstimated", message, warning=True, once="unsuspended")
            self._view(job, "unsuspended", message)
            return None
        # Every mistake of its spec at once (user26 #6: the configurations' first hid the rest
        # and the iterations').
        problems = _configurations_errors(job) if configurations is None else []
        try:
            iterations = parse_iterations(annotations.get(ANNOTATION_ITERATIONS))
        except InvalidAnnotation as error:
            problems.append(error)
        if not job.spec.has_template:
            problems.append(InvalidAnnotation("is missing", field="spec.template"))
        if problems:
            self._invalid(job, *problems)
            return None
        return iterations

    def _without_stale(self, pods: Mapping[str, Pod], digests: Mapping[str, str]) -> dict[str, Pod]:
        """The Job's sampling pods that ran its configurations as they are now; the others (a
        configuration edited or removed since) are left out, and deleted while they run."""
        current = {
            name: pod for name, pod in pods.items()
            if _ran((pod.metadata.annotations or {}).get(ANNOTATION_SAMPLE_CONFIGURATION, ""), (pod.metadata.annotations or {}).get(ANNOTATION_SAMPLE_DIGEST), digests)
        }
        for name, pod in pods.items():
            if name not in current and _live(pod):
                self._delete_sampling_pod(pod)
        return current

    def _withdraw(self, job: Job, text: str, changed: Sequence[str]) -> None:
        """cellfit's estimate of configurations edited since, taken off the Job while it still
        waits (and only that estimate, on that Job): the edited ones are sampled anew, the runs
        of the others still count."""
        message = f"{', '.join(changed)} changed since the estimate: estimate withdrawn, sampling again"
        self._view(job, "sampling", message)
        if not self._said_once(job, f"withdrawn:{text}"):
            return
        path = annotation_pointer(ANNOTATION_ESTIMATE)
        operations = [*_waiting_tests(job), {"op": "test", "path": path, "value": text}, {"op": "remove", "path": path}]
        try:
            self._api.patch_job(namespace=job.metadata.namespace, name=job.metadata.name, operations=operations)
        except CellfitError as error:  # unsuspended, replaced or re-estimated since: the next pass sees it
            log.warning("estimator write failed", extra={"what": f"withdraw the estimate of {_key(job)}", "reason": str(error)})
            return
        self._event(job, "EstimateWithdrawn", message, warning=False, once=text)
        with self._lock:  # the next estimate's condition may read as the last one's: said anew
            self._said[job.metadata.uid] = {what for what in self._said.get(job.metadata.uid, set()) if not what.startswith("condition:")}
        self._condition(job, status="False", reason="ConfigurationsChanged", message=message)

    def _sampling(self, job: Job) -> dict[str, Any]:
        """The Job's sampling record: its annotation, and what this process wrote that the watch
        has not brought back yet (a pass in between must not draw another ratio, or forget a
        stopped sample and start it again)."""
        record = _sampling_record(job.annotations.get(ANNOTATION_SAMPLING))
        with self._lock:
            written = self._written_sampling.get(job.metadata.uid)
        if written:
            record = {**record, **{k: v for k, v in written.items() if k == "ratio"}}
            record.pop(_AWAITING, None)  # what this process wrote last says which still wait
            if _AWAITING in written:
                record[_AWAITING] = written[_AWAITING]
            for key in ("stopped", "failed", "runs"):
                record[key] = {**record.get(key, {}), **written.get(key, {})}
        return record

    def _record_sampling(self, job: Job, sampling: dict[str, Any]) -> None:
        self._api.annotate_job(namespace=job.metadata.namespace, name=job.metadata.name, annotations={ANNOTATION_SAMPLING: json.dumps(sampling)})
        with self._lock:
            self._written_sampling[job.metadata.uid] = json.loads(json.dumps(sampling))

    def _act(
        self,
        job: Job,
        pods: Mapping[str, Pod],
        configurations: Configurations,
        decision: Decision,
        sampling: dict[str, Any],
        sample_pods: list[SamplePod],
        budget: _Budget,
        *,
        never: Mapping[str, str],
        awaiting: Mapping[str, _Awaiting],
    ) -> list[tuple[Job, dict[str, Any]]]:
        namespace, name = job.metadata.namespace, job.metadata.name
        for stop in decision.stop:
            # Recorded on the Job before the pod goes: a restart in between still knows it.
            sampling.setdefault("stopped", {})[stop.pod] = round(stop.seconds, 3)
            sampling.setdefault("runs", {})[stop.pod] = _run_record(stop.key, stop.iterations, _digest_of(pods[stop.pod]))
            self._record_sampling(job, sampling)
            pod = pods[stop.pod]
            self._attempt(lambda: self._api.delete_pod(namespace=namespace, name=stop.pod, uid=pod.metadata.uid), what=f"stop long sample {stop.pod}")
            self._event(job, "SampleStopped", stopped_message(stop), warning=False, once=stop.pod)
        self._stop_failed(job, pods, sample_pods, sampling, awaiting=awaiting)
        self._tell_about_runs(job, pods, sample_pods)
        waiting = 0
        creations: list[tuple[Job, dict[str, Any]]] = []
        template = json.loads(bytes(job.spec.template)) if decision.create else {}
        for run in decision.create:
            configuration = configurations[run.key.configuration]  # type: ignore[index]
            if not budget.admit(self._cost(configuration)):
                waiting += 1
                continue
            creations.append((job, build_sample_pod(
                job_name=name, job_namespace=namespace, job_uid=job.metadata.uid, template=template,
                configuration=configuration, run=run, indexed=job.spec.completionMode == "Indexed",
                scheduler_name=self._settings.scheduler_name, priority_class_name=self._settings.priority_class_name,
                pool=self._pool,
            )))
        with self._lock:
            if waiting:
                self._waiting.add(job.metadata.uid)
            else:
                self._waiting.discard(job.metadata.uid)
        rows = [_sample_row(view) for view in sorted(sample_pods, key=lambda v: v.name)]
        joining = "".join(f"; {kind} waits for a node to join (estimator.nodesMayJoin)" for kind in awaiting)
        if decision.estimates is None:
            # Nothing of the Job's runs under way, only held back: it waits for the budget (its
            # short runs waiting on long ones not yet created are no progress either).
            # The missing class before the budget: such a Job comes last in a pass (reconcile), so
            # its runs often wait for the budget, and none would be created once there is room.
            refused_class = self._class_refused.get(job.metadata.uid)
            if refused_class is not None and not any(p.state in ("pending", "running") for p in sample_pods):
                self._view(job, "sampling", f"sampling pods not created: their PriorityClass '{refused_class}' "
                                                    f"({self._priority_class_field()}) does not exist{joining}", samples=rows)
            elif waiting and waiting == len(decision.create) and not any(p.state in ("pending", "running") for p in sample_pods):
                self._view(job, "waiting-for-capacity", f"{waiting} sampling runs wait for the sampling budget (estimator.maxClusterShare){joining}", samples=rows)
            else:
                self._view(job, "sampling", _runs_message(decision, sample_pods, starting=len(creations), held=waiting) + joining, samples=rows)
            return creations
        self._estimated(job, decision, rows, digests=_digests(configurations), never=never)
        return creations

    def _stop_failed(
        self, job: Job, pods: Mapping[str, Pod], sample_pods: Sequence[SamplePod], sampling: dict[str, Any], *, awaiting: Mapping[str, _Awaiting]
    ) -> None:
        """Failed runs whose pods will be gone (stuck yet holding resources, never scheduled,
        deleted by others) are recorded on the Job first: their attempts still count once the
        pods are gone, after a restart too, so a run is not started over from attempt 0 forever.
        Then the live ones are deleted. A run that waited for a node of ``estimator.nodesMayJoin``
        that never joined says so (``NodeNotJoined``, and in its recorded failure)."""
        vanishing = [(view, pods[view.name]) for view in sample_pods if view.state == "failed" and view.name in pods and _vanishing(pods[view.name])]
        unrecorded = [(view, pod) for view, pod in vanishing if view.name not in sampling.get("failed", {})]
        for view, pod in unrecorded:
            failure = view.failure or "failed"
            pool = awaiting.get(view.key.configuration)
            if pool is not None and failure.startswith("not scheduled within"):  # unscheduled, not a stuck start
                joined = f"no node of estimator.nodesMayJoin ({pool.labels}) joined"
                failure = f"{failure} ({joined})"
                self._event(job, "NodeNotJoined", (
                    f"sample {view.name} ({view.key.configuration}) was not scheduled within "
                    f"{self._settings.pending_limit_seconds:.0f} s: {joined}; attempt {view.attempt + 1} of "
                    f"{self._settings.max_attempts} (estimator.maxAttempts): check the autoscaler's node group for those "
                    "labels, or raise estimator.pendingLimitSeconds"), warning=True, once=view.name)
            sampling.setdefault("failed", {})[view.name] = failure
            sampling.setdefault("runs", {})[view.name] = _run_record(view.key, _iterations_of(pod), _digest_of(pod))
        if unrecorded:
            self._record_sampling(job, sampling)
        for _, pod in vanishing:
            if _live(pod):
                self._delete_sampling_pod(pod)

    def _tell_about_runs(self, job: Job, pods: Mapping[str, Pod], sample_pods: Sequence[SamplePod]) -> None:
        """What the user must know of the Job's runs, once per pod: a report that does not read,
        a run far from the iterations it was asked for (its cost is what it ran), a run going on
        for long with no finished sample to give it a deadline (a distributed Job's pod waiting
        for its peers never ends)."""
        finished = any(view.state == "succeeded" and view.sample is not None for view in sample_pods)
        for view in sample_pods:
            if not finished and view.running_seconds is not None and view.running_seconds > self._settings.running_alone_warning_seconds:
                self._event(job, "SampleRunningAlone", (
                    f"sample {view.name} has run {duration(view.running_seconds)} and no sample of the Job has finished to give it a "
                    "deadline: a workload waiting for its peers (a distributed Job) never ends as one pod; set cellfit.io/estimate "
                    "to skip sampling, or delete the pod (a failed attempt)"), warning=True, once=view.name)
            if view.report_error is not None:
                self._event(job, "SampleReportInvalid", f"sample {view.name}: {view.report_error}; its container's start and finish times stand (1 s resolution)", warning=True, once=view.name)
            asked = _iterations_of(pods[view.name]) if view.name in pods else 0
            ran = view.sample.iterations if view.state == "succeeded" and view.sample is not None else asked
            if asked and not asked / 2 <= ran <= 2 * asked:
                self._event(job, "SampleLengthIgnored", length_ignored_message(view.name, ran=ran, asked=asked), warning=True, once=view.name)

    def _estimated(
        self, job: Job, decision: Decision, rows: list[dict[str, Any]], *, digests: Mapping[str, str], never: Mapping[str, str]
    ) -> None:
        assert decision.estimates is not None
        for kind, reason in decision.failed.items():
            self._event(job, "SamplingFailed", f"{kind}: sampling failed after {self._settings.max_attempts} attempts: {reason}", warning=True, once=f"failed-{kind}")
        not_run = "".join(f"; {kind} not sampled: {why}" for kind, why in never.items())
        if not decision.estimates:
            failed = [f"{k}: {r}" for k, r in decision.failed.items()] + [f"{k}: {why}" for k, why in never.items()]
            message = "no configuration could be sampled: " + "; ".join(failed)
            self._condition(job, status="False", reason="SamplingFailed", message=message)
            self._view(job, "failed", message, samples=rows)
            return
        text = encode_estimate(decision.estimates, samples=decision.samples, overhead_fraction=decision.overhead_fraction, digests=digests)
        if text != job.annotations.get(ANNOTATION_ESTIMATE):  # a Job still sampled after its estimate (awaiting)
            self._api.patch_job(namespace=job.metadata.namespace, name=job.metadata.name, operations=_estimate_operations(job, text))
        summary = describe(decision) + not_run
        self._event(job, "Estimated", summary, warning=False, once=text)  # once per estimate: a withdrawn one is followed by another
        self._condition(job, status="True", reason="Sampled" if any(e.samples for e in decision.estimates.values()) else "FromHistory", message=summary)
        for estimate in decision.estimates.values():
            if self._on_estimate is not None:
                self._on_estimate(estimate)
        self._view(job, "estimated", summary, samples=rows, estimate=json.loads(text))
        log.info("job estimated", extra={"job": _key(job), "estimate": summary})

    # ------------------------------------------------------------------ history (learning in time)

    def _priors(self, job: Job, configurations: Configurations) -> dict[str, Prior]:
        family = (job.metadata.labels or {}).get(LABEL_JOB_FAMILY)
        if not family:
            return {}
        priors: dict[str, Prior] = {}
        with self._lock:
            for kind in configurations.kinds:
                prior = prior_from_history(
                    list(self._history.get((job.metadata.namespace, family, kind), ())),
                    task_covs=list(self._task_spread.get((job.metadata.namespace, family, kind), ())),
                    settings=self._planner.model,
                )
                if prior is not None:
                    priors[kind] = prior
        return priors

    def _finished(self, job: Job) -> None:
        """A finished Job: its real runtime joins its family's history, and the estimate's real
        error is written beside it so users can trust or distrust the next one."""
        uid = job.metadata.uid
        text = job.annotations.get(ANNOTATION_ESTIMATE)
        self._view(job, "finished", f"finished: {job.finished}")
        if uid in self._recorded or text is None or job.finished != "Complete" or job.status is None:
            return
        try:
            recorded = parse_estimate(text)
        except InvalidAnnotation:
            return
        started, completed = timestamp(job.status.startTime), timestamp(job.status.completionTime)
        kind = job.annotations.get(ANNOTATION_PLACEMENT) or template_kind(job, self._gpu_resource)
        try:
            iterations = parse_iterations(job.annotations.get(ANNOTATION_ITERATIONS))
        except InvalidAnnotation:
            return
        if started is None or completed is None or completed <= started or kind not in recorded.seconds:
            return
        actual = completed - started
        waves = waves_of(completions=job.spec.completions, parallelism=job.spec.parallelism)
        family = (job.metadata.labels or {}).get(LABEL_JOB_FAMILY)
        with self._lock:
            self._recorded.add(uid)
            if family:
                window = self._history.setdefault((job.metadata.namespace, family, kind), deque(maxlen=self._settings.history_window))
                window.append(actual / waves / iterations)
                for sampled, spread in _task_spreads(recorded.document).items():  # every configuration its pilots ran in
                    covs = self._task_spread.setdefault((job.metadata.namespace, family, sampled), deque(maxlen=self._settings.history_window))
                    covs.append(spread)
            sampling = _sampling_record(job.annotations.get(ANNOTATION_SAMPLING))
            ratio = sampling.get("ratio")
            created = timestamp(job.metadata.creationTimestamp)
            if isinstance(ratio, (int, float)) and created is not None:
                self._ratio.job_finished(ratio=float(ratio), normalized_jct=(completed - created) / actual)
        document = dict(recorded.document)
        entry = document.get(kind)
        if recorded.by_cellfit and isinstance(entry, dict) and "actualSeconds" not in entry:
            error = (recorded.seconds[kind] - actual) / actual
            document[kind] = {**entry, "actualSeconds": round(actual, 3), "error": round(error, 4)}
            self._attempt(
                lambda: self._api.annotate_job(namespace=job.metadata.namespace, name=job.metadata.name, annotations={ANNOTATION_ESTIMATE: json.dumps(document, separators=(",", ":"))}),
                what=f"record the real runtime of {_key(job)}",
            )
            if self._on_error is not None:
                self._on_error(abs(error))

    # ------------------------------------------------------------------ telling users

    def _invalid(self, job: Job, *errors: CellfitError) -> None:
        message = f"nothing is sampled or started: {'; '.join(map(str, errors))}"
        if not _condition_says(job, status="False", reason="InvalidSpec", message=message):  # else told before a restart
            self._event(job, "InvalidInterchangeableJob", message, warning=True, once=message)
        self._condition(job, status="False", reason="InvalidSpec", message=message)
        self._view(job, "invalid", message)

    def _tell_misplaced(self) -> None:
        """An Event on each Job whose misplaced annotations changed since last told (none, when
        they are gone): without cellfit.io/configurations on the Job it stays suspended, and
        only kubectl cellfit why said why."""
        with self._lock:
            untold = [(job, self._misplaced.get(uid, ())) for uid, job in self._misplaced_untold.items()]
            self._misplaced_untold.clear()
        for job, keys in untold:
            if keys:
                self._send_event(job, MISPLACED_ANNOTATION, misplaced_message(job, keys), warning=True)

    def _view(self, job: Job, state: JobState, message: str, *, samples: list[dict[str, Any]] | None = None, estimate: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            if job.metadata.uid in self._jobs:
                self._views[job.metadata.uid] = JobView(job.metadata.namespace, job.metadata.name, state, message, samples or [], estimate)

    def _said_once(self, job: Job, what: str) -> bool:
        with self._lock:
            said = self._said.setdefault(job.metadata.uid, set())
            if what in said:
                return False
            said.add(what)
            return True

    def _event(self, job: Job, reason: str, message: str, *, warning: bool, once: str) -> None:
        if self._said_once(job, f"event:{reason}:{once}"):
            self._send_event(job, reason, message, warning=warning)

    def _send_event(self, job: Job, reason: str, message: str, *, warning: bool) -> None:
        self._attempt(
            lambda: self._api.create_event(namespace=job.metadata.namespace, pod_name=job.metadata.name, pod_uid=job.metadata.uid, reason=reason, message=message, warning=warning, kind="Job"),
            what=f"event on {_key(job)}",
        )

    def _condition(self, job: Job, *, status: str, reason: str, message: str) -> None:
        if _condition_says(job, status=status, reason=reason, message=message):
            return
        if not self._said_once(job, f"condition:{status}:{reason}:{message}"):
            return
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._clock()))
        condition = {"type": CONDITION_ESTIMATED, "status": status, "reason": reason, "message": message[:1024], "lastTransitionTime": now, "lastProbeTime": now}
        self._attempt(lambda: self._api.set_job_condition(namespace=job.metadata.namespace, name=job.metadata.name, condition=condition), what=f"condition on {_key(job)}")

    @staticmethod
    def _attempt(call: Callable[[], None], *, what: str) -> None:
        try:
            call()
        except CellfitError as error:
            log.warning("estimator write failed", extra={"what": what, "reason": str(error)})


def misplaced_message(job: Job, keys: Sequence[str]) -> str:
    """``cellfit.io/configurations is on spec.template.metadata.annotations; cellfit reads it from
    the Job's metadata.annotations``, and what that does to the Job until it is moved."""
    one = len(keys) == 1
    it, they_are = ("it", "it is") if one else ("them", "they are")
    said = (f"{' and '.join(keys)} {'is' if one else 'are'} on spec.template.metadata.annotations; "
            f"cellfit reads {it} from the Job's metadata.annotations")
    if ANNOTATION_CONFIGURATIONS in job.annotations:
        return f"{said}: move {it} there"
    if ANNOTATION_CONFIGURATIONS not in keys:
        return f"{said}, with {ANNOTATION_CONFIGURATIONS}, which this Job does not have"
    if job.suspended:
        return f"{said}: the Job stays suspended, never estimated nor started by AlloX, until {they_are} moved there"
    return (f"{said}: the Job runs as its template says, never estimated nor placed by AlloX; for cellfit to choose its "
            f"configuration, create it again with {it} in metadata.annotations and spec.suspend: true")


def _condition_says(job: Job, *, status: str, reason: str, message: str) -> bool:
    """Whether the Job's Estimated condition already says this (as a write of it stores it)."""
    current = job.condition(CONDITION_ESTIMATED)
    return current is not None and current.status == status and current.reason == reason and current.message == message[:1024]


@dataclass(frozen=True)
class _Unmet:
    """What no current node meets, told two ways: as a configuration that never runs, and as one
    that waits for a node yet to join (``now``: "no node carries FIELD (pool=cpu-big) now")."""

    never: str
    now: str


@dataclass(frozen=True)
class _Awaiting:
    """A configuration no current node meets that a node of ``estimator.nodesMayJoin`` would:
    what none meets ``now``, and that pool's ``labels`` as users read them ("pool=cpu-big")."""

    now: str
    labels: str


@dataclass(frozen=True)
class _Probe:
    """A configuration's sampling pod as it would be built (``body``) and what it asks of a node
    (None where a quantity does not read), or why it cannot be built (``conflict``: a selector
    outside ``allox.nodeSelector``'s pool)."""

    body: Mapping[str, Any]
    asks: Resources | None
    conflict: str | None = None


@dataclass
class _Budget:
    """Sampling pods' share of the cluster: CPU millicores and GPUs requested by running ones."""

    limit_cpu: float
    limit_gpu: float
    cpu: int = 0
    gpus: int = 0
    pods: int = 0

    def take(self, cost: tuple[int, int]) -> None:
        self.cpu += cost[0]
        self.gpus += cost[1]
        self.pods += 1

    def admit(self, cost: tuple[int, int]) -> bool:
        cpu, gpus = cost
        # One sampling pod may always run: a budget smaller than one pod must not stall sampling.
        fits = self.pods == 0 or (self.cpu + cpu <= self.limit_cpu and self.gpus + gpus <= self.limit_gpu)
        if fits:
            self.take(cost)
        return fits


def _estimate_operations(job: Job, text: str) -> list[dict[str, Any]]:
    """The estimate, written only on the Job it was made for and only while that Job waits: a
    Job its user unsuspended (or deleted and created again under its name) since it was read
    fails the tests, and the next pass sees why."""
    return [*_waiting_tests(job), {"op": "add", "path": annotation_pointer(ANNOTATION_ESTIMATE), "value": text}]


def _waiting_tests(job: Job) -> list[dict[str, Any]]:
    """JSON Patch tests that the Job is the one read (not one created again under its name) and
    still suspended."""
    return [{"op": "test", "path": "/metadata/uid", "value": job.metadata.uid}, {"op": "test", "path": "/spec/suspend", "value": True}]


def _digests(configurations: Configurations) -> dict[str, str]:
    return {kind: configuration_digest(configurations[kind]) for kind in configurations.kinds}


def _changed_since(estimate: Mapping[str, Any], digests: Mapping[str, str]) -> list[str]:
    """The configurations whose digest differs from the one cellfit's estimate of them recorded
    (an estimate without digests, or a configuration it lacks, counts as unchanged)."""
    return [
        kind for kind, entry in estimate.items()
        if isinstance(entry, dict) and kind in digests and entry.get("configurationDigest", digests[kind]) != digests[kind]
    ]


def _where(pod: Pod) -> tuple[str, str]:
    return pod.metadata.namespace, pod.metadata.name


def _live(pod: Pod) -> bool:
    """A sampling pod still pending or running, and not being deleted."""
    return (pod.status is None or pod.status.phase not in ("Succeeded", "Failed")) and pod.metadata.deletionTimestamp is None


def _awaited_kinds(sampling: Mapping[str, Any]) -> list[str]:
    """The configurations the Job's estimate was written without while their runs wait for a
    node of estimator.nodesMayJoin (its sampling record), sorted; none when it reads otherwise."""
    kinds = sampling.get(_AWAITING)
    return sorted(kind for kind in kinds if isinstance(kind, str)) if isinstance(kinds, list) else []


def _sampling_record(text: str | None) -> dict[str, Any]:
    """``cellfit.io/sampling`` as far as it reads: a ratio that is not a fraction, a section that
    is not an object and entries of the wrong type are left out (drawn or run again), so a record
    edited by hand never stops its Job's sampling."""
    if not text:
        return {}
    try:
        record = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(record, dict):
        return {}
    ratio = record.pop("ratio", None)
    if _is_number(ratio) and 0 < ratio <= 1:
        record["ratio"] = ratio
    for section, readable in _SAMPLING_SECTIONS.items():
        entries = record.pop(section, None)
        if isinstance(entries, dict):
            record[section] = {name: value for name, value in entries.items() if readable(value)}
    return record


def _task_spreads(estimate: Mapping[str, Any]) -> dict[str, float]:
    """The pilots' coefficient of variation (``taskCov``) per configuration, from the entries
    cellfit wrote (they carry a ``method``): a user's own estimate says nothing of how its pods
    differed, and its ``taskCov`` would floor σ1 of every later Job of the family."""
    return {
        kind: float(entry["taskCov"]) for kind, entry in estimate.items()
        if isinstance(entry, dict) and "method" in entry and _is_number(entry.get("taskCov")) and entry["taskCov"] >= 0
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# What each section of ``cellfit.io/sampling`` holds per pod: seconds run, a failure, the run.
_SAMPLING_SECTIONS: dict[str, Callable[[Any], bool]] = {
    "stopped": lambda value: _is_number(value) and value >= 0,
    "failed": lambda value: isinstance(value, str),
    "runs": lambda value: isinstance(value, list),
}


def _vanishing(pod: Pod) -> bool:
    """A sampling pod not ended (Succeeded or Failed pods stay until their Job goes)."""
    return pod.status is None or pod.status.phase not in ("Succeeded", "Failed")


def _iterations_of(pod: Pod) -> int:
    text = (pod.metadata.annotations or {}).get(ANNOTATION_SAMPLE_ITERATIONS, "")
    return int(text) if text.isdigit() else 0


def _with_recorded_failure(view: SamplePod, failed: Mapping[str, str]) -> SamplePod:
    """A pod the Job records as failed reads as it was then (a stuck pod being deleted is not a
    pod deleted by someone else)."""
    failure = failed.get(view.name)
    if failure is None or view.state in ("succeeded", "stopped"):
        return view
    return SamplePod(name=view.name, key=view.key, attempt=view.attempt, state="failed", failure=str(failure))


def _ran(kind: str, digest: str | None, digests: Mapping[str, str]) -> bool:
    """Whether a run of ``kind`` with ``digest`` ran one of the Job's configurations as it is now
    (a run made before pods carried the digest counts as such)."""
    return kind in digests and digest in (None, digests[kind])


def _run_record(key: SampleKey, iterations: int, digest: str | None) -> list[Any]:
    """A run as the Job records it (``runs`` of ``cellfit.io/sampling``), for when its pod is gone."""
    return [key.configuration, key.pilot, key.length, iterations, *([digest] if digest else [])]


def _digest_of(pod: Pod) -> str | None:
    return (pod.metadata.annotations or {}).get(ANNOTATION_SAMPLE_DIGEST)


def _missing_priority_class(error: KubernetesApiError) -> str | None:
    """The PriorityClass the API server found missing (its Priority admission plugin: 403, "no
    PriorityClass with name X was found"), if that is the refusal."""
    if error.status != 403:
        return None
    found = _NO_PRIORITY_CLASS.search(str(error))
    return found.group(1) if found else None


_NO_PRIORITY_CLASS = re.compile(r"no PriorityClass with name (\S+) was found")


def _refused_for_good(error: KubernetesApiError) -> bool:
    """A creation the API server will refuse again (invalid, forbidden by policy), not one a full
    ResourceQuota or an unreachable server refuses for now."""
    return error.status in (400, 403, 422) and "exceeded quota" not in str(error)


def _sample_pods(
    pods: Mapping[str, Pod], sampling: Mapping[str, Any], *, digests: Mapping[str, str], now: float, pending_limit_seconds: float
) -> list[SamplePod]:
    """The Job's runs as the planner sees them: its pods, and the runs recorded on the Job whose
    pods are gone (stopped as long, failed)."""
    stopped: Mapping[str, float] = sampling.get("stopped", {})
    failed: Mapping[str, str] = sampling.get("failed", {})
    views = [
        sample_pod(pod, now=now, stopped_seconds=stopped.get(name), pending_limit_seconds=pending_limit_seconds)
        for name, pod in pods.items()
    ]
    sample_pods = [_with_recorded_failure(v, failed) for v in views if v is not None]
    for name in {**stopped, **failed}:
        if name not in pods:
            restored = _restore_run(name, sampling, digests=digests)
            if restored is not None:
                sample_pods.append(restored)
    return sample_pods


def _restore_run(name: str, sampling: Mapping[str, Any], *, digests: Mapping[str, str]) -> SamplePod | None:
    """A sample stopped as long, or a run failed, whose pod is gone, from the Job's record of it;
    None when the record is unreadable or of a configuration edited since."""
    run = sampling.get("runs", {}).get(name)
    if not isinstance(run, list) or len(run) not in (4, 5):
        return None
    kind, pilot, length, iterations = run[:4]
    if length not in ("short", "long") or not isinstance(iterations, int) or not isinstance(pilot, int):
        return None
    if not _ran(str(kind), str(run[4]) if len(run) == 5 else None, digests):
        return None
    tail = name.rsplit("-", 1)[-1]
    key = SampleKey(configuration=str(kind), pilot=pilot, length=length)
    attempt = int(tail) if tail.isdigit() else 0
    seconds = sampling.get("stopped", {}).get(name)
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        sample = Sample(str(kind), iterations, float(seconds), complete=False, pilot=pilot)
        return SamplePod(name=name, key=key, attempt=attempt, state="stopped", sample=sample)
    failure = sampling.get("failed", {}).get(name)
    if failure is None:
        return None
    return SamplePod(name=name, key=key, attempt=attempt, state="failed", failure=str(failure))


def _sample_row(view: SamplePod) -> dict[str, Any]:
    row: dict[str, Any] = {"pod": view.name, "configuration": view.key.configuration, "length": view.key.length, "pilot": view.key.pilot, "attempt": view.attempt, "state": view.state}
    if view.sample is not None:
        row.update(iterations=view.sample.iterations, seconds=round(view.sample.seconds, 3))
    if view.failure:
        row["failure"] = view.failure
    if view.pending_reason:
        row["reason"] = view.pending_reason
    return row


def _decoded_job(raw: bytes) -> Job | None:
    """The Job the watch cache passed on, decoded whole; None, logged, when its fields do not
    read as a Job's (the other Jobs still count)."""
    try:
        return JOB_DECODER.decode(raw)
    except msgspec.ValidationError as error:
        log.warning("estimator skipped a Job it cannot read", extra={"reason": str(error)})
        return None


def _configurations_errors(job: Job) -> list[InvalidAnnotation]:
    """What is wrong with the Job's cellfit.io/configurations: every mistake, or none."""
    return configuration_errors(job.annotations.get(ANNOTATION_CONFIGURATIONS))


def _runs_message(decision: Decision, sample_pods: Sequence[SamplePod], *, starting: int, held: int) -> str:
    """This Job's sampling runs, not the whole estimator's: under way (pods pending or running,
    and those created now), held back by the sampling budget, and to follow (short runs after
    their long ones)."""
    under_way = starting + sum(1 for p in sample_pods if p.state in ("pending", "running"))
    after = max(decision.in_progress - under_way - held, 0)
    parts = [f"{under_way} under way"]
    if held:
        parts.append(f"{held} waiting for the sampling budget (estimator.maxClusterShare)")
    if after:
        parts.append(f"{after} more after them")
    return f"this Job's sampling runs: {', '.join(parts)}"


# The run a configuration's probe pod is built for (``_never_runs``): its name and env are not read.
_PROBE_RUN = CreateSample(key=SampleKey(configuration="probe", pilot=0, length="long"), attempt=0, iterations=1)


def _key(job: Job) -> str:
    return f"{job.metadata.namespace}/{job.metadata.name}"


def stopped_message(stop: StopSample) -> str:
    """A sample stopped far past what the Job's other samples predict, and what it still tells:
    the run took at least that long (a lower bound, estimator/model.py), not "recorded as long"."""
    ran = duration(stop.seconds)
    return (f"sample {stop.pod} ran {ran}, longer than the {duration(stop.deadline_seconds)} the Job's other samples "
            f"predict for it: stopped, and counted as a {stop.key.configuration} run of at least {ran}")


def length_ignored_message(pod: str, *, ran: int, asked: int) -> str:
    """A workload that ran other than the iterations its sample was given: what that costs and what
    to change, not "a sample costs what it runs"."""
    return (f"sample {pod} ran {ran} iterations, asked for CELLFIT_SAMPLE_ITERATIONS={asked}: the workload does not stop "
            f"after the iterations that variable gives it, so each sample costs what it runs (the estimate uses the {ran} "
            "it reported); have its training loop stop after CELLFIT_SAMPLE_ITERATIONS iterations")


def not_estimated_message(job: Job) -> str:
    """Why a Job with configurations runs unestimated, said as the one of the two cases it is (the
    job-controller writes a ``Suspended`` condition only on a Job that was suspended once), and
    what that means: AlloX does not choose its kind, and how to have it estimated next time."""
    if job.condition("Suspended") is None:
        how = "it was created without spec.suspend: true, so it started before cellfit could sample it"
    else:
        how = "it was unsuspended (spec.suspend: false) before cellfit's sampling ended"
    return (f"running without an estimate: {how}; it runs as its template says, and AlloX does not choose CPU or GPU "
            "for it (create it with spec.suspend: true to have it estimated and placed)")


def describe(decision: Decision) -> str:
    """"estimated cpu 6.2 h ± 0.4 h, gpu 41 min ± 3 min from 4 samples, which ran 76 s in all: 3.1%
    of its estimated 41 min on gpu" (the configurations in the Job's order): the samples' seconds summed, and over its fastest
    configuration's estimate (``overhead_fraction``, estimator/planner.py). Both numbers, each
    with its unit: "which together ran 20.4% as long as its gpu run" left the reader to guess
    which run (a sample's? the Job's?) and how long the sampling took."""
    assert decision.estimates is not None
    parts = []
    for kind, estimate in decision.estimates.items():
        text = f"{kind} {duration(estimate.seconds)}"
        if estimate.lower_bound:
            text = f"{kind} at least {duration(estimate.seconds)}"
        elif estimate.uncertainty_seconds > 0:
            text += f" ± {duration(estimate.uncertainty_seconds)}"
        if estimate.method in ("history", "posterior"):
            text += f" ({estimate.method})"
        parts.append(text)
    samples = sum(len(rows) for rows in decision.samples.values())
    summary = f"estimated {', '.join(parts)} from {samples} sample{'' if samples == 1 else 's'}"
    if decision.overhead_fraction is not None:
        estimates = decision.estimates
        fastest = min(estimates, key=lambda kind: estimates[kind].seconds)
        fastest_seconds = estimates[fastest].seconds
        spent = decision.overhead_fraction * fastest_seconds
        summary += (f", which ran {duration(spent)} in all: {decision.overhead_fraction:.1%} of its estimated "
                    f"{duration(fastest_seconds)} on {fastest}")
    return summary
