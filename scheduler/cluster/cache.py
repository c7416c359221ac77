"""The live view of the cluster: Node and Pod reflectors feeding the engine.

Every object is translated once, on arrival, into the core's values and applied to the engine
under the shared lock. Pods are also kept by ``namespace/name`` so the bind verb can find the
pod kube-scheduler names. An object that does not translate (a pod with a nonsensical quantity)
is logged and skipped, never allowed to stop the watch.

With the estimator on, the one pod watch is also the estimator's (feed.SamplingPods): it lists
and watches finished pods too (a sampling pod's result is read from its finished state), which
the engine takes as gone, as the watch of unfinished pods would have shown them.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import functools
import itertools
import logging
import math
import threading
import time
from typing import Any, Callable, Collection, Final, Generator, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar, overload

import msgspec

from estimator.objects import LABEL_SAMPLE, Pod as SamplingPod
from estimator.objects import POD_DECODER as SAMPLING_POD_DECODER
from placer.holding import JobPods, bound_in_this_run
from scheduler.cluster.api import Kind, KubernetesApi, WatchExpired
from scheduler.cluster.feed import InterchangeableJobs, SamplingPods, followed
from scheduler.cluster.pacing import InThread, Pacing, Steps
from scheduler.cluster.preempted_jobs import JOB_API_VERSION, JOB_KIND, tell_job_of_preempted
from scheduler.cluster.reflector import Reflector
from scheduler.cluster.writes import Writes
from scheduler.cells import bindinfo
from scheduler.cluster.disruption import Preempted, delete_preempted, warn_not_marked, write_disruption_target
from scheduler.cluster.gang_recovery import unfinished_members
from scheduler.cluster.preemptor_records import (
    FollowsHoldEnds,
    FollowsPreemptorRecords,
    FollowsResumeHolds,
    clear_preemptor_record,
    finished_preempted_message,
    preempted_event_name,
    write_gang_preempted,
    write_preemptor_record,
    write_resume_holds,
)
from scheduler.constants import (
    ANNOTATION_BIND_INFO,
    ANNOTATION_GANG_PREEMPTED,
    ANNOTATION_PLACEMENT,
    ANNOTATION_PODS_BOUND,
    ANNOTATION_PREEMPTIONS,
    ANNOTATION_PREEMPTOR_HOLD,
    JOB_CLASS_TRIAL,
    LABEL_JOB_CLASS,
)
from scheduler.core.engine import SchedulingEngine, TracksJobs
from scheduler.core.groups import DisjointSets
from scheduler.core.model import TERMINAL_PHASES, JobInfo, OwnerRef, PodInfo
from scheduler.core.pods import PodStore
from scheduler.core.resources import ZERO, Resources
from scheduler.errors import CellfitError, InvalidAnnotation, KubernetesApiError
from scheduler.preemption import gang_records, records
from scheduler.preemption.bound_records import runs
from scheduler.preemption.engine import DEFAULT_SCHEDULER_NAME
from scheduler.preemption.model import JobClass, job_class_or_best_effort, preemption_count_of
from scheduler.preemption.resume_records import JobRef
from scheduler.kube import translate, wire
from scheduler.kube.lists import read_page
from scheduler.kube.times import timestamp
from scheduler.kube.wire import annotation_pointer
from scheduler.matching.admission import BestEffortGpus

log = logging.getLogger(__name__)
T = TypeVar("T")
# Preemption victims remembered at most (a victim whose deletion the watch never sees, say one
# deleted while the watch was down and relisted away, is forgotten with the oldest).
VICTIMS_KEPT = 10_000
# Objects per page of a list (client-go's reflectors page by 500 too): ~1 MB of pods, decoded in
# a few milliseconds between which the verbs get the GIL.
LIST_PAGE_SIZE = 500
# Records checked against a list per step of a relist: about what applying one event costs.
_CHECKS_PER_STEP = 256


# A preemption count is the only record of it that survives a restart (FitGpp's P): a write the
# API server fails for a moment is tried again after these pauses, one more try each.
COUNT_WRITE_PAUSES_SECONDS: tuple[float, ...] = (0.5, 2.0)
# Reads and guarded writes of one count before giving up, each after another writer came first.
COUNT_WRITE_CONFLICTS = 5
# A gang member on another node than the preemption's, which only cellfit deletes: given up, it
# runs on while its gang-mates are gone (its job hangs, its GPUs held), so its mark and deletion
# are tried again over a longer outage than a count's; a relist or a restart finishes what is
# still left (gang_recovery.py).
PREEMPT_PAUSES_SECONDS: tuple[float, ...] = (0.5, 2.0, 5.0, 10.0)
# A pod being deleted counts free for AlloX (free_by_node's leaving_within) for its grace period
# and this long more from when the cache first saw it leaving (seconds): past that it is stuck.
LEAVING_MARGIN_SECONDS = 60.0
# Another replica's gang preemption is finished from its record (gang_recovery.py) only this long
# after its decision: the deciding replica's own tries of a member (the mark, then the deletion,
# 5 tries each over ~17 s of pauses, each call up to the API client's timeout, 10 s by default:
# ~135 s, behind the record's and the Job counts' writes) are over by then, so a replica that
# relists meanwhile (a rolling update, every replica after an API outage) does not preempt the
# member a second time. A kill -9's members run this much longer at most.
GANG_RECOVERY_AFTER_SECONDS = 300.0
# A gang member whose deletion this replica gave up (the API server failing over all of its
# PREEMPT_PAUSES_SECONDS) is tried again this long later at the soonest (seconds): left to a
# relist, with one replica nothing deleted it again.
GANG_RETRY_AFTER_SECONDS = 60.0
# The bind verb waits this long at most (seconds) for the gang members a preemptor's record names
# to be named on their Jobs before it creates the binding (_name_on_jobs_before_binding): a healthy
# API server answers in milliseconds, and kube-scheduler gives the whole bind call the extender's
# httpTimeout (5 s in the chart); the writes' later tries go on past it.
NAMING_BEFORE_BINDING_SECONDS = 1.0
# How often the room holds past their time are given up when no filter asks (seconds): a hold
# lapses as a filter looks at it, and kube-scheduler asks no filter for the pods it kept off, which
# it parked; the requeue signal its end sends follows this much later at most.
HOLD_EXPIRY_LOOK_SECONDS = 5.0
# Starts the look again at a record too young to finish (threading.Timer; the tests' own).
_timer: Callable[[float, Callable[[], None]], threading.Timer] = threading.Timer
# When a binding was asked for, by this replica's clock (_note_bound_here; the tests' own).
_wall_clock: Callable[[], float] = time.time


def _retried(call: Callable[[], T], *, pauses: Sequence[float], sleep: Callable[[float], None] = time.sleep) -> T:
    """What ``call`` returns, tried again after each pause while it fails for a moment (no
    answer, 429, 5xx); any other failure, or the last, is raised."""
    for pause in pauses:
        try:
            return call()
        except KubernetesApiError as error:
            transient = error.status is None or error.status == 429 or error.status >= 500
            if not transient:
                raise
        sleep(pause)
    return call()


# The cache's background writes (writes.py): its events and Job counts, on one lane in the order
# decided (BACKGROUND); and the writes the bind verb starts, per lane BIND_WRITE_THREADS threads: a
# preemptor's binding naming gang members on their Jobs (NAMING), which the binding waits for
# (NAMING_BEFORE_BINDING_SECONDS at most), never behind an AlloX Job's pods-bound record (RECORDS),
# best-effort writes that may each be retrying for seconds while the API server throttles or fails
# (review28b #2).
BACKGROUND: Final = "background"
BIND_WRITE_THREADS = 2
NAMING: Final = "naming"
RECORDS: Final = "records"


class LazilyDecoded(Sequence[T], Generic[T]):
    """A list response's items, page by page, each decoded with the object decoder when first
    read (and kept). Decoding a list of 10,000 pods in one msgspec call holds the GIL for ~0.3 s,
    a stall of every verb; each item's decode takes ~30 µs, in a step of its own (pacing.py)."""

    def __init__(self, pages: Sequence[Sequence[msgspec.Raw]], decode: Callable[[msgspec.Raw], T]) -> None:
        # A page's items view its body: the page is dropped once consume() has read it.
        self._pages: list[Sequence[msgspec.Raw] | None] = list(pages)
        self._starts = list(itertools.accumulate((len(page) for page in pages), initial=0))
        self._decode = decode
        self._decoded: list[T | None] = [None] * self._starts[-1]

    def __len__(self) -> int:
        return self._starts[-1]

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        item = self._decoded[index]
        if item is None:
            page_index = bisect.bisect_right(self._starts, index) - 1
            page = self._pages[page_index]
            assert page is not None  # consume() drops a page only once every item of it was read
            item = self._decoded[index] = self._decode(page[index - self._starts[page_index]])
        return item

    def consume(self) -> Iterator[T]:
        """Each item once, in order, forgotten as the next is read, and each page once read: a
        pass that reads the list once frees each object in its own step, not all of them at once
        after the pass (10,000 decoded pods take ~15 ms to free, holding the GIL)."""
        for page_index in range(len(self._pages)):
            for index in range(self._starts[page_index], self._starts[page_index + 1]):
                item = self[index]
                self._decoded[index] = None
                yield item
            self._pages[page_index] = None


def _read_once(items: Iterable[T]) -> Iterator[T]:
    """``items`` for a pass that reads them once: a LazilyDecoded list consumed."""
    return items.consume() if isinstance(items, LazilyDecoded) else iter(items)


def api_reflector(
    api: KubernetesApi,
    kind: Kind,
    object_decoder: msgspec.json.Decoder[Any],
    *,
    name: str,
    replace: Callable[[Sequence[Any]], None],
    apply: Callable[[Any], None],
    delete: Callable[[Any], None],
) -> Reflector:  # type: ignore[type-arg]
    """A list-then-watch of one ``kind`` through ``api``, decoded with msgspec (the watch cache's
    reflectors are built here alike)."""
    return _decoded_reflector(
        lambda token: api.list_raw(kind, limit=LIST_PAGE_SIZE, continue_token=token),
        lambda version: api.watch(kind, resource_version=version), object_decoder.decode,
        name=name, replace=replace, apply=apply, delete=delete, decode_event=_one_pass(object_decoder),
    )


def path_reflector(
    api: KubernetesApi,
    path: str,
    object_decoder: msgspec.json.Decoder[Any],
    *,
    name: str,
    replace: Callable[[Sequence[Any]], None],
    apply: Callable[[Any], None],
    delete: Callable[[Any], None],
    told: Callable[[Exception], bool] | None = None,
) -> Reflector:  # type: ignore[type-arg]
    """:func:`api_reflector` for a list the generated client has no lister for (custom
    resources, one ConfigMap by field selector): ``path`` is the list's URL path; the list's
    items and the watch's objects are decoded with ``object_decoder``. ``told``: Reflector's."""
    return _decoded_reflector(
        lambda _token: api.list_path(path), lambda version: api.watch_path(path, resource_version=version),
        object_decoder.decode, name=name, replace=replace, apply=apply, delete=delete,
        decode_event=_one_pass(object_decoder), told=told,
    )


def _one_pass(object_decoder: msgspec.json.Decoder[Any]) -> Callable[[bytes], wire.ObjectEvent[Any]]:
    """A watch line's event and object decoded together (the usual event: one pass)."""
    return msgspec.json.Decoder(wire.ObjectEvent[object_decoder.type]).decode  # type: ignore[name-defined]


class WatchedJob(msgspec.Struct, frozen=True, gc=False):
    """A Job as the watch cache reads it, with the bytes it was read from (kept only for the
    interchangeable Jobs: feed.InterchangeableJobs)."""

    job: wire.Job
    raw: msgspec.Raw

    @classmethod
    def decode(cls, raw: msgspec.Raw) -> WatchedJob:
        return cls(job=wire.JOB_DECODER.decode(raw), raw=raw)


class WatchedPod(msgspec.Struct, frozen=True, gc=False):
    """A pod as the watch cache reads it with the estimator on: for a pod labelled as a sampling
    pod, its run too (``sample``, the estimator's slice, read from the same bytes: container
    states, termination messages; None when it does not read), passed on to feed.SamplingPods.
    Any other pod is read as the engine reads it, and no further."""

    pod: wire.Pod
    labelled: bool = False
    sample: SamplingPod | None = None

    @classmethod
    def decode(cls, raw: msgspec.Raw | bytes) -> WatchedPod:
        pod = wire.POD_DECODER.decode(raw)
        if not _labelled_sample(pod):
            return cls(pod=pod)
        return cls(pod=pod, labelled=True, sample=_sampling_pod(lambda: SAMPLING_POD_DECODER.decode(raw), pod))

    @classmethod
    def decode_event(cls, line: bytes) -> wire.ObjectEvent[WatchedPod]:
        """A watch line's event: the engine's pod in one pass; a sampling pod's run in a second,
        for sampling pods only."""
        event = _POD_EVENT_DECODER.decode(line)
        pod = event.object
        if not _labelled_sample(pod):
            return wire.ObjectEvent(type=event.type, object=cls(pod=pod))
        sample = _sampling_pod(lambda: _SAMPLING_POD_EVENT_DECODER.decode(line).object, pod)
        return wire.ObjectEvent(type=event.type, object=cls(pod=pod, labelled=True, sample=sample))


_POD_EVENT_DECODER = msgspec.json.Decoder(wire.ObjectEvent[wire.Pod])
_SAMPLING_POD_EVENT_DECODER = msgspec.json.Decoder(wire.ObjectEvent[SamplingPod])


def _labelled_sample(pod: wire.Pod) -> bool:
    """Labelled as a sampling pod (as the estimator creates them): whose it is, the estimator says."""
    return (pod.metadata.labels or {}).get(LABEL_SAMPLE) == "true"


def _sampling_pod(decode: Callable[[], SamplingPod], pod: wire.Pod) -> SamplingPod | None:
    """The sampling pod's run as the estimator reads it; None, logged, when it does not read (the
    estimator keeps the pod's last state that did)."""
    try:
        return decode()
    except msgspec.ValidationError as error:
        log.warning("sampling pod not passed on to the estimator",
                    extra={"pod": f"{pod.metadata.namespace}/{pod.metadata.name}", "reason": str(error)})
        return None


def _decoded_reflector(
    list_page: Callable[[str | None], bytes],
    watch: Callable[[str], Iterator[bytes]],
    decode: Callable[[msgspec.Raw], Any],
    *,
    name: str,
    replace: Callable[[Sequence[Any]], None],
    apply: Callable[[Any], None],
    delete: Callable[[Any], None],
    decode_event: Callable[[bytes], wire.ObjectEvent[Any]] | None = None,
    version_of: Callable[[Any], str] = lambda obj: obj.metadata.resourceVersion,
    told: Callable[[Exception], bool] | None = None,
) -> Reflector:  # type: ignore[type-arg]
    """``decode_event``: the watch's object events decoded in one pass (else the event, then
    ``decode`` on its object)."""
    def list_objects() -> tuple[str, Sequence[Any]]:
        # Page by page: finding the items of a 20 MB list (10,000 pods) is one call holding the
        # GIL for ~70 ms, a stall for every verb; a page of LIST_PAGE_SIZE takes a few ms. The
        # pages of one list are one snapshot (the server pins its resourceVersion).
        # The items are found with the GIL released (scheduler.kube.lists), so that the verbs'
        # thread runs meanwhile; each is decoded in its own step of the pass.
        pages: list[Sequence[msgspec.Raw]] = []
        token: str | None = None
        while True:
            page = read_page(list_page(token))
            pages.append(page.items)
            token = page.metadata.continue_token
            if not token:
                return page.metadata.resourceVersion, LazilyDecoded(pages, decode)

    return Reflector(
        kind=name,
        list_objects=list_objects,
        watch_lines=watch,
        decode_object=decode,
        version_of=version_of,
        replace=replace,
        apply=apply,
        delete=delete,
        expired=WatchExpired,
        decode_event=decode_event,
        told=told,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _AlloxRun:
    """The present run of a Job AlloX started (``cellfit.io/placement``, not a trial Job) as the
    Jobs watch shows it: its start (``status.startTime``) and whether its pods-bound record
    (``cellfit.io/pods-bound``) names that run already."""

    job: JobRef
    start_time: str
    recorded: bool
    # start_time in whole seconds since the epoch (None: it does not read, and no pod counts).
    start_second: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class _MembersLeft:
    """A preemptor's record (``text``, decided at wall-clock ``at``) naming gang members elsewhere
    that still run, and those of them their Jobs do not name yet (``to_name``, by Job: member UID
    -> its preemption, for cellfit.io/gang-preempted)."""

    text: str
    at: float
    to_name: list[tuple[JobRef, dict[str, gang_records.LeftMember]]]



class ClusterCache:
    def __init__(
        self, *, api: KubernetesApi, engine: SchedulingEngine, lock: threading.RLock, gpu_resource: str, pods: PodStore,
        jobs: TracksJobs | None, interchangeable_jobs: bool = False, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    ) -> None:
        """``pods``: the composition's record of the pods (``Composition.pods``, the one its engine
        reads), which this cache keeps: each pod recorded before the engine hears of it,
        forgotten after. ``jobs``: the part of the engine that follows Jobs (``Composition.jobs``).
        ``interchangeable_jobs``: keep the Jobs with configurations for the estimator
        (``self.interchangeable``). Jobs are watched when either asks for them.
        ``scheduler_name``: the kube-scheduler profile cellfit serves; a preemptor record is
        finished (gang_recovery.py) only for its pods."""
        # API writes that must not hold up kube-scheduler (events, Job counts): one thread, so
        # they land in the order decided; those asked for before stop() are still made.
        self._writes = Writes(lanes={BACKGROUND: 1}, name="cellfit-writes", finish_queued=True)
        # The writes the bind verb starts: stop() gives up those not begun and waits for none.
        self._bind_writes = Writes(lanes={NAMING: BIND_WRITE_THREADS, RECORDS: BIND_WRITE_THREADS}, name="cellfit-bind-writes",
                                   finish_queued=False)
        # Drives the relists' passes (pacing.py): in the reflector's thread until the server's
        # event loop is known (pace_on).
        self._pacing: Pacing = InThread()
        self._api = api
        self._engine = engine
        self._lock = lock
        self._gpu_resource = gpu_resource
        self._pods = pods
        self._scheduler_name = scheduler_name
        # The look at the records again, once the youngest record left is old enough, and when.
        self._gang_recheck: tuple[threading.Timer, float] | None = None
        # Preemptor records naming gang members elsewhere that still run, which no pod shows any
        # more, by (preemptor UID, text) -> the preemptor as last seen: its pod finished or was
        # deleted, its hold gave up and took it off, or this replica's deletion of a member gave
        # up. Read by every later look until none of those members runs (gang_recovery.py).
        self._gang_records: dict[tuple[str, str], PodInfo] = {}
        # The Jobs naming gang members still to delete (cellfit.io/gang-preempted, gang_records.py),
        # by Job UID -> the Job, the annotation's text, as the Jobs watch shows them.
        self._gang_preempted: dict[str, tuple[JobRef, str]] = {}
        # The pods have been listed: a look at the records before reads no member as running.
        self._pods_listed = False
        self._node_names: set[str] = set()
        self._allocatable: dict[str, Resources] = {}
        self._schedulable: set[str] = set()  # Ready and not cordoned
        self._labels: dict[str, Mapping[str, str]] = {}
        # Node -> why its latest version did not translate, until one does or it is deleted: a
        # node the engine never heard of exists all the same (runtime.mark_missing_nodes says so).
        self._unreadable_nodes: dict[str, str] = {}
        # UIDs of the pods cellfit chose as preemption victims, until the watch sees them go
        # (oldest dropped past VICTIMS_KEPT: a victim whose deletion was never seen).
        self._victims: dict[str, None] = {}
        # Preemptor records whose writes (records.py ``owed``) this process made or finished, by
        # text (oldest dropped past VICTIMS_KEPT): a later list or binding reading them leaves them.
        self._settled: dict[str, None] = {}
        # Pods being deleted -> when free_by_node or leaving_pods first saw them so (monotonic):
        # a pod still there its grace period and LEAVING_MARGIN_SECONDS later is stuck (a
        # finalizer, a kubelet that never confirms) and holds its room again.
        self._leaving_since: dict[str, float] = {}
        # Called, under the lock, when a victim's deletion or end has been applied to the engine
        # (nudge.VictimRequeue.victims_gone); None: nobody to tell.
        self.on_victims_gone: Callable[[], None] | None = None
        # Called, under the lock, when a room hold that kept pods off ended without its pod's
        # binding (nudge.VictimRequeue.hold_ended): kube-scheduler parked those pods. None: nobody to tell.
        self.on_hold_ended: Callable[[], None] | None = None
        self._hold_expiry: threading.Timer | None = None
        self._stopped = False
        # Called, under the lock, after each pods list has been applied whole (a restart's first
        # relist recovers every binding): HiveD then judges what waited for it (node_troubles.py).
        self.on_pods_listed: Callable[[], None] | None = None
        if isinstance(engine, FollowsPreemptorRecords):
            # A hold rebuilt from the pods' records: its victims watched as the verb's are; an
            # ended hold's record cleared off its pod, in the background (preemptor_records.py).
            engine.follow_preemptor_records(watch_victims=self.remember_victims, clear_record=self._clear_preemptor_record,
                                            finish_owed=self._finish_owed)
        if isinstance(engine, FollowsHoldEnds):
            engine.follow_hold_ends(ended=self._hold_ended)
        if isinstance(engine, FollowsResumeHolds):
            # The resume holds given and ended here, on their Jobs, in the background (preemptor_records.py).
            engine.follow_resume_holds(write=self._write_resume_holds)
        self.nodes: Reflector[wire.Node] = self._reflector(
            api, "nodes", wire.NODE_DECODER,
            replace=self._paced(self._replacing_nodes), apply=self._apply_node, delete=self._delete_node,
        )
        # The assumptions (PodStore.assume) made before the pods' latest list began: a pod among
        # them that the watch never showed and the list does not show is gone.
        self._assumed_before_list = 0
        self._job_uids: set[str] = set()
        # The pods-bound records the bind verb writes (_note_bound_here), under _runs_lock (never
        # held across a call, so the bind verb never waits for a watch's step): the present run
        # of each Job AlloX started, by Job UID; the pods of each Job this replica bound, by Job
        # UID (forgotten with the pod); pods it bound before its watch showed them (oldest
        # dropped past VICTIMS_KEPT); and the run whose record this replica wrote or is writing.
        self._runs_lock = threading.Lock()
        self._allox_runs: dict[str, _AlloxRun] = {}
        self._bound_here: dict[str, dict[str, float]] = {}  # Job UID -> pod UID -> bound at (_note_bound_here)
        self._bound_unseen: dict[str, float] = {}
        self._recording: dict[str, str] = {}
        self.interchangeable: InterchangeableJobs | None = InterchangeableJobs() if interchangeable_jobs else None
        self._sampling_pods: SamplingPods | None = None if self.interchangeable is None else self.interchangeable.sampling_pods
        self.pods: Reflector[wire.Pod] | Reflector[WatchedPod] = self._pods_reflector(api)
        self.jobs: Reflector[WatchedJob] | None = None
        if jobs is not None or self.interchangeable is not None:
            self.jobs = _decoded_reflector(
                lambda token: api.list_raw("jobs", limit=LIST_PAGE_SIZE, continue_token=token),
                lambda version: api.watch("jobs", resource_version=version), WatchedJob.decode,
                name="jobs", replace=self._replace_jobs, apply=self._apply_job, delete=self._delete_job,
                version_of=lambda watched: watched.job.metadata.resourceVersion,
            )
        self._job_tracker = jobs

    def _pods_reflector(self, api: KubernetesApi) -> Reflector:  # type: ignore[type-arg]
        """The one pod watch: of the pods not finished, read as the engine reads them; with the
        estimator on, of every pod, sampling pods passed on to it (finished ones included)."""
        feed = self._sampling_pods
        if feed is None:
            return _decoded_reflector(
                self._list_pods_page, lambda version: api.watch("pods", resource_version=version), wire.POD_DECODER.decode,
                name="pods", replace=self._finishing_recorded_gangs(self._paced(self._replacing_pods)), apply=self._apply_pod,
                delete=self._delete_pod,
                decode_event=_one_pass(wire.POD_DECODER),
            )
        return _decoded_reflector(
            self._list_pods_page, lambda version: api.watch("all-pods", resource_version=version), WatchedPod.decode,
            name="pods", replace=self._finishing_recorded_gangs(functools.partial(self._replace_watched_pods, feed=feed)),
            apply=functools.partial(self._apply_watched_pod, feed=feed), delete=functools.partial(self._delete_watched_pod, feed=feed),
            decode_event=WatchedPod.decode_event, version_of=lambda watched: watched.pod.metadata.resourceVersion,
        )

    def pace_on(self, pacing: Pacing) -> None:
        """Relists are driven by ``pacing`` from now on (the server's: ``pacing.OnLoop`` over the
        event loop its verbs run on)."""
        self._pacing = pacing

    def _paced(self, pass_over: Callable[[Sequence[T]], Steps]) -> Callable[[Sequence[T]], None]:
        """A reflector's ``replace``: the pass ``pass_over`` makes of a list, driven by this
        cache's pacing at the time of the list."""
        return lambda listed: self._pacing.run(pass_over(listed))

    def _reflector(
        self,
        api: KubernetesApi,
        kind: Kind,
        object_decoder: msgspec.json.Decoder[Any],
        *,
        replace: Callable[[Sequence[Any]], None],
        apply: Callable[[Any], None],
        delete: Callable[[Any], None],
    ) -> Reflector:  # type: ignore[type-arg]
        """List-then-watch of one kind, the same way for every kind the cache follows."""
        return api_reflector(api, kind, object_decoder, name=kind, replace=replace, apply=apply, delete=delete)

    # ------------------------------------------------------------------ Jobs

    def _replace_jobs(self, listed: Sequence[WatchedJob]) -> None:
        gone: list[str] = []
        self._pacing.run(self._replacing_jobs(listed, gone=gone))
        self._finish_recorded_gangs()  # the Jobs' records of their gang members, once the pods are listed too
        if self.interchangeable is not None:
            # Here, in the watch's thread (feed.JobSubscriber), not a step of the verbs' loop:
            # the estimator decodes every interchangeable Job whole, ~15 ms for 1,000.
            for uid in gone:  # deleted while the watch was down: passed on as any deletion is
                self.interchangeable.delete(uid)
            self.interchangeable.replace({
                watched.job.metadata.uid: raw for watched in listed if (raw := _interchangeable(watched)) is not None
            })

    def _replacing_jobs(self, listed: Sequence[WatchedJob], *, gone: list[str]) -> Steps:
        """The engine's part of a Jobs' relist; ``gone`` gets the UIDs it no longer lists."""
        uids: set[str] = set()
        for watched in listed:  # decoded here, one a step: see _replacing_nodes
            uids.add(watched.job.metadata.uid)
            yield
        with self._lock:
            gone.extend(self._job_uids - uids)  # deleted while the watch was down
        for uid in gone:  # one object per hold of the lock: see _replacing_pods
            self._under_lock(functools.partial(self._forget_job, uid))
            yield
        for watched in listed:
            self._under_lock(functools.partial(self._track_job, watched.job))
            yield

    def _apply_job(self, watched: WatchedJob) -> None:
        self._under_lock(lambda: self._track_job(watched.job))
        if self.interchangeable is not None:  # outside the engine's lock: the estimator never takes it
            self.interchangeable.apply(watched.job.metadata.uid, _interchangeable(watched))

    def _delete_job(self, watched: WatchedJob) -> None:
        uid = watched.job.metadata.uid
        self._under_lock(lambda: self._forget_job(uid))
        if self.interchangeable is not None:
            self.interchangeable.delete(uid)

    def _track_job(self, job: wire.Job) -> None:
        self._job_uids.add(job.metadata.uid)
        self._follow_gang_preempted(job)
        self._follow_allox_run(job)
        if self._job_tracker is not None:
            self._job_tracker.apply_job(translate.job_info(job))

    def _forget_job(self, uid: str) -> None:
        self._job_uids.discard(uid)
        self._gang_preempted.pop(uid, None)
        with self._runs_lock:
            self._allox_runs.pop(uid, None)
            self._bound_here.pop(uid, None)
            self._recording.pop(uid, None)
        if self._job_tracker is not None:
            self._job_tracker.delete_job(uid)

    def _follow_gang_preempted(self, job: wire.Job) -> None:
        """The Job's record of its gang members still to delete (gang_records.py), kept for the
        looks at the records, and a look planned once the youngest of its decisions is old enough
        (an older one is the next look's: a list's, or one planned already). Under the lock."""
        uid = job.metadata.uid
        text = (job.metadata.annotations or {}).get(ANNOTATION_GANG_PREEMPTED)
        if not text:
            self._gang_preempted.pop(uid, None)
            return
        self._gang_preempted[uid] = (JobRef(uid=uid, namespace=job.metadata.namespace, name=job.metadata.name), text)
        try:
            named = gang_records.decode(text)
        except InvalidAnnotation:
            return
        now = time.time()
        later = [left.at + GANG_RECOVERY_AFTER_SECONDS for left in named.values() if left.at + GANG_RECOVERY_AFTER_SECONDS > now]
        if later and self._pods_listed:
            self._look_again_at(min(later), now=now)

    @property
    def reflectors(self) -> list[Reflector]:  # type: ignore[type-arg]
        return [r for r in (self.nodes, self.pods, self.jobs) if r is not None]

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        log.info("watching the cluster", extra={"source": self._api.source, "kinds": [r.kind for r in self.reflectors]})
        for reflector in self.reflectors:
            reflector.start()
        if isinstance(self._engine, FollowsHoldEnds):
            self._look_at_holds_later()

    def stop(self) -> None:
        for reflector in self.reflectors:
            reflector.stop()
        self._writes.shutdown()
        self._bind_writes.shutdown()
        with self._lock:
            recheck, self._gang_recheck = self._gang_recheck, None
            self._stopped = True
            expiry, self._hold_expiry = self._hold_expiry, None
        if recheck is not None:
            recheck[0].cancel()
        if expiry is not None:
            expiry.cancel()

    def _look_at_holds_later(self) -> None:
        with self._lock:
            if self._stopped:
                return
            timer = threading.Timer(HOLD_EXPIRY_LOOK_SECONDS, self.look_at_holds)
            timer.daemon = True
            self._hold_expiry = timer
        timer.start()

    def look_at_holds(self) -> None:
        """The room holds past their time given up (each that kept pods off tells
        :meth:`_hold_ended`), and the next look planned."""
        engine = self._engine
        if isinstance(engine, FollowsHoldEnds):
            listed = self.nodes_synced()
            with self._lock:
                engine.expire_holds(nodes_listed=listed)
        self._look_at_holds_later()

    def _hold_ended(self, what: str, node: str, why: str) -> None:
        """A room hold that kept pods off ended without its pod's binding (user26): logged, and the
        requeue signal asked for, as kube-scheduler parked the pods it kept off and no cluster event
        tells it the room is free. Under the lock."""
        log.info("room hold ended without its pod bound: the pods it kept off are requeued",
                 extra={"held": what, "node": node, "why": why})
        if self.on_hold_ended is not None:
            self.on_hold_ended()

    def nodes_synced(self) -> bool:
        """The node list has been read and every node of it applied (the engine's, and under
        HiveD discovery the cells' too): the reflector is marked synced only once the paced
        pass over the list (``_replacing_nodes``, one node a step) has ended. Before that,
        ``allocatable_by_node`` may hold only some of the nodes."""
        return self.nodes.synced.is_set()

    def ready(self) -> tuple[bool, str]:
        waiting = [r.kind for r in self.reflectors if not r.synced.is_set()]
        if waiting:
            return False, f"watch cache not synced yet: {', '.join(waiting)}"
        return True, "watch cache synced"

    def sizes(self) -> Mapping[str, int]:
        """Objects the watch cache holds, by kind (the cellfit_cache_objects gauge)."""
        return {"nodes": len(self._node_names), "pods": len(self._pods), "jobs": len(self._job_uids)}

    def capacity(self, selector: Mapping[str, str] | None = None) -> Resources:
        """The allocatable resources of every node the cache holds (carrying every label of
        ``selector``), summed."""
        return sum(self.allocatable_by_node(selector).values(), ZERO)

    def allocatable_by_node(self, selector: Mapping[str, str] | None = None) -> dict[str, Resources]:
        """The allocatable resources of each node the cache holds (carrying every label of
        ``selector``): AlloX tells a pod no one of them holds that it never fits."""
        with self._lock:
            return {name: allocatable for name, allocatable in self._allocatable.items()
                    if all(self._labels.get(name, {}).get(k) == v for k, v in (selector or {}).items())}

    def node_labels(self, selector: Mapping[str, str] | None = None) -> list[Mapping[str, str]]:
        """The labels of each node the cache holds that carries every label of ``selector``: the
        estimator tells a configuration whose required node affinity none meets that it never runs."""
        with self._lock:
            return [labels for labels in self._labels.values() if all(labels.get(k) == v for k, v in (selector or {}).items())]

    def unreadable_nodes(self) -> dict[str, str]:
        """Each node whose latest version the cache could not translate -> why (the field and
        the value, e.g. a malformed allocatable)."""
        with self._lock:
            return dict(self._unreadable_nodes)

    def nodes_carrying(self, selector: Mapping[str, str] | None) -> frozenset[str] | None:
        """The nodes the cache holds that carry every label of ``selector``; ``None`` for no
        selector (every node, whichever comes)."""
        if not selector:
            return None
        with self._lock:
            return frozenset(name for name in self._allocatable
                             if all(self._labels.get(name, {}).get(k) == v for k, v in selector.items()))

    def free_by_node(
        self, selector: Mapping[str, str] | None = None, *, except_owners: frozenset[str] = frozenset(),
        leaving_within: float = 0.0,
    ) -> dict[str, Resources]:
        """What each Ready, uncordoned node (carrying every label of ``selector``) has left:
        allocatable less the requests of the pods bound to it, except pods whose controller's
        UID is in ``except_owners`` (AlloX admission counts its running Jobs as busy machines
        of their own, bound yet or not) and pods leaving (:meth:`leaving_pods`) whose grace period
        is at most ``leaving_within`` seconds: their room is free within that, and a pod started
        onto it waits no longer than that for it; one still there its grace period and
        :data:`LEAVING_MARGIN_SECONDS` after this cache first saw it leaving holds its room."""
        with self._lock:
            nodes = sorted(
                name for name in self._schedulable
                if all(self._labels.get(name, {}).get(k) == v for k, v in (selector or {}).items())
            )
            used: dict[str, Resources] = {}
            leaving = self._leaving_soon(leaving_within) if leaving_within > 0 else frozenset()
            for pod in self._pods.pods():
                if pod.owner is not None and pod.owner.uid in except_owners:
                    continue
                if pod.uid in leaving:
                    continue
                if pod.holds_resources and pod.node_name in self._schedulable:
                    used[pod.node_name] = used.get(pod.node_name, ZERO) + pod.requests
            return {name: self._allocatable[name] - used.get(name, ZERO) for name in nodes}

    def leaving_pods(self, *, within: float) -> frozenset[str]:
        """The UIDs of the bound pods being deleted (terminating) whose grace period is at most
        ``within`` seconds: AlloX counts their room free (:meth:`free_by_node`), as it does their
        HiveD cells."""
        with self._lock:
            return self._leaving_soon(within)

    def _leaving_soon(self, within: float) -> frozenset[str]:
        """The bound pods being deleted with a grace period of at most ``within`` seconds that
        are not past it and :data:`LEAVING_MARGIN_SECONDS` since first seen leaving. Under the lock."""
        now = time.monotonic()
        since, seen = self._leaving_since, {}
        soon = []
        for pod in self._pods.pods():
            if not (pod.terminating and pod.holds_resources):
                continue
            first = seen[pod.uid] = since.get(pod.uid, now)
            if pod.grace_period_seconds <= within and now - first <= pod.grace_period_seconds + LEAVING_MARGIN_SECONDS:
                soon.append(pod.uid)
        self._leaving_since = seen  # pods no longer leaving are forgotten
        return frozenset(soon)

    def pods_owned_by(self, owners: frozenset[str]) -> frozenset[str]:
        """The UIDs of the pods whose controller's UID is in ``owners`` (AlloX admission gives
        its running Jobs' HiveD bookings back to their VC, as free_by_node's ``except_owners``)."""
        with self._lock:
            return frozenset(pod.uid for pod in self._pods.pods() if pod.owner is not None and pod.owner.uid in owners)

    def job_pods(self, owners: frozenset[str], selector: Mapping[str, str] | None = None) -> dict[str, JobPods]:
        """Per controller UID in ``owners``, its pods the cache holds (it forgets finished ones):
        bound to a node carrying every label of ``selector`` (AlloX's nodes), bound elsewhere,
        not bound yet or bound to a node the cache no longer has (placer/holding.py: whether a started Job still holds AlloX's machines)."""
        counts: dict[str, list[int]] = {}
        with self._lock:
            for pod in self._pods.pods():
                if pod.owner is None or pod.owner.uid not in owners or pod.phase in TERMINAL_PHASES:
                    continue
                row = counts.setdefault(pod.owner.uid, [0, 0, 0])
                if pod.node_name is None or pod.node_name not in self._labels:
                    row[2] += 1  # a pod on a deleted node runs nowhere: its replacement waits to be placed
                elif all(self._labels[pod.node_name].get(k) == v for k, v in (selector or {}).items()):
                    row[0] += 1
                else:
                    row[1] += 1
        return {uid: JobPods(here=here, elsewhere=elsewhere, unbound=unbound) for uid, (here, elsewhere, unbound) in counts.items()}

    def best_effort_gpus(self, selector: Mapping[str, str] | None = None) -> BestEffortGpus:
        """The best-effort pods holding GPUs on the nodes ``selector`` names, as trial Jobs may
        count on them (placer controller, ``choose_for_trial``): each preemptible one's grace
        period, and how many are terminating already (preempted, or deleted: their GPUs free
        without another preemption)."""
        graces: list[float] = []
        leaving = 0
        with self._lock:
            for pod in self._pods.pods():
                if not (pod.holds_resources and pod.requests.gpus > 0
                        and job_class_or_best_effort(pod.labels) is JobClass.BEST_EFFORT
                        and all(self._labels.get(pod.node_name or "", {}).get(k) == v for k, v in (selector or {}).items())):
                    continue
                if pod.terminating:
                    leaving += 1
                else:
                    graces.append(float(pod.grace_period_seconds))
        return BestEffortGpus(graces=tuple(graces), leaving=leaving)

    # ------------------------------------------------------------------ ClusterGateway

    async def find_pod(self, namespace: str, name: str) -> PodInfo | None:
        with self._lock:
            found = self._pods.named(namespace, name)
            if found is not None:
                return found
        # Not seen yet (the watch may lag the scheduler by a few milliseconds): ask the API.
        pod = await self._api.get_pod(namespace, name)
        return None if pod is None else translate.pod_info(pod, gpu_resource=self._gpu_resource)

    async def bind(self, *, namespace: str, name: str, uid: str, node_name: str, annotations: dict[str, str]) -> None:
        """Bind the pod; a binding the watch already shows made counts as made, whatever the
        call answered (its answer lost to a reset connection or the client's timeout, a 5xx after
        the write): the bind verb hands a failed binding's reservation back, and the watch, having
        shown the pod bound, would not book it again until the pod changes (see _apply_info).
        First, where the binding leaves the pod's preemption record on it, the gang members it
        names that still run are named on their Jobs (:meth:`_name_on_jobs_before_binding`)."""
        await self._name_on_jobs_before_binding(uid, annotations.get(ANNOTATION_PREEMPTOR_HOLD))
        asked_at = _wall_clock()  # the binding is made after this: see _note_bound_here
        try:
            await self._api.create_binding(namespace=namespace, name=name, uid=uid, node_name=node_name, annotations=annotations)
            self._note_bound_here(uid, bound_at=asked_at)
        except CellfitError as error:
            with self._lock:
                shown = self._bound_as_shown(uid, node_name)
            if shown is None:
                # The verb hands the reservation back once this raises; the watch may record the
                # pod bound before it does (the watch thread between this look and the hand-back):
                # looked at again once the verb is done with it.
                asyncio.get_running_loop().call_soon(self._book_if_shown_bound, uid, node_name)
                raise
            log.warning("binding failed as the watch shows it made; taken as made",
                        extra={"pod": f"{namespace}/{name}", "node": node_name, "reason": str(error)})
            self._note_bound_here(uid, bound_at=asked_at)

    async def _name_on_jobs_before_binding(self, uid: str, text: str | None) -> None:
        """Before the binding of the preemptor ``uid``: the gang members elsewhere that ``text``,
        the record its binding leaves on it (bound_records.py), names and that still run, named on
        their Jobs (gang_records.py), whichever replica binds. The record lasts only as long as the
        pod, a trial pod's short run, and a replica that only watched it arrive (no list read it)
        named nobody: every replica down from the binding until after the pod finished, no list
        showed the record again, and the member ran for ever beside its deleted gang-mates.
        Before the binding, not after it in the background, so a replica killed the moment after
        its binding has named them; waited for :data:`NAMING_BEFORE_BINDING_SECONDS` at most, the
        writes going on past it. A write given up after its tries is logged, and the binding made
        all the same (the record is still on the pod for the replicas that list it)."""
        if not text:
            return
        with self._lock:
            preemptor = self._pods.get(uid)
            left = None if preemptor is None else self._members_still_running(preemptor, text)
        if preemptor is None or left is None or not left.to_name:
            return
        to_name = left.to_name

        def name_all() -> None:
            for job, added in to_name:
                self._write_gang_preempted_now(job, added=added, gone=())

        # On the bind writes' own threads (writes.py): a hanging API holds none of asyncio's;
        # their naming lane, behind no pods-bound record.
        writing = asyncio.wrap_future(self._bind_writes.submit(name_all, lane=NAMING))
        try:
            await asyncio.wait_for(asyncio.shield(writing), timeout=NAMING_BEFORE_BINDING_SECONDS)
        except TimeoutError:
            log.warning("binding a preemptor before the gang members its record names are named on their Jobs: the writes go on",
                        extra={"pod": preemptor.key, "jobs": sorted(job.key for job, _ in to_name)})

    # ------------------------------------------------------------------ pods-bound records

    def _follow_allox_run(self, job: wire.Job) -> None:
        """The present run of a Job AlloX started, as the Jobs watch shows it (another Job's is
        forgotten), and its pods-bound record written where a pod this replica bound runs for it
        and the record names an earlier run: the Job's update showing its start may come after
        the binding. Under the lock."""
        meta = job.metadata
        annotations = meta.annotations or {}
        start_time = job.status.startTime if job.status is not None else None
        with self._runs_lock:
            if ANNOTATION_PLACEMENT not in annotations or not start_time or (meta.labels or {}).get(LABEL_JOB_CLASS) == JOB_CLASS_TRIAL:
                self._allox_runs.pop(meta.uid, None)
                return
            started = timestamp(start_time)
            self._allox_runs[meta.uid] = _AlloxRun(job=JobRef(uid=meta.uid, namespace=meta.namespace, name=meta.name),
                                                    start_time=start_time, recorded=bound_in_this_run(annotations, start_time),
                                                    start_second=None if started is None else math.floor(started))
            to_record = self._run_to_record(meta.uid) if meta.uid in self._bound_here else None
        if to_record is not None:
            self._record_pods_bound(*to_record)

    def _note_bound_here(self, uid: str, shown: PodInfo | None = None, *, bound_at: float) -> None:
        """After this replica bound the pod ``uid`` (``shown``: as its watch first shows it, for
        one the watch had not shown at the binding), the binding asked for at ``bound_at`` (this
        replica's clock): where its Job is one AlloX started whose pods-bound record does not
        name this run yet, the record written, in the background (the binding is not held up).
        Whichever replica kube-scheduler's bind call reaches, leader or not, so that a restart or
        a new leader finds the record even where no leader saw the pod bound (it bound while none
        led, and left its node since: node deleted, pod evicted), and does not suspend the Job
        again as one none of whose pods was bound. Nothing is asked of the API server for another
        pod, nor for a Job whose record names this run."""
        pod = shown if shown is not None else self._pods.get(uid)
        with self._runs_lock:
            if pod is None:  # the watch has not shown it yet: looked at when it does (_apply_info)
                self._bound_unseen[uid] = bound_at
                while len(self._bound_unseen) > VICTIMS_KEPT:
                    del self._bound_unseen[next(iter(self._bound_unseen))]
                return
            owner = pod.owner
            if owner is None or owner.kind != "Job" or pod.labels.get(LABEL_JOB_CLASS) == JOB_CLASS_TRIAL:
                return
            self._bound_here.setdefault(owner.uid, {})[uid] = bound_at
            to_record = self._run_to_record(owner.uid, shown=shown)
        if to_record is not None:
            self._record_pods_bound(*to_record)

    def _run_to_record(self, job_uid: str, *, shown: PodInfo | None = None) -> tuple[JobRef, str] | None:
        """The Job and the run whose pods-bound record this replica is to write now: an AlloX
        run its record does not name, one of whose pods this replica bound since the run began
        and the watch shows (or shows now: ``shown``) neither finished nor being deleted, and not
        being written here already. Under _runs_lock.

        A pod of an earlier run is deleted by the suspension, but the two watches are separate
        streams: the Jobs watch may show the Job started again (a new status.startTime) before
        the pods watch shows the earlier run's pod being deleted (review28b #1). Such a pod was
        bound before its run was suspended, so before the next one began: a pod counts only if
        its binding was asked for (_note_bound_here's ``bound_at``) in the run's starting second
        or later (whole seconds, as the API server writes startTime). A pod of this run is
        created by the Job controller after it took the run's start, and its binding asked for
        after a filter pass over it: by this replica's clock, later than the start by that much
        less the clocks' skew (NTP: milliseconds). A skew beyond that only leaves the record to
        the next binding of a pod of the run, or to the leader (placer/controller.py
        ``_record_bound``); counting the earlier run's pod would need a skew beyond that run's
        rest and its suspension, and let a run none of whose pods binds go unsuspended."""
        run = self._allox_runs.get(job_uid)
        if run is None or run.recorded or run.start_second is None or self._recording.get(job_uid) == run.start_time:
            return None
        start_second = run.start_second
        for uid, bound_at in self._bound_here.get(job_uid, {}).items():
            if math.floor(bound_at) < start_second:
                continue  # bound before this run began: a pod of an earlier one
            pod = shown if shown is not None and shown.uid == uid else self._pods.get(uid)
            if pod is not None and not pod.terminating and pod.phase not in TERMINAL_PHASES:
                break
        else:
            return None
        self._recording[job_uid] = run.start_time
        return run.job, run.start_time

    def _record_pods_bound(self, job: JobRef, start_time: str) -> None:
        """The Job's pods-bound record (``cellfit.io/pods-bound``) made to name the run that
        started at ``start_time``, on the bind writes' threads: a JSON Patch testing the Job's UID
        and start, so a Job deleted, re-created under its name, or started again since is left
        as it is; tried again while the API server fails for a moment. A write that fails is
        logged (the leader records it when it sees the pod bound: placer/controller.py
        ``_record_bound``) and made again by the next binding or Job update that asks for it."""
        operations = [{"op": "test", "path": "/metadata/uid", "value": job.uid},
                      {"op": "test", "path": "/status/startTime", "value": start_time},
                      {"op": "add", "path": annotation_pointer(ANNOTATION_PODS_BOUND), "value": start_time}]

        def write() -> None:
            try:
                _retried(lambda: self._api.patch_job(namespace=job.namespace, name=job.name, operations=operations),
                         pauses=COUNT_WRITE_PAUSES_SECONDS)
            except CellfitError as error:
                if isinstance(error, KubernetesApiError) and error.status in (404, 422):
                    log.debug("pods-bound record not written: the Job is gone, or started again since",
                              extra={"job": job.key, "reason": str(error)[:300]})
                    return
                with self._runs_lock:
                    if self._recording.get(job.uid) == start_time:
                        del self._recording[job.uid]
                log.warning("could not record on a Job that a pod of its run was bound (cellfit.io/pods-bound); "
                            "the leader records it when it sees the pod bound",
                            extra={"job": job.key, "reason": str(error)[:300]})

        self._bind_writes.submit(write, lane=RECORDS)

    def _bound_as_shown(self, uid: str, node_name: str) -> PodInfo | None:
        """The pod as the watch shows it, if bound to ``node_name`` and holding it. Under the lock."""
        shown = self._pods.get(uid)
        return shown if shown is not None and shown.node_name == node_name and shown.holds_resources else None

    def _book_if_shown_bound(self, uid: str, node_name: str) -> None:
        """After a failed binding's hand-back: the pod booked again if the watch shows it bound."""
        with self._lock:
            shown = self._bound_as_shown(uid, node_name)
            if shown is not None:
                self._engine.apply_pod(shown)

    def record_preemption(
        self,
        *,
        preemptor: PodInfo,
        preemptor_messages: Sequence[str],
        victims: Sequence[PodInfo],
        victim_message: str,
        job_counts: Sequence[tuple[JobInfo, int]],
        preemptor_record: str | None = None,
        victim_messages: Mapping[str, str] | None = None,
        preempt: Sequence[PodInfo] = (),
        resume_holds: Sequence[tuple[JobRef, Mapping[str, str]]] = (),
    ) -> None:
        """The preemptor's record of the decision (first: a restart may follow at once), the
        victims' Job counts and their Jobs' resume holds (``resume_holds``: victim UID -> node,
        by Job; preemptor_records.py), the victims kube-scheduler does not delete (``preempt``: a gang's
        members on other nodes, marked DisruptionTarget and deleted with their grace period, as
        kube-scheduler deletes its own) and Events on both sides (each victim's ``victim_messages``
        entry, by UID, else ``victim_message``), written in the background."""
        told = dict(victim_messages or {})
        if preemptor_record is not None:
            self._settle(preemptor_record)  # written below: a binding or a list here finishes nothing of it

        def write() -> None:
            if preemptor_record is not None and preemptor.annotations.get(ANNOTATION_PREEMPTOR_HOLD) != preemptor_record:
                self._attempt(
                    lambda: _retried(lambda: write_preemptor_record(self._api, pod=preemptor, record=preemptor_record),
                                     pauses=COUNT_WRITE_PAUSES_SECONDS),
                    what=f"preemption record on {preemptor.key}",
                )
            for job, count in job_counts:
                self._attempt(
                    lambda: _retried(lambda: self._raise_preemption_count(job, count), pauses=COUNT_WRITE_PAUSES_SECONDS),
                    what=f"job {job.key} preemption count",
                )
            for held_job, holds in resume_holds:
                self._write_resume_holds_now(held_job, added=holds, ended=())
            for victim in preempt:
                if self._preempt(victim, message=told.get(victim.uid, victim_message)) is None:
                    self._member_given_up(victim.uid, preemptor=preemptor, record=preemptor_record)
                else:  # named on its Job meanwhile by a replica that read the young record
                    self._deleted_from_jobs(victim)
            for message in preemptor_messages:
                self._attempt(
                    lambda: self._api.create_event(
                        namespace=preemptor.namespace, pod_name=preemptor.name, pod_uid=preemptor.uid, reason="Preempting", message=message
                    ),
                    what=f"event on {preemptor.key}",
                )
            for victim in victims:
                self._tell_preempted(namespace=victim.namespace, name=victim.name, uid=victim.uid,
                                     message=told.get(victim.uid, victim_message), owner=victim.owner)

        self._writes.submit(write)

    def _tell_preempted(self, *, namespace: str, name: str, uid: str, message: str, owner: OwnerRef | None) -> None:
        """The victim's ``Preempted`` Event, under its one name (preemptor_records.preempted_event_name):
        made already (by the deciding replica, or another that finished its record) is done; and
        its Job's (``owner``: preempted_jobs.py). On the writer thread."""
        def create() -> None:
            try:
                self._api.create_event(namespace=namespace, pod_name=name, pod_uid=uid, reason="Preempted", message=message,
                                       warning=True, name=preempted_event_name(name, uid))
            except KubernetesApiError as error:
                if error.status != 409:
                    raise

        self._attempt(create, what=f"event on {namespace}/{name}")
        self._attempt(lambda: tell_job_of_preempted(self._api, namespace=namespace, pod_name=name, pod_uid=uid, owner=owner, message=message),
                      what=f"event on the Job of {namespace}/{name}")

    def _settle(self, text: str) -> None:
        """The record ``text``'s writes are made here (or queued): not finished again. Under the lock."""
        settled = self._settled
        settled[text] = None
        while len(settled) > VICTIMS_KEPT:
            del settled[next(iter(settled))]

    def _finish_owed(self, preemptor: PodInfo, text: str) -> None:
        """What the preemptor's record owes (records.py ``owed``: its victims' Jobs' counts and
        resume holds, the victims' Preempted Events) written in the background, as the replica
        that decided would have: it may have been killed after the record (user26). Each write is
        one a second writer leaves as it is (preemptor_records.py), so the deciding replica still
        at work, or another finisher, adds nothing. Nothing for a record this process wrote or
        finished, one that does not read or owes nothing, or one on a pod of another scheduler.
        Called under the engine lock (by the bind verb's reservation too): it does not wait."""
        if text in self._settled or preemptor.scheduler_name != self._scheduler_name:
            return
        try:
            record = records.decode(text)
        except InvalidAnnotation:
            return
        if record is None or not record.owed:
            return
        self._settle(text)
        owed = record.owed
        log.info("finishing a preemption recorded on its preemptor: its victims' Job counts, resume holds and Events",
                 extra={"pod": preemptor.key, "node": record.node, "jobs": sorted(f"{job.namespace}/{job.name}" for job in owed.jobs.values())})
        told = finished_preempted_message(preemptor=preemptor.key, node=record.node)
        # A victim's Job, for its PodPreempted Event: the owner of the victim still watched (its
        # apiVersion known); else the record's resume hold, which names it under its Job (one a
        # victim deleted already, the usual case after a restart, still has) and carries no
        # apiVersion: its holds are written to a batch/v1 Job.
        owners: dict[str, OwnerRef | None] = {victim: OwnerRef(kind=JOB_KIND, name=job.name, uid=job_uid, api_version=JOB_API_VERSION)
                                              for job_uid, job in owed.jobs.items() for victim in job.holds}
        owners.update({uid: shown.owner for uid in owed.pods if (shown := self._pods.get(uid)) is not None})
        engine = self._engine
        # Read now, under the engine lock: a hold given here that has ended since is not written back.
        ended = {(job_uid, victim) for job_uid, job in owed.jobs.items() for victim in job.holds
                 if isinstance(engine, FollowsResumeHolds) and engine.resume_hold_ended(job_uid=job_uid, victim_uid=victim)}

        def finish() -> None:
            for job_uid, job in owed.jobs.items():
                counted = JobInfo(uid=job_uid, namespace=job.namespace, name=job.name)
                if job.count > 0:
                    self._attempt(
                        lambda: _retried(lambda: self._raise_preemption_count(counted, job.count), pauses=COUNT_WRITE_PAUSES_SECONDS),
                        what=f"job {counted.key} preemption count",
                    )
                holds = {victim: node for victim, node in job.holds.items() if (job_uid, victim) not in ended}
                if holds:
                    self._write_resume_holds_now(JobRef(uid=job_uid, namespace=job.namespace, name=job.name), added=holds, ended=())
            for victim_uid, key in owed.pods.items():
                namespace, name = key.split("/")
                self._tell_preempted(namespace=namespace, name=name, uid=victim_uid, message=told, owner=owners.get(victim_uid))

        self._writes.submit(finish)

    def _preempt(self, victim: PodInfo, *, message: str) -> Preempted | None:
        """Mark ``victim`` DisruptionTarget, then delete it (that incarnation: its UID guards
        both), each tried again while the API server fails for a moment; what was done (gone
        already or replaced is done), None when the deletion was given up. A mark given up after
        its tries does not stop the deletion: the member's gang-mates are gone, and left running
        it would hold its GPUs for a hung job; the warning says what its Job may count. On the
        writer thread."""
        namespace, name, uid = victim.namespace, victim.name, victim.uid
        try:
            not_there = _retried(
                lambda: write_disruption_target(self._api, namespace=namespace, name=name, uid=uid, message=message, now=time.time()),
                pauses=PREEMPT_PAUSES_SECONDS,
            )
        except CellfitError as error:
            warn_not_marked(namespace=namespace, name=name, error=error)
            not_there = None
        if not_there is not None:
            return not_there
        done: list[Preempted] = []
        self._attempt(
            lambda: done.append(_retried(lambda: delete_preempted(self._api, namespace=namespace, name=name, uid=uid),
                                         pauses=PREEMPT_PAUSES_SECONDS)),
            what=f"preemption of {victim.key}",
        )
        return done[0] if done else None

    def _finishing_recorded_gangs(self, replace: Callable[[Sequence[T]], None]) -> Callable[[Sequence[T]], None]:
        """A pods reflector's ``replace``, then the gang preemptions the listed records left
        unfinished finished (:meth:`_finish_recorded_gangs`)."""
        def replace_then_finish(listed: Sequence[T]) -> None:
            replace(listed)
            with self._lock:
                self._pods_listed = True
            if self.on_pods_listed is not None:
                with self._lock:
                    self.on_pods_listed()
            self._finish_recorded_gangs()

        return replace_then_finish

    def _finish_recorded_gangs(self) -> None:
        """Each gang member a preemptor's record names (``elsewhere``, scheduler/preemption/records.py)
        that still runs, not deleted yet, preempted in the background as the replica that decided
        would have (gang_recovery.py): that replica may have stopped before its writes. Members of
        this replica's own decisions are left to their queued writes, and a record younger than
        :data:`GANG_RECOVERY_AFTER_SECONDS` to the replica that wrote it: looked at again then, its
        members named on their Jobs meanwhile. Read alike: the records kept in memory that no pod
        shows any more (``_gang_records``) and the Jobs' records of their members still to delete
        (``_gang_preempted``, cellfit.io/gang-preempted); nothing before the pods are listed."""
        with self._lock:
            if not self._pods_listed:
                return
            listed = list(self._pods.pods())  # copied in one call, read outside the lock (10,000 pods: ~1 ms)
            kept = [(pod, text) for (_, text), pod in self._gang_records.items()]
            jobs = list(self._gang_preempted.values())
        recorded = [pod for pod in listed if pod.annotations.get(ANNOTATION_PREEMPTOR_HOLD)]
        if not recorded and not kept and not jobs:
            return
        with self._lock:
            for pod in recorded:
                if pod.node_name is None:  # pending: a bound preemptor's binding finished its record
                    self._finish_owed(pod, pod.annotations[ANNOTATION_PREEMPTOR_HOLD])
        now = time.time()
        with self._lock:
            unfinished = unfinished_members(recorded, current=self._pods.get, ours=self._victims.__contains__,
                                            scheduler_name=self._scheduler_name, now=now, after_seconds=GANG_RECOVERY_AFTER_SECONDS,
                                            kept=kept, jobs=jobs)
            for forgotten in unfinished.forgotten:
                self._gang_records.pop(forgotten, None)
            found = unfinished.due
            # Ours from now, in the same hold of the lock: a look at the same time (a relist, the
            # planned one) leaves them to these writes.
            self.remember_victims(unfinished.member.uid for unfinished in found)
        if unfinished.recheck_at is not None:
            self._look_again_at(unfinished.recheck_at, now=now)
        for preemptor, record in unfinished.spent:  # bound, none of the members it names runs
            self._clear_preemptor_record(preemptor, record)
        self._name_on_jobs(unfinished.to_record)
        for job, gone in unfinished.gone_from_jobs:
            self._write_gang_preempted(job, added={}, gone=gone)
        if not found:
            return
        log.warning("finishing gang preemptions recorded on their preemptors: members on other nodes still run",
                    extra={"pods": [unfinished.member.key for unfinished in found]})

        def finish() -> None:
            for unfinished in found:
                member, message = unfinished.member, unfinished.message()
                with self._lock:  # looked at again: another replica's deletion may have been seen since
                    shown = self._pods.get(member.uid)
                if shown is None or shown.terminating or not shown.holds_resources:
                    continue
                preempted = self._preempt(member, message=message)
                if preempted is None:
                    self._member_given_up(member.uid, preemptor=unfinished.preemptor, record=unfinished.record)
                    continue
                self._deleted_from_jobs(member)
                if preempted is not Preempted.DELETED:
                    continue
                # Under its one name: every replica whose look comes at the record's 300 s (each that
                # saw its preemptor end keeps it) preempts the member, and one Event tells it.
                self._tell_preempted(namespace=member.namespace, name=member.name, uid=member.uid, message=message, owner=member.owner)

        self._writes.submit(finish)

    def _member_given_up(self, member_uid: str, *, preemptor: PodInfo | None, record: str | None) -> None:
        """This replica gave up deleting a gang member ``record`` names (the API server failing
        over all its tries): no longer left to its own writes, and looked at again once the
        record is old enough and :data:`GANG_RETRY_AFTER_SECONDS` from now, from memory should its
        preemptor finish or its record go meanwhile, and from its Job's record after a restart. On
        the writer thread."""
        named: list[tuple[JobRef, dict[str, gang_records.LeftMember]]] = []
        with self._lock:
            self._victims.pop(member_uid, None)
            at = None if preemptor is None else self._keep_gang_record(preemptor, record, look=False, named=named)
        for job, added in named:  # here, outside the lock: this is the writer thread
            self._write_gang_preempted_now(job, added=added, gone=())
        now = time.time()
        self._look_again_at(max(now + GANG_RETRY_AFTER_SECONDS, (at or 0.0) + GANG_RECOVERY_AFTER_SECONDS), now=now)

    def _keep_gang_record(
        self, preemptor: PodInfo, text: str | None, *, look: bool = True,
        named: list[tuple[JobRef, dict[str, gang_records.LeftMember]]] | None = None,
    ) -> float | None:
        """Keep ``text``, the preemptor's record, for the later looks while a gang member it names
        elsewhere runs, though no pod shows it any more (``_gang_records``), name those members on
        their Jobs, which outlive the preemptor and this replica's memory (gang_records.py; in the
        background, or handed to the caller in ``named``), and (``look``) plan the look at it once
        it is old enough; its decision's time, or None where it is not kept. Under the lock."""
        left = self._members_still_running(preemptor, text)
        if left is None:
            return None
        kept = self._gang_records
        kept[(preemptor.uid, left.text)] = preemptor
        while len(kept) > VICTIMS_KEPT:
            del kept[next(iter(kept))]
        if named is not None:
            named.extend(left.to_name)
        else:
            for job, added in left.to_name:
                self._write_gang_preempted(job, added=added, gone=())
        if look:
            self._look_again_at(left.at + GANG_RECOVERY_AFTER_SECONDS, now=time.time())
        return left.at

    def _members_still_running(self, preemptor: PodInfo, text: str | None) -> _MembersLeft | None:
        """What ``text``, the preemptor's record, leaves to do: None where it names no gang member
        elsewhere that still runs, does not read, has no decision time, or is on a pod of another
        scheduler. Under the lock."""
        if not text or '"elsewhere"' not in text or preemptor.scheduler_name != self._scheduler_name:
            return None
        try:
            record = records.decode(text)
        except InvalidAnnotation:
            return None
        if record is None or record.at is None:
            return None
        running = [member for member in map(self._pods.get, record.elsewhere) if member is not None and runs(member)]
        if not running:
            return None
        left = gang_records.LeftMember(by=preemptor.key, node=record.node, at=record.at)
        to_name = self._not_named_yet([(JobRef(uid=member.owner.uid, namespace=member.namespace, name=member.owner.name), member.uid, left)
                                       for member in running if member.owner is not None and member.owner.uid in record.gangs])
        return _MembersLeft(text=text, at=record.at, to_name=to_name)

    def _name_on_jobs(self, members: Sequence[tuple[JobRef, str, gang_records.LeftMember]]) -> None:
        """Each gang member (its Job, its UID, its preemption) named on its Job's record of its
        members still to delete, where the Jobs watch does not show it there yet; in the background."""
        with self._lock:
            to_name = self._not_named_yet(members)
        for job, added in to_name:
            self._write_gang_preempted(job, added=added, gone=())

    def _not_named_yet(
        self, members: Sequence[tuple[JobRef, str, gang_records.LeftMember]],
    ) -> list[tuple[JobRef, dict[str, gang_records.LeftMember]]]:
        """Of ``members`` (each one's Job, UID, preemption), those the Jobs watch does not show on
        their Job's record, by Job. Under the lock."""
        by_job: dict[str, tuple[JobRef, dict[str, gang_records.LeftMember]]] = {}
        named: dict[str, Collection[str]] = {}
        for job, uid, left in members:
            if job.uid not in named:
                named[job.uid] = self._named_on_job(job.uid)
            if uid not in named[job.uid]:
                by_job.setdefault(job.uid, (job, {}))[1][uid] = left
        return list(by_job.values())

    def _named_on_job(self, job_uid: str) -> Collection[str]:
        """The member UIDs the Jobs watch shows on the Job's record of its members still to
        delete, read whole: a UID found only as text inside the record (a node's name, another
        field) is not named there; none for a record that does not read, so its members are
        named again. Under the lock."""
        shown = self._gang_preempted.get(job_uid)
        if shown is None:
            return ()
        try:
            return gang_records.decode(shown[1]).keys()
        except InvalidAnnotation:
            return ()

    def _deleted_from_jobs(self, member: PodInfo) -> None:
        """``member``, deleted (or gone already), taken off its Job's record of its members still
        to delete: read from the API (one read; a write only where it is named), as another
        replica may have named it a moment ago, its Jobs watch not showing it yet. On the writer
        thread."""
        owner = member.owner
        if owner is not None:
            self._write_gang_preempted_now(JobRef(uid=owner.uid, namespace=member.namespace, name=owner.name), added={}, gone=(member.uid,))

    def _write_gang_preempted(self, job: JobRef, *, added: Mapping[str, gang_records.LeftMember], gone: Sequence[str]) -> None:
        """:meth:`_write_gang_preempted_now`, in the background: called under the engine lock too."""
        self._writes.submit(lambda: self._write_gang_preempted_now(job, added=added, gone=gone))

    def _write_gang_preempted_now(self, job: JobRef, *, added: Mapping[str, gang_records.LeftMember], gone: Sequence[str]) -> None:
        """The Job's record of its gang members still to delete written, tried again while the API
        server fails for a moment. On the writer thread."""
        self._attempt(
            lambda: _retried(lambda: write_gang_preempted(self._api, job=job, added=added, gone=gone), pauses=COUNT_WRITE_PAUSES_SECONDS),
            what=f"gang members still to delete on job {job.key}",
        )

    def _look_again_at(self, at: float, *, now: float) -> None:
        """:meth:`_finish_recorded_gangs` again at wall-clock ``at`` (one look pending: the earliest)."""
        with self._lock:
            if self._stopped:
                return
            if self._gang_recheck is not None:
                if self._gang_recheck[1] <= at:
                    return
                self._gang_recheck[0].cancel()
            timer = _timer(max(0.0, at - now), self._looked_again)
            timer.daemon = True
            self._gang_recheck = (timer, at)
        timer.start()

    def _looked_again(self) -> None:
        with self._lock:
            self._gang_recheck = None
        self._finish_recorded_gangs()

    def _clear_preemptor_record(self, pod: PodInfo, record: str) -> None:
        """The preemptor's record taken off it (if it carries exactly that one), in the
        background: called under the engine lock, by a verb too. First what it owes is finished
        (:meth:`_finish_owed`: a hold that gave up, lapsed or its node gone, took off the only
        trace of the Jobs' counts, resume holds and Events a killed replica left undone), and a
        gang member it names elsewhere that still runs is left to the later looks from memory
        (:meth:`_keep_gang_record`)."""
        self._finish_owed(pod, record)
        self._keep_gang_record(pod, record)

        def clear() -> None:
            clear_preemptor_record(self._api, pod=pod, record=record)

        self._writes.submit(
            lambda: self._attempt(lambda: _retried(clear, pauses=COUNT_WRITE_PAUSES_SECONDS), what=f"preemption record cleared off {pod.key}")
        )

    def _write_resume_holds(self, job: JobRef, added: Mapping[str, str], ended: tuple[str, ...]) -> None:
        """The Job's record of its resume holds written, in the background: called under the
        engine lock, by a verb too."""
        self._writes.submit(lambda: self._write_resume_holds_now(job, added=added, ended=ended))

    def _write_resume_holds_now(self, job: JobRef, *, added: Mapping[str, str], ended: tuple[str, ...]) -> None:
        """The Job's record of its resume holds written, tried again while the API server fails
        for a moment. On the writer thread."""
        self._attempt(
            lambda: _retried(lambda: write_resume_holds(self._api, job=job, added=added, ended=ended), pauses=COUNT_WRITE_PAUSES_SECONDS),
            what=f"resume holds on job {job.key}",
        )

    def _raise_preemption_count(self, job: JobInfo, count: int) -> None:
        """Write ``count`` as the Job's preemption count unless the Job, as the API server holds it
        now, says as much or more: the count never goes down (a replica that led a moment ago
        writing its older count last) and a write tried again after a lost answer changes
        nothing. The patch tests the resourceVersion read, so a writer in between is read again."""
        for _ in range(COUNT_WRITE_CONFLICTS):
            current = self._api.get_job(namespace=job.namespace, name=job.name)
            if current is None or current.metadata.uid != job.uid:
                return  # deleted, or another Job by that name: not the one preempted
            annotations = current.metadata.annotations
            try:
                written = preemption_count_of(annotations or {})
            except InvalidAnnotation:
                written = -1  # a malformed count is replaced
            if written >= count:
                return
            operations: list[dict[str, Any]] = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": current.metadata.resourceVersion},
                *([{"op": "add", "path": "/metadata/annotations", "value": {}}] if annotations is None else []),
                {"op": "add", "path": wire.annotation_pointer(ANNOTATION_PREEMPTIONS), "value": str(count)},
            ]
            try:
                self._api.patch_job(namespace=job.namespace, name=job.name, operations=operations)
                return
            except KubernetesApiError as error:
                if error.status not in (409, 422):  # 422: the test failed, another writer came first
                    raise
        raise KubernetesApiError(f"job {job.key}: changed under each of {COUNT_WRITE_CONFLICTS} writes of its preemption count", status=409)

    def remember_victims(self, uids: Iterable[str]) -> None:
        """Preemption victims, until the watch sees them go (:attr:`on_victims_gone`)."""
        with self._lock:
            for uid in uids:
                self._victims[uid] = None
            while len(self._victims) > VICTIMS_KEPT:
                del self._victims[next(iter(self._victims))]

    def record_pod_event(self, *, pod: PodInfo, reason: str, message: str, warning: bool) -> None:
        """An Event on the pod, written in the background."""
        self._writes.submit(
            lambda: self._attempt(
                lambda: self._api.create_event(
                    namespace=pod.namespace, pod_name=pod.name, pod_uid=pod.uid, reason=reason, message=message, warning=warning
                ),
                what=f"event {reason} on {pod.key}",
            )
        )

    @staticmethod
    def _attempt(call: Callable[[], None], *, what: str) -> None:
        try:
            call()
        except CellfitError as error:
            log.warning("could not record preemption", extra={"what": what, "reason": str(error)})

    # ------------------------------------------------------------------ reflector callbacks

    def _under_lock(self, action: Callable[[], object]) -> None:
        with self._lock:
            action()

    # A relist is applied as the events it stands for (a delete for each object it no longer
    # lists, an update for each it lists), one event per hold of the engine lock: a verb or
    # /healthz then waits for one event at most, never for a whole list of thousands. The one
    # exception keeps a verb from seeing a node freer than it ever was (see _replacing_pods).

    def _replacing_nodes(self, nodes: Sequence[wire.Node]) -> Steps:
        # The list's items are decoded as they are first read, one a step: read in one step, a
        # list of 5,000 nodes would hold the verbs' loop for ~50 ms.
        listed: set[str] = set()
        for node in nodes:
            listed.add(node.metadata.name)
            yield
        with self._lock:
            gone = (self._node_names | self._unreadable_nodes.keys()) - listed
        for name in gone:
            self._forget_node(name)
            yield
        for node in nodes:
            self._apply_node(node)
            yield

    def _apply_node(self, node: wire.Node) -> None:
        try:
            info = translate.node_info(node, gpu_resource=self._gpu_resource)
        except CellfitError as error:
            log.warning("node skipped", extra={"node": node.metadata.name, "reason": str(error)})
            with self._lock:
                self._unreadable_nodes[node.metadata.name] = str(error)
            return
        with self._lock:
            self._unreadable_nodes.pop(info.name, None)
            self._engine.apply_node(info)
            self._node_names.add(info.name)
            self._allocatable[info.name] = info.allocatable
            self._labels[info.name] = info.labels
            if info.ready and not info.unschedulable:
                self._schedulable.add(info.name)
            else:
                self._schedulable.discard(info.name)

    def _delete_node(self, node: wire.Node) -> None:
        self._forget_node(node.metadata.name)

    def _forget_node(self, name: str) -> None:
        with self._lock:
            self._engine.delete_node(name)
            self._node_names.discard(name)
            self._allocatable.pop(name, None)
            self._labels.pop(name, None)
            self._schedulable.discard(name)
            self._unreadable_nodes.pop(name, None)

    def _list_pods_page(self, token: str | None) -> bytes:
        if token is None:  # a new list
            with self._lock:
                self._assumed_before_list = self._pods.assumption_mark()
        return self._api.list_raw("pods" if self._sampling_pods is None else "all-pods", limit=LIST_PAGE_SIZE, continue_token=token)

    # With the estimator on: each pod to the engine, then each sampling pod to the estimator's
    # feed, in the watch's thread (never a step of the verbs' loop, nor under the engine's lock:
    # the estimator takes its own).

    def _replace_watched_pods(self, listed: Sequence[WatchedPod], *, feed: SamplingPods) -> None:
        samples: dict[str, SamplingPod] = {}
        unreadable: list[str] = []
        self._pacing.run(self._replacing_pods(_engine_pods(listed, samples=samples, unreadable=unreadable)))
        feed.replace(samples, unreadable=unreadable)

    def _apply_watched_pod(self, watched: WatchedPod, *, feed: SamplingPods) -> None:
        self._apply_pod(watched.pod)
        if watched.sample is not None or not watched.labelled:  # a sample that does not read changes nothing
            feed.apply(watched.pod.metadata.uid, watched.sample)

    def _delete_watched_pod(self, watched: WatchedPod, *, feed: SamplingPods) -> None:
        self._delete_pod(watched.pod)
        feed.delete(watched.pod.metadata.uid, watched.sample)

    def _replacing_pods(self, pods: Iterable[wire.Pod]) -> Steps:
        # One event per hold, except where the list shows pods both gone and newly booked on a
        # node, or on nodes a booking links: there its departures and bookings go in one hold.
        # Applied apart, a verb could see that node freer than it ever was (a pod deleted
        # during the outage gone, the pod bound in its place meanwhile not yet applied: HiveD
        # would hand the newcomer's GPUs out a second time). A HiveD gang's pod books its
        # siblings' slots on other nodes too (its bind info), so those nodes go with its own.
        # Arrivals alone only fill nodes up to what they hold; departures alone (pods not
        # listed, listed as finished, or resized to ask less) only empty them down to what they
        # hold: every state between is one a verb may decide on.
        # The list's items are decoded as they are read (LazilyDecoded): a step each, not one
        # pass over the whole list.
        listed: set[str] = set()
        arriving: dict[str | None, list[PodInfo]] = {}
        finished_records: list[wire.Pod] = []
        for pod in _read_once(pods):
            if _finished(pod):  # as the list of unfinished pods would: not listed
                if (pod.metadata.annotations or {}).get(ANNOTATION_PREEMPTOR_HOLD):
                    finished_records.append(pod)  # read below, once the gang members are applied
                yield
                continue
            listed.add(pod.metadata.uid)
            info = self._translated(pod)
            if info is not None:
                arriving.setdefault(info.node_name, []).append(info)
            yield
        with self._lock:
            # Copied in one call; no watch event changes the record while its reflector lists.
            known = list(self._pods.pods())
            # Reserved by the bind verb from the API's answer, never watched, and not listed by a
            # list that began after: deleted while the watch was down (one reserved after the list
            # began may be a pod created since, which the watch will bring).
            assumed = self._pods.unwatched_assumed(before=self._assumed_before_list)
        leaving: dict[str | None, list[str]] = {}
        for start in range(0, len(known), _CHECKS_PER_STEP):
            for record in known[start:start + _CHECKS_PER_STEP]:
                if record.uid not in listed:
                    leaving.setdefault(record.node_name, []).append(record.uid)
            yield
        for record in assumed:
            if record.uid not in listed:
                leaving.setdefault(record.node_name, []).append(record.uid)
        for uid in leaving.pop(None, ()):
            with self._lock:
                self._forget(uid)
            yield
        # Pending pods after the bound ones: a pending pod's reclaim record (cellfit.io/reclaim-booking)
        # is applied on the cells the running pods' bind-info has recovered, as the leader booked it.
        pending = arriving.pop(None, ())
        linked = yield from _linking(arriving, leaving.keys())
        for nodes in linked:
            gone = [uid for node in nodes for uid in leaving.get(node, ())]
            # Popped: the pods read for a node go with its group's step, not all at the pass's end
            # (a relist that changes nothing records none of them).
            here = [info for node in nodes for info in arriving.pop(node, ())]
            if here and (gone or len(here) > 1 or not here[0].holds_resources):
                with self._lock:
                    # Departures: pods no longer listed, listed as finished, or asking less.
                    departing = bool(gone) or any(not info.holds_resources or self._shrinks(info) for info in here)
                    together = departing and any(self._books(info) for info in here)
                    if together:
                        for uid in gone:
                            self._forget(uid)
                        for info in here:
                            self._apply_info(info)
                if together:
                    yield
                    continue
            for uid in gone:
                with self._lock:
                    self._forget(uid)
                yield
            for info in here:
                with self._lock:
                    self._apply_info(info)
                yield
        for info in pending:
            with self._lock:
                self._apply_info(info)
            yield
        for pod in finished_records:
            # A finished preemptor (a list of every pod shows it: the estimator's) whose record
            # names gang members still running: kept for the look that follows the list.
            finished = self._translated(pod)
            if finished is not None:
                with self._lock:
                    self._keep_gang_record(finished, finished.annotations.get(ANNOTATION_PREEMPTOR_HOLD), look=False)
            yield

    def _shrinks(self, info: PodInfo) -> bool:
        """Whether ``info`` asks less of some resource than the record of its pod (an in-place
        resize): applying it frees room. Under the lock."""
        known = self._pods.get(info.uid)
        if known is None or known.node_name != info.node_name:
            return False
        return any(new < old for new, old in zip(info.requests.as_tuple(), known.requests.as_tuple()))

    def _books(self, info: PodInfo) -> bool:
        """Whether applying ``info`` (on a node) books something the engine does not hold yet:
        a pod newly bound there, or changed. Under the lock."""
        if not info.holds_resources:
            return False
        known = self._pods.get(info.uid)
        return known is None or not (known == info or _phase_moved_only(known, info))

    def _apply_pod(self, pod: wire.Pod) -> None:
        if _finished(pod):  # the watch of unfinished pods would show it deleted
            self._delete_pod(pod)
            return
        info = self._translated(pod)
        if info is not None:
            with self._lock:
                self._apply_info(info)

    def _translated(self, pod: wire.Pod) -> PodInfo | None:
        try:
            return translate.pod_info(pod, gpu_resource=self._gpu_resource)
        except CellfitError as error:
            log.warning("pod skipped", extra={"pod": f"{pod.metadata.namespace}/{pod.metadata.name}", "reason": str(error)})
            return None

    def _apply_info(self, info: PodInfo) -> None:
        """Under the lock."""
        if self._bound_unseen and info.uid in self._bound_unseen:  # bound here before the watch showed it
            with self._runs_lock:
                bound_at = self._bound_unseen.pop(info.uid, None)
            if bound_at is not None:
                self._note_bound_here(info.uid, shown=info, bound_at=bound_at)
        if not info.holds_resources and info.node_name is not None:
            self._forget(info.uid)  # finished: nothing left to account for
            return
        known = self._pods.get(info.uid)
        if info.node_name is not None and known is not None:
            # Most watch events of a bound pod change nothing a decision reads (its conditions,
            # IP, container statuses), and a relist lists every pod again: the engine has it.
            # (A pending pod's are applied: a binding that failed may have made the engine
            # forget it while this cache still holds it.)
            if known == info:
                return
            if _phase_moved_only(known, info):  # the kubelet's Running after every binding
                self._pods.record(info)
                return
        self._pods.record(info)
        self._engine.apply_pod(info)

    def _delete_pod(self, pod: wire.Pod) -> None:
        with self._lock:
            self._forget(pod.metadata.uid)

    def _forget(self, uid: str) -> None:
        known = self._pods.get(uid)
        if known is not None and known.owner is not None and known.owner.uid in self._bound_here:
            with self._runs_lock:
                bound = self._bound_here.get(known.owner.uid)
                if bound is not None:
                    bound.pop(uid, None)
                    if not bound:
                        del self._bound_here[known.owner.uid]
        recorded = known.annotations.get(ANNOTATION_PREEMPTOR_HOLD) if known is not None else None
        if recorded:
            # A preemptor finished or deleted (a trial pod is a short run) before its record's
            # gang members elsewhere were deleted: kept for the look at it (review27 R2).
            assert known is not None
            self._keep_gang_record(known, recorded)
        self._engine.delete_pod(uid)
        self._pods.forget(uid)
        if uid in self._victims:
            del self._victims[uid]
            if self.on_victims_gone is not None:
                self.on_victims_gone()


def _phase_moved_only(known: PodInfo, info: PodInfo) -> bool:
    """Whether ``info`` differs from ``known`` only in its phase, both unfinished (Pending, then
    Running): what the engine was given of ``known`` stands for ``info``, as the policies read a
    pod's phase only as finished or not."""
    return (
        known.phase != info.phase
        and known.phase not in TERMINAL_PHASES
        and info.phase not in TERMINAL_PHASES
        and msgspec.structs.replace(known, phase=info.phase) == info
    )


def _finished(pod: wire.Pod) -> bool:
    return pod.status is not None and pod.status.phase in TERMINAL_PHASES


def _engine_pods(listed: Sequence[WatchedPod], *, samples: dict[str, SamplingPod], unreadable: list[str]) -> Iterator[wire.Pod]:
    """A list's pods as the engine reads them, each read once; ``samples`` gets its sampling
    pods' runs, by UID, as they are read, and ``unreadable`` the UIDs of those whose run does not
    read."""
    for watched in _read_once(listed):
        if watched.sample is not None:
            samples[watched.pod.metadata.uid] = watched.sample
        elif watched.labelled:
            unreadable.append(watched.pod.metadata.uid)
        yield watched.pod


def _interchangeable(watched: WatchedJob) -> bytes | None:
    """The Job's bytes when the estimator follows it (feed.followed), else None."""
    raw = bytes(memoryview(watched.raw))
    return raw if followed(annotations=watched.job.metadata.annotations or {}, raw=raw) else None


def _linking(
    arriving: Mapping[str | None, Sequence[PodInfo]], leaving: Iterable[str | None]
) -> Generator[None, None, list[list[str]]]:
    """The nodes of a relist in groups that must change together (the generator's return value,
    for ``yield from``): a node alone, or with the nodes its listed pods' bookings hold slots on
    (a HiveD gang's bind info names its siblings' slots). Groups in the order of their first
    node's name. A step per _CHECKS_PER_STEP nodes or pods read: 10,000 pods' bookings take ~6 ms."""
    sets = DisjointSets()
    read = 0
    for node in leaving:
        if node is not None:
            sets.find(node)
            read += 1
            if read >= _CHECKS_PER_STEP:
                read = 0
                yield
    for node, infos in arriving.items():
        if node is not None:
            sets.union([node, *(other for info in infos for other in _slot_nodes(info))])
            read += len(infos)
            if read >= _CHECKS_PER_STEP:
                read = 0
                yield
    return sets.groups()


def _slot_nodes(info: PodInfo) -> tuple[str, ...]:
    """The nodes other than its own that ``info``'s booking holds slots on: a HiveD gang's
    siblings' (its ``cellfit.io/bind-info``); none for any other pod, or a bind info that does
    not parse (HiveD recovers that pod on its own node only)."""
    text = info.annotations.get(ANNOTATION_BIND_INFO)
    if not text or '"gang"' not in text:
        return ()
    try:
        gang = bindinfo.decode(text).gang
    except InvalidAnnotation:
        return ()
    if gang is None:
        return ()
    return tuple({slot.node for slot in gang.slots if slot.node != info.node_name})
