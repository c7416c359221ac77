"""AlloX admission, live: estimated, suspended interchangeable Jobs are AlloX's queue; the ones the
matching starts now are put in the chosen configuration and unsuspended; the others are told
where they stand.

Data flow: the estimator's watch of interchangeable Jobs and the cluster cache's free capacity →
:func:`scheduler.matching.admission.decide_starts` → Job patches, Events and the ``Placed``
condition of the starts → the queue planned (``QueuePlan``) → the waiting Jobs' ``Placed``
condition. The queue comes after the starts are carried out: it decides no start, and planning
it (one more matching of every waiting Job) would hold each unsuspend back by that long.

State lives on the Jobs, so a restart decides from what the cluster says: a Job with
``cellfit.io/placement`` (its pod template's label, else its annotation) and not suspended is
running on that kind (ω = its start + estimate); a
suspended Job waits, whatever ``cellfit.io/placement`` it carries (a start records it and
unsuspends in one patch, so one still suspended was suspended again, or copied from a placed
Job); a Job a user unsuspended by hand counts as running on the kind its template asks for,
once a pod of it is bound (its estimate from then); until then it holds no machine, and its pods
take the first of its kind to free, ahead of the queue (``RunningJob.awaiting``).

How a started Job's pods get the configuration (``allox.mechanism``):
- template: the suspended Job's pod template is rewritten whole (resources, env, selectors,
  tolerations) in the same patch that unsuspends it; Kubernetes accepts resources there from
  KEP-5440 (MutablePodResourcesForSuspendedJobs, beta and on by default in 1.36);
- webhook: the patch changes only what every supported Kubernetes lets a suspended Job change
  (the template's labels, annotations, node selector and tolerations) and labels the pods
  ``cellfit.io/placement``; the pod-create webhook rewrites each pod from the configurations
  copied onto the template (placer/patch.py);
- auto: template, and for a Job whose rewrite the API server refuses as immutable (HTTP 422: no
  KEP-5440, or a change it does not cover, such as env), webhook.

Under HiveD (``guarantees``), a Job's GPU configuration may use only its virtual cluster's free
guarantee (its pod template's ``cellfit.io/virtual-cluster`` label, or the implicit default VC),
read from the engine each pass and capped at the GPUs free on AlloX's nodes; HiveD still places
the pods. A Job of parallelism p holds p machines of one kind (``decide``'s gangs).

Trial Jobs (FitGpp's trial-and-error class) never wait in AlloX's queue: each starts at once
where it finishes first (``choose_for_trial``): an idle GPU; else a CPU slot when the CPU run
ends before the GPU run would, after FitGpp's preemption (the shortest grace period of the
best-effort pods holding GPUs) or after the first busy GPU frees; else the GPU configuration, and
FitGpp preempts as it does for any trial pod. A best-effort pod counts once: the trial Jobs
started on a busy GPU whose pods are not bound yet (this pass's, or earlier ones' while their
victims leave or they wait nominated) take one each, and a trial Job with none left starts when
the first busy GPU frees, and is told so (``_trials``, ``_preemptible``).
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import multiprocessing
import os
import re
import signal
import threading
import time
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Callable, Final, Mapping, Protocol, Sequence, TypeVar

import msgspec

from estimator.contract import parse_estimate_cached
from estimator.objects import Job, JobCondition, template_kind, timestamp
from estimator.sample_pod import beyond_largest_node, configuration_digest, gpu_count, recorded_configuration, unplaced
from placer.configuration import Configuration, Configurations, parse_configurations_cached
from placer.guarantee import AskedLately, GpuPodsAsk, KeptRoom, free_less_kept, guarantees_less_kept, vc_machines
from placer.holding import (
    DEFAULT_UNBOUND_HOLD_SECONDS,
    HOLDING,
    Hold,
    JobPods,
    bound_in_this_run,
    explain,
    hold,
)
from placer.patch import PodsRefused, check_pod_level_resources, containers_record
from placer.pod_webhook_off import REASON_POD_WEBHOOK_OFF, PodWebhookOff, pod_webhook_off_message
from placer.rewrite import ANNOTATION_STATED_NO_MORE, PoolConflict, apply_configuration, pool_conflict, shed_placement
from placer.solver_wire import SolverSession, decide_encoded, exit_with_parent, queue_encoded
from scheduler.config import DEFAULT_IN_PROCESS_BUDGET_SECONDS, AlloxSettings, EstimatorSettings
from scheduler.constants import (
    ANNOTATION_CONFIGURATIONS,
    ANNOTATION_PODS_BOUND,
    ANNOTATION_ESTIMATE,
    ANNOTATION_PLACEMENT,
    JOB_CLASS_TRIAL,
    LABEL_JOB_CLASS,
    LABEL_PLACEMENT,
    LABEL_PRIORITY,
    LABEL_VIRTUAL_CLUSTER,
    PRIORITY_OPPORTUNISTIC,
)
from scheduler.core.resources import Resources
from scheduler.errors import CellfitError, InvalidAnnotation, KubernetesApiError
from scheduler.kube import wire
from scheduler.kube.joining import awaited_pool
from scheduler.kube.joining import said as pool_said
from scheduler.kube.translate import pod_requests
from scheduler.kube.wire import annotation_pointer
from scheduler.gc_freeze import freeze_once_more
from scheduler.matching.admission import (
    DEFAULT_CPU_SLOT,
    AdmissionDecision,
    BestEffortGpus,
    DecideReuse,
    Queued,
    RunningJob,
    Start,
    TrialChoice,
    WaitingJob,
    GpuRoom,
    gpu_room,
    gpu_shortfall,
    gpu_slots_for,
    kinds_beyond,
    most_gpus,
    choose_for_trial,
    claimed_first,
    on_omega_grid,
    preemptible_for_trials,
    beside_each_gpu,
    decide_starts,
    IdleMachines,
    pool_kind,
    queued_cpu_slot,
)
from scheduler.matching.capacity import GuaranteeCell, NodeResources, guaranteed_gpu_machines
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import KIND_GPU, Demand
from scheduler.preemption import preemption_count_of
from scheduler.wording import duration, ordinal, together_with

log = logging.getLogger(__name__)

CONDITION_PLACED = "Placed"
# The Placed condition while the Job runs says "running on <kind>" first (kubectl cellfit why
# reads the kind there); once it has ended, "ran on <kind>" (reason Ran), and while its pods,
# preempted, wait to resume, reason Preempted.
RUNNING_ON: Final = "running on "
REASON_RAN: Final = "Ran"
REASON_PREEMPTED: Final = "Preempted"
_ENDED_REASONS: Final = frozenset({REASON_RAN, "Ended"})
# A running Job's Placed reasons that say it holds none of AlloX's machines, with what for.
_LET_GO_REASONS: Final[Mapping[str, Hold]] = MappingProxyType({"NotBound": "unbound", "PodsElsewhere": "elsewhere"})
# What a running Job's condition says after "running on <kind>: " once its pods came back (not
# AlloX's reason for the kind, which its start said).
RESUMED: Final = "resumed after a preemption"
BOUND_AGAIN: Final = "its pods are bound again"
# How long a started Job's pods may wait for a node of estimator.nodesMayJoin to join, unless told:
# the wait its sampling pod got (estimator.pendingLimitSeconds' default).
DEFAULT_JOINING_LIMIT_SECONDS: Final = float(EstimatorSettings().pending_limit_seconds)
T = TypeVar("T", WaitingJob, RunningJob)
R = TypeVar("R")
GIB = 2**30
# A new solver process's first answers (its pid, its first decision) include its start: a new
# interpreter importing NumPy and the matching, about a second on a loaded node, which
# allox.solverTimeoutSeconds may be set below (a matching takes tens of milliseconds there). Set
# so, each pass killed a child still starting and started another: no Job ever started.
SOLVER_START_SECONDS: Final = 60.0
# A pass's queue, planned when called (after the starts are carried out); None: not planned,
# the queue as told stands (PlacerController._queue_as_told).
QueueSource = Callable[[], tuple[Queued, ...] | None]


@dataclass(frozen=True)
class Guarantees:
    """HiveD's virtual clusters as AlloX admission sees them: each VC's cells
    (placer/guarantee.py) and the VC a pod without the label belongs to (the implicit
    ``default`` VC; None when VCs are configured)."""

    cells: Mapping[str, Sequence[GuaranteeCell]]
    default_vc: str | None
    # Each VC's cells on every node, when ``cells`` counts only AlloX's (allox.nodeSelector):
    # a Job whose VC has free guarantee elsewhere lacks machines (NoMachine), not quota.
    anywhere: Mapping[str, Sequence[GuaranteeCell]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _NodeRooms:
    """AlloX's nodes' allocatable (``nodes``), each less what it keeps beside its GPUs
    (``beside_kept``) or less allox.reservedCpuPerGpu alone (``beside_floor``), and their sums."""

    nodes: tuple[Capacity, ...]
    beside_kept: tuple[Capacity, ...]
    cpu_room: Capacity
    beside_floor: tuple[Capacity, ...]
    floor_room: Capacity


class SolverHung(CellfitError):
    """The solver process answered nothing in time; it was killed."""


# "AlloX does not start this Job on KIND[ or KIND]: REASON", the refusals _refusal_told names together.
_REFUSED_LEAD = re.compile(r"AlloX does not start this Job on ([a-z0-9.-]+(?: or [a-z0-9.-]+)*): (.*)\Z", re.DOTALL)


def _refused_reason(told: str) -> tuple[str, list[str]]:
    """A refusal as told (_REFUSED_LEAD): its reason and the kinds it names (without that lead:
    the whole text, and no kind)."""
    lead = _REFUSED_LEAD.match(told)
    return (lead.group(2), lead.group(1).split(" or ")) if lead is not None else (told, [])


# A waiting Job's condition (_NOTED_REASONS) ends with the kinds AlloX refuses it in, each
# "; not on KIND[ or KIND]: REASON" (_refusal_note); what comes before reads back as without it.
_REFUSED_NOTE: Final = "; not on "
_REFUSED_NOTE_AT: Final = re.compile(re.escape(_REFUSED_NOTE) + r"[a-z0-9.-]+(?: or [a-z0-9.-]+)*: ")
_NOTED_REASONS: Final = frozenset({"Queued", "NoMachine", "WaitingForMachine", "WaitingForQuota"})


def refusal_note_split(message: str) -> tuple[str, str]:
    """A waiting Job's condition ``message`` as (why it waits, the refusals it notes after: ""
    for none)."""
    found = _REFUSED_NOTE_AT.search(message)
    return (message, "") if found is None else (message[:found.start()], message[found.start():])


class NoPodWebhook(CellfitError):
    """A start whose pods only cellfit's pod-create webhook would give the configuration, with
    that webhook off."""


class JobSource(Protocol):
    """What the controller reads Jobs from (the estimator's watch)."""

    def interchangeable_jobs(self) -> list[Job]: ...

    def subscribe(self, on_change: Callable[[], None]) -> None: ...


@dataclass
class LastDecision:
    at: float = 0.0
    seconds: float = 0.0  # how long deciding the starts took
    # From the pass's start (the Jobs as the watch holds them) to the decision's starts: reading
    # the live state and deciding, not carrying the decision out nor planning the queue (the
    # benchmark's "decision").
    from_state_seconds: float = 0.0
    from_state_cpu_seconds: float = 0.0  # the same, CPU time of the admission thread
    # Planning the queue, after the starts were carried out (in the solver process: asking the
    # child for it); CPU time of the admission thread beside it.
    queue_seconds: float = 0.0
    queue_cpu_seconds: float = 0.0
    # Free machines the decision left undecided, its walk stopped at allox.decisionBudgetSeconds
    # (budget_seconds): the next pass, run at once, decides them.
    undecided_machines: int = 0
    budget_seconds: float = 0.0
    # When the queue shown (``queue``) was planned and told: ``at``, but a pass followed at once
    # plans none and shows the queue as told then.
    queue_planned_at: float = 0.0
    starts: list[dict[str, Any]] = field(default_factory=list)
    queue: list[dict[str, Any]] = field(default_factory=list)
    unplaceable: list[str] = field(default_factory=list)
    idle_machines: Mapping[str, int] = field(default_factory=dict)
    busy_machines: Mapping[str, int] = field(default_factory=dict)
    mechanism: str = ""
    progress: Mapping[str, float] = field(default_factory=dict)  # §3.3.2, per user
    progress_spread: float = 0.0
    waiting_for_pool: list[str] = field(default_factory=list)
    # Started Jobs whose pods wait for a node of a pool of estimator.nodesMayJoin to join (job,
    # kind, pool): placeable once one does, and holding no machine of AlloX's meanwhile.
    waiting_for_nodes: list[dict[str, str]] = field(default_factory=list)
    # Started Jobs that hold no machine of AlloX's, and why (placer/holding.py).
    released: list[dict[str, str]] = field(default_factory=list)
    # Jobs unsuspended by hand whose pods wait to be bound (job, kind): no machine is theirs, they
    # take the first of their kind to free, ahead of the queue.
    awaiting: list[dict[str, str]] = field(default_factory=list)
    # Waiting Jobs AlloX holds this pass outside the queue (unplaceable, waiting for quota): each
    # with its Placed condition's reason and message (NoMachine, WaitingForMachine,
    # WaitingForQuota), so that `kubectl cellfit queue` lists them as `why` does.
    held: list[dict[str, str]] = field(default_factory=list)


class PlacerController:
    def __init__(
        self,
        *,
        api: Any,
        jobs: JobSource,
        free_by_node: Callable[[frozenset[str]], Mapping[str, Resources]],
        capacity: Callable[[], Resources],
        settings: AlloxSettings,
        gpu_resource: str,
        clock: Callable[[], float] = time.time,
        on_decision: Callable[[float, AdmissionDecision], None] | None = None,
        on_start: Callable[[str, str], None] | None = None,
        preemption_grace: Callable[[], float | None] = lambda: None,
        best_effort_gpus: Callable[[], BestEffortGpus] | None = None,
        guarantees: Callable[[frozenset[str]], Guarantees] | None = None,
        job_pods: Callable[[frozenset[str]], Mapping[str, JobPods]] | None = None,
        unbound_hold_seconds: float = DEFAULT_UNBOUND_HOLD_SECONDS,
        allocatable_by_node: Callable[[], Mapping[str, Resources]] = lambda: {},
        kept_room: Callable[[frozenset[str]], Sequence[KeptRoom]] | None = None,
        asked_per_gpu: Callable[[], GpuPodsAsk] | None = None,
        nodes_may_join: Sequence[Mapping[str, str]] = (),
        joining_limit_seconds: float = DEFAULT_JOINING_LIMIT_SECONDS,
        allocatable_carrying: Callable[[Mapping[str, str]], Mapping[str, Resources]] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        pod_webhook: bool = True,
    ) -> None:
        self._api = api
        # Whether cellfit's pod-create webhook rewrites placed pods (admission.enabled): without
        # it, a Job whose template the API server will not rewrite would run its pods as written,
        # in no configuration, while told it runs in one.
        self._pod_webhook = pod_webhook
        # Without it, the running Jobs a term before placed through it, told so once this term.
        self._webhook_off = None if pod_webhook else PodWebhookOff()
        # The clock of a decision's budget (allox.decisionBudgetSeconds) in this process.
        self._monotonic = monotonic
        # Pools an autoscaler scales up from zero (estimator.nodesMayJoin): a configuration only
        # their nodes run is not judged by the nodes up now (scheduler/kube/joining.py), and its
        # pods may stay Pending as long as a sampling pod's (estimator.pendingLimitSeconds).
        self._nodes_may_join = tuple(nodes_may_join)
        self._joining_limit_seconds = joining_limit_seconds
        # The allocatable of AlloX's nodes carrying given labels (a listed pool's): a started Job
        # whose pods only that pool runs holds a machine only while one of them could take its
        # pods; else they wait for the autoscaler and hold none. None: not known, held as any
        # starting Job is.
        self._allocatable_carrying = allocatable_carrying
        # Per (configurations annotation, pod template): each kind's node selector and the listed
        # pool only its nodes run (_selected_nodes), read once per distinct pair.
        self._selectors: dict[tuple[str, bytes], Mapping[str, tuple[Mapping[str, str], Mapping[str, str] | None]]] = {}
        self._jobs = jobs
        self._free_by_node = free_by_node
        # The allocatable resources of AlloX's nodes, summed: what fairness divides demands by.
        self._capacity = capacity
        # Each of AlloX's nodes' allocatable: a pod more than any one of them holds never fits,
        # though they may hold it together (none known: judged on the sum alone).
        self._allocatable_by_node = allocatable_by_node
        self._settings = settings
        self._gpu_resource = gpu_resource
        self._clock = clock
        self._on_decision = on_decision
        self._on_start = on_start
        # The shortest grace period among best-effort pods holding GPUs: how long FitGpp's
        # preemption keeps a trial Job off a GPU (None: nothing to preempt).
        self._preemption_grace = preemption_grace
        # The best-effort pods holding GPUs, each preemptible one's grace period and how many are
        # already leaving (what trial Jobs may count on FitGpp preempting). None: only the
        # shortest grace period above is known, read as one such pod.
        self._best_effort_gpus = best_effort_gpus
        # Per trial Job UID started on the GPU configuration, what its GPU was to come from
        # (TrialChoice.gpu_by): one started on an idle GPU owes no best-effort pod while its pod is
        # on its way; kept while it runs on the GPU.
        self._trial_gpu_by: dict[str, str] = {}
        # Under HiveD: each VC's free guarantee, the pods of the given running Jobs counted as
        # free (they are busy machines of their own, as in free_by_node). None: no VCs, a
        # Job's GPU configuration may use any free GPU of AlloX's nodes.
        self._guarantees = guarantees
        # The started Jobs' pods (the cluster cache): whether each still holds AlloX's machines
        # (placer/holding.py). None: every started Job holds them until start + estimate.
        self._job_pods = job_pods
        # The room nodes keep for pending pods AlloX did not start (FitGpp's resume and preemptor
        # holds, kube-scheduler's nominations; placer/guarantee.py kept_room), the given running
        # Jobs' own pods left out: not free for AlloX, on a node nor in a VC's guarantee, or a Job
        # started there stays Pending behind the pod the room is kept for. None: nothing kept.
        self._kept_room = kept_room
        # What the pods asking GPUs ask (placer/guarantee.py asked_per_gpu): a VC's guaranteed
        # gang of 8 GPUs and 32 cores a pod waited on "Insufficient cpu" behind CPU Jobs AlloX had
        # cut from the same nodes' cores (user24, F17), and a pod of 8 GPUs and 448 GiB would have
        # on memory. The most cores and memory per GPU of those one of AlloX's nodes holds, over
        # the passes of the last NotBound limit, is kept beside each free GPU, as a queued GPU
        # configuration's is.
        self._asked_per_gpu = asked_per_gpu
        # Per kind of node (its allocatable), over that window: what a node keeps is what the GPU
        # pods it holds ask, not what a pod only a larger node holds does (review26: 112 GiB a GPU
        # of a pod only an 8-GPU node of 1 TiB held was kept beside each GPU of 128 GiB nodes too).
        self._asked_lately: dict[Resources, AskedLately] = {}
        self._kept_by_node: dict[str, Demand] = {}  # this pass's, per node of AlloX's
        self._kept_elsewhere = Demand()  # this pass's, on a node whose allocatable is not known
        self._reserved_cpu_per_gpu = settings.reserved_cpu_per_gpu
        self._reserved_memory_per_gpu = 0.0
        self._unbound_hold_seconds = unbound_hold_seconds
        self._released: dict[str, Hold] = {}  # UIDs of started Jobs told they hold no machine, with what they were told
        # UIDs of started Jobs whose pods were seen on AlloX's nodes in this run, by this process
        # or, recorded on the Job (ANNOTATION_PODS_BOUND), by one before a restart.
        self._was_bound: set[str] = set()
        self._bound_recorded: set[str] = set()  # of those, the UIDs whose Job carries that record
        # UIDs of Jobs their users unsuspended by hand none of whose pods was bound yet (they
        # hold no machine, their pods take the first to free), and of those seen bound since,
        # when this process first saw it: their estimate runs from then, not from the unsuspend.
        self._awaiting: set[str] = set()
        # Of those, since when each has taken an idle machine of its kind (this process's clock).
        self._idle_since: dict[str, float] = {}
        # UIDs of Jobs unsuspended by hand whose Placed condition this process has read for a
        # let-go told before it (_read_back_let_go): once per Job and spell of running.
        self._let_go_read: set[str] = set()
        self._bound_at: dict[str, float] = {}
        # Per Job UID: what the API server refused to start (the Job's pod template and
        # configurations, _refusable), and in which kinds; not chosen again in those until its
        # user changes either (not its resourceVersion: writing its condition changes that).
        self._refused: dict[str, tuple[tuple[bytes, str], frozenset[str]]] = {}
        # Per Job UID: what each of its refused kinds was told, so that its condition and
        # /v1/inspect/allox's waiting list name every kind refused, not the last one alone.
        self._refusals: dict[str, dict[str, str]] = {}
        # Per Job UID suspended again (none of its pods bound within the NotBound limit): its
        # configurations then, and per kind how many times and until when AlloX does not start
        # it in that kind again (suspended_again_back_off); forgotten when its configurations
        # change or the Job is gone. In memory: a restarted cellfit starts it once at once.
        self._backed_off: dict[str, tuple[str, dict[str, tuple[int, float]]]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._told: dict[str, str] = {}  # the last queue message written per Job UID
        # Per started Job UID, AlloX's reason for its kind, as its start told it ("AlloX chose gpu
        # (...)"): its Ran condition says it again, after PodsElsewhere, NotBound, Preempted or
        # a resume wrote over the Started one.
        self._chose: dict[str, str] = {}
        self._warned: dict[str, set[str]] = {}  # per Job UID, the messages of the warning Events it was sent
        self._queued_where: dict[str, frozenset[str]] = {}  # per Job UID, where its Queued Events said it waits
        # Job UID -> the kind it was started in and the resourceVersion it was started from,
        # until the watch shows it running, or suspended at another version (_classify).
        self._started: dict[str, tuple[str, str]] = {}
        self._mechanisms: dict[str, int] = {}  # starts per mechanism used
        self._cut_short = 0  # decisions stopped at allox.decisionBudgetSeconds
        # Starts carried out and kinds refused (_start, _refuse), since this process started: a
        # pass cut short that added to neither is not followed at once (_decide_again).
        self._acted = 0
        # The last pass was cut short and carried out a start or a refusal: the next decides the
        # machines it left at once (_run), not after the debounce or the resync.
        self._decide_again = False
        # The queue as last planned and told: when, its places, and the inspect output's rows.
        # A pass followed at once plans and tells none: this stands (_queue_as_told).
        self._queue_told: tuple[float, tuple[Queued, ...], list[dict[str, Any]]] = (0.0, (), [])
        # Per Job UID: the resourceVersion it was classified at, and what it read as (a waiting
        # Job, or a running one with its start time: neither depends on the clock then).
        self._seen: dict[str, tuple[str, WaitingJob | RunningJob, Configurations, bool]] = {}
        self.last = LastDecision()
        self._solver: ProcessPoolExecutor | None = None
        self._solver_pid: int | None = None  # the child's, to kill it when it answers nothing
        self._solver_started = False  # it answered a decision: its start is behind it
        self._solver_timeout_seconds = settings.solver_timeout_seconds  # allox.solverTimeoutSeconds
        # allox.decisionBudgetSeconds: how long a decision's walk runs before the starts it made
        # are carried out and the machines it left are decided by a pass run at once. A decision
        # made here while the solver process is on (its child died) holds the verbs' interpreter:
        # at most the in-process default.
        self._budget_seconds = settings.decision_budget
        self._here_budget_seconds = (settings.decision_budget if not settings.solver_process
                                     else min(settings.decision_budget, DEFAULT_IN_PROCESS_BUDGET_SECONDS))
        self._session = SolverSession()  # which Jobs the solver process holds
        # What decide made of the waiting and running Jobs read as last pass (the same objects
        # for Jobs the watch shows unchanged, see _seen): not made again.
        self._reuse = DecideReuse()
        # Under HiveD, per Job key: the item read, its VC, and the item with it (_with_pool).
        self._pooled: dict[str, tuple[WaitingJob | RunningJob, str | None, WaitingJob | RunningJob]] = {}
        self._pooled_next: dict[str, tuple[WaitingJob | RunningJob, str | None, WaitingJob | RunningJob]] = {}
        jobs.subscribe(self._wake.set)
        self._worker = threading.Thread(target=self._run, name="allox-admission", daemon=True)

    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._solver is not None:
            self._solver.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        at_once = False  # the last pass was cut short by its budget and acted: the next decides its machines now
        while not self._stop.is_set():
            if not at_once:
                self._wake.wait(timeout=self._settings.resync_seconds)
                if self._stop.is_set():
                    return
                time.sleep(self._settings.debounce_seconds)  # let a burst of Job changes arrive
            at_once = False
            self._wake.clear()
            try:
                self.admit()
                at_once = self._decide_again
            except SolverHung as error:
                log.error("AlloX admission passed a turn", extra={"reason": str(error)})
            except Exception:  # a defect must not end admission
                log.exception("AlloX admission failed")

    def admit(self) -> AdmissionDecision:
        """One matching over the live state, carried out: the starts, then the queue planned and
        told (the decision returned has it)."""
        began, began_cpu = time.perf_counter(), time.thread_time()
        self._decide_again, acted = False, self._acted
        now = self._clock()
        jobs = self._jobs.interchangeable_jobs()
        waiting: list[WaitingJob] = []
        running: list[RunningJob] = []
        running_uids: set[str] = set()
        trials: list[WaitingJob] = []
        configurations: dict[str, Configurations] = {}
        by_key: dict[str, Job] = {}
        seen: dict[str, tuple[str, WaitingJob | RunningJob, Configurations, bool]] = {}
        refused, self._refused = self._refused, {}
        refused_whole: list[str] = []  # Job keys refused in every kind they have, listed as waiting
        backing_off: dict[str, str] = {}  # Job key -> why it waits: each of its kinds backed off
        # Job key -> the back-off of a Job queued in its other kind, which its place is told with
        backed_off_in: dict[str, str] = {}
        for job in jobs:
            key = f"{job.metadata.namespace}/{job.metadata.name}"
            by_key[key] = job
            uid, version = job.metadata.uid, job.metadata.resourceVersion
            # A Job the watch shows unchanged reads as it did last pass (most of a queue and of
            # the running Jobs, on most passes): classifying every Job was a fifth of a pass at
            # 1,000 waiting, and a fifth again with 1,000 running.
            cached = self._seen.get(uid)
            item: WaitingJob | RunningJob | None
            if cached is not None and version and cached[0] == version and uid not in self._started:
                _, item, configurations[uid], is_trial = cached
            else:
                item = self._classify(job, now, configurations)
                is_trial = isinstance(item, WaitingJob) and _is_trial(job)
                if isinstance(item, RunningJob) and not (job.status and job.status.startTime):
                    version = ""  # started at "now" until the watch shows its start time: not kept
            if isinstance(item, WaitingJob):
                if version and job.metadata.creationTimestamp:  # else it arrives at "now", pass after pass
                    seen[uid] = (version, item, configurations[uid], is_trial)
                if refused:
                    item = self._unrefused(item, job, refused)
                    if item is None:
                        refused_whole.append(key)
                if item is not None:
                    item = self._not_backed_off(item, job, now, backing_off, backed_off_in)
                if item is not None:
                    (trials if is_trial else waiting).append(item)
            elif isinstance(item, RunningJob):
                if version:
                    seen[uid] = (version, item, configurations[uid], False)
                running.append(item)
                running_uids.add(uid)
        self._seen = seen
        if self._webhook_off is not None:
            for job, kind in self._webhook_off.to_tell(jobs):
                self._event(job, REASON_POD_WEBHOOK_OFF, pod_webhook_off_message(kind), warning=True)
            self._webhook_off.log_due(now)
        # Job key -> why no node its configurations' node selectors admit holds it (told below).
        beyond_its_nodes: dict[str, str] = {}
        if self._allocatable_carrying is not None and waiting:
            waiting = self._within_selected_nodes(waiting, by_key, beyond_its_nodes)
        # What was told to a Job that is gone is forgotten with it (at most as many as there are
        # Jobs are kept). A start is kept until the watch shows the Job at another version
        # (running, or suspended again), or the Job gone: the watch lists every Job with
        # configurations, so one it no longer lists was deleted (its UID never comes back) or
        # lost its configurations after the start (read again, it is at another version).
        if len(self._told) > len(by_key) or self._started:
            live = {job.metadata.uid for job in jobs}
            self._told = {uid: message for uid, message in self._told.items() if uid in live}
            self._warned = {uid: sent for uid, sent in self._warned.items() if uid in live}
            self._chose = {uid: why for uid, why in self._chose.items() if uid in live}
            self._queued_where = {uid: told for uid, told in self._queued_where.items() if uid in live}
            self._backed_off = {uid: off for uid, off in self._backed_off.items() if uid in live}
            self._refusals = {uid: said for uid, said in self._refusals.items() if uid in live}
            with self._lock:
                self._started = {uid: start for uid, start in self._started.items() if uid in live}
        running, released, waiting_for_nodes = self._holding(now, running, by_key)
        running_uids.difference_update(by_key[item.key].metadata.uid for item, _ in released)
        # Running Jobs are busy machines of their own: their pods (bound yet or not) must not
        # also make their node look full, nor, unbound, leave it looking free.
        kept = self._kept_room(frozenset(running_uids)) if self._kept_room is not None else ()
        if self._asked_per_gpu is not None:
            self._note_asked_per_gpu(now)
        free_by_node = self._free_by_node(frozenset(running_uids))
        free = [
            NodeResources(name=name, cpu=r.cpu_millis / 1000, gpu=max(r.gpus, 0), memory=max(r.memory_bytes, 0) / GIB,
                          kept_cpu_per_gpu=(on := self._kept_on(name)).cpu, kept_memory_per_gpu=on.memory)
            for name, r in (free_less_kept(free_by_node, kept) if kept else free_by_node).items()
        ]
        gpu_pools: dict[str, int] | None = None
        gpu_slots: dict[str, int] | None = None
        guaranteed: dict[str, int] = {}
        found: Guarantees | None = None
        if self._guarantees is not None:
            found = self._guarantees(frozenset(running_uids))
            if kept:
                # Only room kept on AlloX's nodes takes of the cells there (found.cells').
                found = replace(found, cells=guarantees_less_kept(found.cells, kept, nodes=free_by_node.keys()),
                                anywhere=None if found.anywhere is None else guarantees_less_kept(found.anywhere, kept))
            waiting = [self._with_pool(item, by_key, found) for item in waiting]
            trials = [self._with_pool(item, by_key, found) for item in trials]
            running = [self._with_pool(item, by_key, found) for item in running]
            self._pooled, self._pooled_next = self._pooled_next, {}
            # Sized with the VC's cells opportunistic pods hold, as decide must size them too:
            # by the nodes alone a 4-GPU Job took a 1-GPU machine there (user25 #2).
            machines = vc_machines([*waiting, *trials], free=free, cells=found.cells)
            gpu_slots, gpu_pools = dict(machines.gpu_slots), dict(machines.gpu_pools)
            guaranteed = guaranteed_gpu_machines(found.cells if found.anywhere is None else found.anywhere, gpus_per_pod=machines.sizes)
        estimates = {w.key: w.seconds for w in (*waiting, *trials)}
        # A VC is named in what users read only where there is another to tell it from: without
        # virtualClusters the implicit VC 'default' owns every GPU, and "1st on gpu of virtual
        # cluster 'default'" told a user who never chose one only a name (kubectl cellfit why
        # already left it out).
        name_pools = found is not None and len(found.cells) > 1
        chosen = self._trials(now, trials, waiting, running, free, gpu_pools, gpu_slots, by_key)
        started_trials = {trial.key for trial, _ in chosen}
        self._tell_trials_waiting([trial for trial in trials if trial.key not in started_trials], by_key)
        for trial, choice in chosen:
            job = by_key[trial.key]
            self._start(job, configurations[job.metadata.uid], choice.kind, why=f"trial Job, {choice.reason}")
            running.append(RunningJob(key=trial.key, user=trial.user, kind=choice.kind, started=now,
                                      seconds=trial.seconds, demand=trial.demand, pods=trial.pods, pool=trial.pool))
        capacity = _in_demand_units(self._capacity())
        started = time.perf_counter()
        decision, queue_of = self._decide(
            now=now, waiting=waiting, running=running, free_nodes=free, capacity=capacity, alpha=self._settings.alpha,
            policy=self._settings.policy, reserved_cpu_per_gpu=self._reserved_cpu_per_gpu,
            reserved_memory_per_gpu=self._reserved_memory_per_gpu,
            allox_plus_timeout=self._settings.allox_plus_timeout_seconds or float("inf"),
            omega_grid_seconds=self._settings.omega_grid_seconds, gpu_pools=gpu_pools, gpu_slots=gpu_slots,
        )
        decided, decided_cpu = time.perf_counter(), time.thread_time()
        decision = _within(decision, waiting)
        self._note_awaiting_on_idle(decision, running, by_key, now)
        elapsed = decided - started
        waiting_by_key = {w.key: w for w in waiting}
        for start in decision.starts:
            job = by_key[start.key]
            item = waiting_by_key[start.key]
            why = chose_message(start=start, seconds=estimates[start.key], pool=item.pool, decision=decision,
                                running=running, gpu_pools=gpu_pools, now=now, capacity=capacity, gpu_demand=item.demand.get(KIND_GPU),
                                name_pool=name_pools, outside=_gpu_outside_vcs(job, found) if found is not None else None,
                                omega_grid_seconds=self._settings.omega_grid_seconds)
            self._start(job, configurations[job.metadata.uid], start.kind, why=why)
        if decision.undecided_machines:
            # The machines it left are decided by a pass run at once only where this pass acted:
            # it started a Job (the next walk starts from the state after it) or refused one in a
            # kind (the next walk does not choose it there). Each such pass is followed at once
            # only after one more start or refusal, so they end. A pass whose every start failed
            # (the API server down, a webhook failing, 429) would make the same walk again: it
            # waits for a change or the resync as any pass does (review28b: 51 passes in 5 s,
            # each spending the whole budget, 430 patches tried).
            self._cut_short += 1
            self._decide_again = self._acted > acted
            log.info("AlloX decision stopped at its budget (allox.decisionBudgetSeconds): "
                     + ("the machines it left are decided by a pass run now" if self._decide_again else
                        "none of its starts was carried out, so the machines it left are decided by the next pass, "
                        "after a change or the resync"),
                     extra={"starts": len(decision.starts), "undecided_machines": decision.undecided_machines,
                            "acted": self._acted - acted, "budget_seconds": self._budget_seconds, "seconds": round(elapsed, 3)})
        # The queue only now: it decides no start, so no unsuspend waits for its matching. A pass
        # followed at once plans and tells none: its plan would count the machines it left
        # undecided idle now (review28b: 29 Jobs told "1st on cpu, expected to start any moment",
        # of which the next pass started 3; each pass of a run moved the Jobs' places, 209
        # condition writes and 64 Events against 28 and 28). The conditions, the inspect output
        # and the queue gauge stay as the last queue told them; the run ends in a pass that tells
        # the queue (one not cut short, or one that carried out nothing), so every Job is told.
        planning, planning_cpu = time.perf_counter(), time.thread_time()
        planned = None if self._decide_again else queue_of()
        queue_rows: list[dict[str, Any]] = []
        if planned is None:
            decision, queue_rows, queue_planned_at = self._queue_as_told(decision, waiting, now=now)
        else:
            decision, queue_planned_at = _within(replace(decision, queue=planned), waiting), now
        queue_seconds, queue_cpu_seconds = time.perf_counter() - planning, time.thread_time() - planning_cpu
        if self._on_decision is not None:  # after the queue: its observer counts the queued Jobs
            self._on_decision(elapsed, decision)
        if planned is not None:
            together = starting_together(decision.queue, now=now)
            starts: dict[tuple[str, str | None], dict[int, float]] = {}  # per kind (and VC), each position's expected start
            for queued in decision.queue:
                starts.setdefault((queued.kind, queued.pool), {})[queued.position] = now + queued.expected_start_seconds
            # Per machine kind, its machines left idle after the starts: a Job expected to start now
            # where none is waits for one whose Job runs past its estimate.
            idle_left = dict(decision.idle_machines)
            for start in decision.starts:
                machine_kind = _machine_kind(start.kind, start.pool, gpu_pools)
                idle_left[machine_kind] = idle_left.get(machine_kind, 0) - max(len(start.machines), 1)
            for queued in decision.queue:  # whom each condition names, which the inspect view says too
                overdue = _OVERDUE_WHY if idle_left.get(_machine_kind(queued.kind, queued.pool, gpu_pools), 0) <= 0 else ""
                together[queued.key] = self._tell_queued(by_key[queued.key], queued, now=now, name_pool=name_pools,
                                                         first=together[queued.key], starts=starts[queued.kind, queued.pool],
                                                         backing_off=backed_off_in.get(queued.key, ""), overdue=overdue)
            queue_rows = [{"job": q.key, "kind": q.kind, "position": q.position, "expectedStartSeconds": round(q.expected_start_seconds, 1),
                           **({"virtualCluster": q.pool} if q.pool is not None else {}),
                           **({"startsWith": together[q.key]} if together[q.key] < q.position else {}),
                           **({"backingOff": backed_off_in[q.key]} if q.key in backed_off_in else {}),
                           **({"refused": note.removeprefix("; ")} if (note := self._refusal_note(by_key[q.key])) else {})}
                          for q in decision.queue]
            self._queue_told = (now, decision.queue, queue_rows)
        pools = {w.key: w.pool for w in waiting}
        # A Job whose VC has free guarantee but AlloX's nodes no free GPU lacks machines, not quota.
        lacking = [key for key in decision.waiting_for_pool if guaranteed.get(pools.get(key) or "", 0) > 0]
        gpus_on_a_node, room = most_gpus(free), gpu_room(free)
        # Read only for a Job no machine takes, to say why: per node, ~80 ms a pass at 5,000
        # nodes, which every pass paid.
        rooms: _NodeRooms | None = None
        held: dict[str, tuple[str, str]] = {}  # Job key -> its Placed reason and message, for the inspect document
        # Started Jobs whose pods wait for a pool of estimator.nodesMayJoin to join: placeable once
        # a node joins, so not among the unplaceable (joined_now: started so this pass).
        waiting_for_nodes_said = [{"job": item.key, "kind": item.kind, "pool": pool_said(pool)} for item, pool in waiting_for_nodes]
        joined_now: list[str] = []
        for key in refused_whole:
            held[key] = ("Refused", self._refusal_told(by_key[key].metadata.uid))
        for key, message in backing_off.items():
            held[key] = (REASON_SUSPENDED_AGAIN, message)
            self._tell(by_key[key], status="False", reason=REASON_SUSPENDED_AGAIN, message=message)
        for key, message in beyond_its_nodes.items():
            held[key] = ("NoMachine", message)
            if self._tell(by_key[key], status="False", reason="NoMachine", message=message):
                self._event_once(by_key[key], "NoMachine", message)
        for key in decision.unplaceable:
            item, job = waiting_by_key[key], by_key[key]
            beyond = kinds_beyond(item, cpu_slot=decision.cpu_slot, gpus=gpus_on_a_node, room=room)
            joining = self._joining_start(job, configurations[job.metadata.uid], beyond=beyond)
            if joining is not None:
                kind, pool, why = joining
                self._start(job, configurations[job.metadata.uid], kind, why=why)
                joined_now.append(key)
                waiting_for_nodes_said.append({"job": key, "kind": kind, "pool": pool_said(pool)})
                continue
            outside = _gpu_outside_vcs(job, found) if found is not None else None
            rooms = rooms or self._node_rooms(capacity)
            in_use = _held_by_others(item, beyond=beyond, outside=outside, capacity=capacity, cpu_room=rooms.cpu_room)
            if in_use:
                held[key] = ("WaitingForMachine", _backing_off_first(backed_off_in.get(key), _in_use_message(in_use, pods=item.pods)))
                self._tell(job, status="False", reason="WaitingForMachine", message=held[key][1])
                continue
            message = _no_machine(item, job, beyond=beyond, room=room, outside=outside, capacity=capacity, nodes=rooms.nodes,
                                  beside_kept=rooms.beside_kept, cpu_room=rooms.cpu_room, beside_floor=rooms.beside_floor,
                                  floor_room=rooms.floor_room, window_seconds=self._unbound_hold_seconds)
            held[key] = ("NoMachine", _backing_off_first(backed_off_in.get(key), message))
            if self._tell(job, status="False", reason="NoMachine", message=held[key][1]):
                self._event_once(job, "NoMachine", message)  # the back-off ends: no second Event
        for key in lacking:
            lack = (f"virtual cluster {pools.get(key)!r} has free guaranteed GPUs, but AlloX's nodes (allox.nodeSelector) "
                    "have none free for this Job" if name_pools
                    else "GPUs are free only outside AlloX's nodes (allox.nodeSelector), none on them for this Job")
            held[key] = ("NoMachine", _backing_off_first(backed_off_in.get(key), lack
                         + (f" ({_pods(by_key[key])} machines at once)" if _pods(by_key[key]) > 1 else "")))
            self._tell(by_key[key], status="False", reason="NoMachine", message=held[key][1])
        for key in decision.waiting_for_pool:
            if key in lacking:
                continue
            if name_pools:
                reason, text = "WaitingForQuota", (f"waiting for a GPU of virtual cluster {pools.get(key)!r}: its guaranteed "
                                                   "GPUs are in use (AlloX does not count other virtual clusters' idle GPUs)")
            else:
                # One virtual cluster owns every GPU: its guarantee in use is every GPU in use, and
                # by pods AlloX did not start (a Job of AlloX's there would be a machine to queue
                # behind). Its users chose no VC, and there is no other's GPUs to speak of.
                reason, text = "WaitingForMachine", _in_use_message([KIND_GPU], pods=_pods(by_key[key]))
            held[key] = (reason, _backing_off_first(backed_off_in.get(key), text))
            self._tell(by_key[key], status="False", reason=reason, message=held[key][1])
        self.last = LastDecision(
            at=now, seconds=elapsed, from_state_seconds=decided - began, from_state_cpu_seconds=decided_cpu - began_cpu,
            queue_seconds=queue_seconds, queue_cpu_seconds=queue_cpu_seconds,
            undecided_machines=decision.undecided_machines, budget_seconds=self._budget_seconds,
            starts=[{"job": s.key, "kind": s.kind, "machine": s.machine, "seconds": s.seconds,
                     **({"machines": list(s.machines)} if len(s.machines) > 1 else {}),
                     **({"virtualCluster": s.pool} if s.pool is not None else {})} for s in decision.starts],
            queue=queue_rows, queue_planned_at=queue_planned_at,
            waiting_for_pool=list(decision.waiting_for_pool),
            unplaceable=[*(key for key in decision.unplaceable if key not in joined_now), *beyond_its_nodes],
            waiting_for_nodes=waiting_for_nodes_said,
            idle_machines=dict(decision.idle_machines),
            busy_machines=dict(decision.busy_machines), mechanism=self._settings.mechanism,
            progress=dict(decision.progress), progress_spread=decision.progress_spread,
            released=[{"job": item.key, "kind": item.kind, "why": state} for item, state in released],
            awaiting=[{"job": item.key, "kind": item.kind} for item in running if item.awaiting],
            held=[{"job": key, "reason": reason,
                   "message": message + self._refusal_note(by_key[key]) if reason in _NOTED_REASONS else message,
                   **({"virtualCluster": vc} if (vc := pools.get(key)) is not None else {})}
                  for key, (reason, message) in held.items()],
        )
        return decision

    def _queue_as_told(self, decision: AdmissionDecision, waiting: Sequence[WaitingJob], *,
                       now: float) -> tuple[AdmissionDecision, list[dict[str, Any]], float]:
        """``decision`` with the queue as last told (its inspect rows, and when it was planned) in
        place of one planned this pass: less the Jobs started or held outside the queue this pass,
        or no longer waiting, each expected start as far from ``now`` as told."""
        at, queue, rows = self._queue_told
        waits = ({item.key for item in waiting} - {start.key for start in decision.starts}
                 - {*decision.unplaceable, *decision.waiting_for_pool})
        since = max(now - at, 0.0)
        kept = tuple(replace(queued, expected_start_seconds=max(queued.expected_start_seconds - since, 0.0))
                     for queued in queue if queued.key in waits)
        shown = [{**row, "expectedStartSeconds": round(max(row["expectedStartSeconds"] - since, 0.0), 1)}
                 for row in rows if row["job"] in waits]
        return replace(decision, queue=kept), shown, at

    def _unrefused(
        self, item: WaitingJob, job: Job, refused: Mapping[str, tuple[tuple[bytes, str], frozenset[str]]]
    ) -> WaitingJob | None:
        """``item`` without the kinds the API server refused to start it in, while the Job is as
        it refused it (None when no kind is left); a Job changed since is tried again."""
        found = refused.get(job.metadata.uid)
        if found is None or found[0] != _refusable(job):
            return item
        self._refused[job.metadata.uid] = found
        seconds = {kind: value for kind, value in item.seconds.items() if kind not in found[1]}
        return replace(item, seconds=seconds) if seconds else None

    def _not_backed_off(self, item: WaitingJob, job: Job, now: float, backing_off: dict[str, str],
                        backed_off_in: dict[str, str]) -> WaitingJob | None:
        """``item`` without the kinds it was suspended again in whose back-off stands (None, and
        why in ``backing_off``, when no kind is left; with a kind left, the back-off its queue
        place is told with in ``backed_off_in``); a Job whose configurations changed since is
        not held back."""
        uid = job.metadata.uid
        found = self._backed_off.get(uid)
        if found is None:
            found = self._backed_off_before(job)  # a restarted cellfit reads it from the condition
            if found is None:
                return item
            self._backed_off[uid] = found
        if found[0] != job.annotations.get(ANNOTATION_CONFIGURATIONS, ""):
            del self._backed_off[uid]
            return item
        standing = {kind: found[1][kind] for kind in item.seconds if kind in found[1] and found[1][kind][1] > now}
        if not standing:
            return item
        seconds = {kind: value for kind, value in item.seconds.items() if kind not in standing}
        if seconds:
            backed_off_in[item.key] = "; ".join(
                self._backing_off_said(kind, times=times, until=until, pool=self._awaited_pool(job, kind))
                for kind, (times, until) in sorted(standing.items()))
            return replace(item, seconds=seconds)
        backing_off[item.key] = "; ".join(
            self._backed_off_message(kind, times=times, until=until, pool=self._awaited_pool(job, kind))
            for kind, (times, until) in sorted(standing.items()))
        return None

    def _backed_off_message(self, kind: str, *, times: int, until: float, pool: Mapping[str, str] | None) -> str:
        """The back-off in ``kind`` a Job is told while no kind is left to start it in; ``pool``:
        the listed pool its pods waited for (held to ``estimator.pendingLimitSeconds``, not the
        NotBound limit), as its SuspendedAgain Event said."""
        back_off = f"{self._unbound_hold_seconds:.0f} s"
        failed = f"no pod was bound within {back_off}"
        if pool is not None:
            failed = (f"no node of {pool_said(pool)} joined (estimator.nodesMayJoin) and no pod was bound within "
                      f"{self._joining_limit_seconds:.0f} s (estimator.pendingLimitSeconds)")
        # No ";" before "; not started": _BACKED_OFF_MESSAGE reads the back-off back after a restart.
        return (f"{kind} start failed: {failed}; not started in {kind} again before "
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(until))} (suspended again {times} time{'s' if times > 1 else ''}; "
                f"AlloX waits {back_off}, doubling each time, at most {BACK_OFF_MAX_SECONDS // 60} min)")

    def _backing_off_said(self, kind: str, *, times: int, until: float, pool: Mapping[str, str] | None) -> str:
        """The back-off in ``kind`` a Job queued in its other kind is told before its place. No
        "(" nor ";" before "(suspended again": _BACKING_OFF_SAID reads it back after a restart."""
        limit = self._joining_limit_seconds if pool is not None else self._unbound_hold_seconds
        joined = f", no node of {pool_said(pool)} having joined" if pool is not None else ""
        return (f"backing off on {kind} until {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(until))} after none of its "
                f"pods was bound within {limit:.0f} s{joined} (suspended again {times} time{'s' if times > 1 else ''})")

    def _backed_off_before(self, job: Job) -> tuple[str, dict[str, tuple[int, float]]] | None:
        """The back-off a Job's ``Placed`` condition says (``SuspendedAgain``, as a cellfit before a
        restart told it), for each kind whose configuration is still the one the template recorded
        when it was started there (its user edited it since: not held back)."""
        placed = job.condition(CONDITION_PLACED)
        if placed is None or not placed.message:
            return None
        if placed.reason == REASON_SUSPENDED_AGAIN:
            found = _BACKED_OFF_MESSAGE.finditer(placed.message)
        elif (placed.status, placed.reason) == ("False", "Queued"):  # backed off in one kind, queued in the other
            found = _BACKING_OFF_SAID.finditer(backing_off_said(placed.message))
        elif placed.status == "False" and placed.reason in _HELD_REASONS:  # backed off in one kind, the other held
            found = _BACKING_OFF_SAID.finditer(placed.message.split(_HELD_AFTER_BACK_OFF, 1)[0] if _HELD_AFTER_BACK_OFF in placed.message else "")
        else:
            return None
        text = job.annotations.get(ANNOTATION_CONFIGURATIONS, "")
        kinds: dict[str, tuple[int, float]] = {}
        for said in found:
            kind, until = said["kind"], timestamp(said["until"])
            try:
                recorded = recorded_configuration(json.loads(bytes(job.spec.template)), kind)
                current = parse_configurations_cached(text)
            except (ValueError, InvalidAnnotation):
                continue
            if until is None or kind not in current:
                continue
            if recorded is not None and configuration_digest(recorded) != configuration_digest(current[kind]):  # type: ignore[index]
                continue
            kinds[kind] = (int(said["times"]), until)
        return (text, kinds) if kinds else None

    def _tell_trials_waiting(self, trials: Sequence[WaitingJob], by_key: Mapping[str, Job]) -> None:
        """Trial Jobs never queue: one no machine takes now waits for the pass that finds one."""
        for trial in trials:
            kinds = " or ".join(sorted(trial.seconds))
            self._tell(by_key[trial.key], status="False", reason="WaitingForMachine",
                       message=f"trial Job: no {kinds} machine is free for it now; it starts at once when one is "
                       "(trial Jobs do not wait in AlloX's queue)")

    def _holding(
        self, now: float, running: list[RunningJob], by_key: Mapping[str, Job]
    ) -> tuple[list[RunningJob], list[tuple[RunningJob, Hold]], list[tuple[RunningJob, Mapping[str, str]]]]:
        """The started Jobs that hold AlloX's machines, and the others with why
        (placer/holding.py), and of those the ones whose pods wait for a pool of
        ``estimator.nodesMayJoin`` to join, with the pool; a Job that stops or starts holding
        again is told."""
        if self._job_pods is None:
            return running, [], []
        uids = frozenset(by_key[item.key].metadata.uid for item in running)
        self._released = {uid: state for uid, state in self._released.items() if uid in uids}  # Jobs no longer running are forgotten
        self._was_bound &= uids
        self._bound_recorded &= uids
        self._awaiting &= uids
        self._idle_since = {uid: at for uid, at in self._idle_since.items() if uid in uids}
        self._let_go_read &= uids
        self._bound_at = {uid: at for uid, at in self._bound_at.items() if uid in uids}
        if not running:
            return running, [], []
        found = self._job_pods(uids)
        kept: list[RunningJob] = []
        released: list[tuple[RunningJob, Hold]] = []
        waiting_for_nodes: list[tuple[RunningJob, Mapping[str, str]]] = []
        for item in running:
            job = by_key[item.key]
            uid = job.metadata.uid
            pods = found.get(uid)
            state = hold(pods=pods, started=item.started, now=now, unbound_hold_seconds=self._unbound_hold_seconds)
            by_hand = not job.suspended and ANNOTATION_PLACEMENT not in job.annotations and uid not in self._started
            if uid not in self._let_go_read:
                self._let_go_read.add(uid)
                self._read_back_let_go(job, item.kind, by_hand=by_hand)
            if state == "running":
                self._was_bound.add(uid)
                self._record_bound(job)
            elif uid not in self._was_bound and bound_in_this_run(job.annotations, job.status.startTime if job.status else None):
                self._was_bound.add(uid)  # seen bound before this cellfit restarted
                self._bound_recorded.add(uid)
            # Pods waiting for a listed pool's node get the wait a sampling pod got for it, and
            # hold no machine while no node of the pool up now could take them.
            pool = self._awaited_pool(job, item.kind) if state in ("starting", "unbound") and uid not in self._was_bound else None
            if state == "starting" and pool is not None and not self._pool_takes(pool, item):
                state = "joining"
            beside_idle = self._idle_since.get(uid)
            if (by_hand and state in ("starting", "unbound") and uid not in self._was_bound and pool is None
                    and uid not in self._released and (beside_idle is None or now - beside_idle < self._unbound_hold_seconds)):
                # Unsuspended by its user, no pod of it bound yet: it holds no machine, and its
                # pending pods take the first of its kind to free, ahead of AlloX's queue; its
                # estimate runs from when one binds (user26: 3 busy GPUs on 2, a phantom end).
                # Not once they stayed unbound beside an idle machine of its kind for the
                # NotBound limit: they wait for something else (a node they fit), and it holds
                # none, told so as a Job AlloX started would be (below), until one is bound; nor
                # one told so before (its pods ran outside AlloX's nodes, say).
                self._awaiting.add(uid)
                self._tell_awaiting(job, item.kind)
                kept.append(replace(item, awaiting=True))
                continue
            if state == "running" and by_hand and uid in self._awaiting:
                self._awaiting.discard(uid)
                self._idle_since.pop(uid, None)
                self._bound_at[uid] = now
                if uid not in self._released:  # else told it is bound again, below
                    self._tell(job, status="True", reason="Unsuspended", message=f"{RUNNING_ON}{item.kind}: {_BY_ITS_USER}")
            bound_at = self._bound_at.get(uid)
            if bound_at is not None and bound_at > item.started:
                item = replace(item, started=bound_at)
            joining = pool is not None and now - item.started < self._joining_limit_seconds
            if pool is not None and state != "starting" and joining:
                waiting_for_nodes.append((item, pool))
            self._remember_why(job, item.kind)  # before a condition below says where its pods are instead
            resuming = _resuming(job, pods)
            if resuming:
                self._tell(job, status="True", reason=REASON_PREEMPTED,
                           message=f"preempted: no pod of it runs now; its next pod waits to be placed, to resume on {item.kind}")
            if state in HOLDING:
                kept.append(item)
                placed = job.condition(CONDITION_PLACED)
                if state == "running" and placed is not None and placed.reason == REASON_PREEMPTED:
                    self._released.pop(uid, None)
                    self._tell(job, status="True", reason="Started", message=f"{RUNNING_ON}{item.kind}: {RESUMED}")
                elif state == "running" and uid in self._released:
                    self._released.pop(uid, None)
                    self._tell(job, status="True", reason="Started", message=f"{RUNNING_ON}{item.kind}: {BOUND_AGAIN}")
                continue
            released.append((item, state))
            # A trial Job is left pending: its pod may wait out its victims' grace period (FitGpp
            # keeps their room for it), and trial Jobs never wait in AlloX's queue.
            if (state == "unbound" and not resuming and uid not in self._was_bound and ANNOTATION_PLACEMENT in job.annotations
                    and not _is_trial(job) and not joining):
                self._suspend_again(job, item.kind, pool=pool)
                continue
            if resuming:  # told above: its pods were bound, then preempted, not never bound
                self._released[uid] = state
            elif state == "joining":
                pass  # its start said it waits for a node to join; the NotBound limit has not passed
            elif joining and pool is not None:
                self._released[uid] = state
                self._tell(job, status="True", reason="NotBound", message=(
                    f"started on {item.kind}, its pods wait for a node of {pool_said(pool)} to join (estimator.nodesMayJoin): "
                    f"AlloX keeps no {item.kind} machine for it meanwhile, and suspends it again if none is bound within "
                    f"{self._joining_limit_seconds:.0f} s of its start (estimator.pendingLimitSeconds)"))
            elif state in ("elsewhere", "unbound") and self._released.get(uid) != state:
                # Told again when where its pods are changes: a pod on a deleted node (elsewhere
                # until the cache drops the node) is then replaced by one waiting to be placed.
                self._released[uid] = state
                self._tell(job, status="True", reason="PodsElsewhere" if state == "elsewhere" else "NotBound",
                           message=explain(item.kind, state, unbound_hold_seconds=self._unbound_hold_seconds,
                                           was_bound=uid in self._was_bound))
        return kept, released, waiting_for_nodes

    def _read_back_let_go(self, job: Job, kind: str, *, by_hand: bool) -> None:
        """A running Job that was told it holds no machine in its present spell of running (by
        this cellfit before it restarted, or by the replica that led before) is let go here too,
        so that a pod of it bound since, or later, is told it runs ("its pods are bound again"):
        before, one bound while no cellfit led left ``NotBound`` or ``PodsElsewhere`` standing
        on a Job AlloX started, running for the rest of its run. One its user unsuspended holds
        no machine here either: before, each restart or leader change kept the idle machine of
        its kind for it for the NotBound limit again, the queue waiting behind its unbound pods
        (review27 R4); its pods never bound on AlloX's nodes: when one is, its estimate runs from
        then. (One AlloX started holds by its start time and its pods-bound record, which a
        restart reads back without this.)"""
        uid = job.metadata.uid
        let_go = _let_go_in_this_spell(job)
        if let_go is None or uid in self._released:
            return
        self._released[uid] = let_go
        if not by_hand:
            return
        placed = job.condition(CONDITION_PLACED)
        if let_go == "unbound" and placed is not None and placed.message == explain(
                kind, "unbound", unbound_hold_seconds=self._unbound_hold_seconds, was_bound=True):
            self._was_bound.add(uid)  # its pods were bound, then replaced: they wait to be placed again
        elif let_go == "unbound":
            self._awaiting.add(uid)

    def _node_rooms(self, capacity: Capacity) -> _NodeRooms:
        """What AlloX's nodes hold for one pod, each and in all, as NoMachine's reasons weigh it."""
        allocatable_by_node = self._allocatable_by_node()
        nodes = tuple(_in_demand_units(allocatable) for allocatable in allocatable_by_node.values())
        # Each node as a CPU slot is cut from it: less what it keeps beside its GPUs.
        beside_kept = tuple(_beside_kept(node, kept=self._kept_on(name)) for name, node in zip(allocatable_by_node, nodes))
        # Less only allox.reservedCpuPerGpu, which stays: what a CPU pod never gets beyond.
        floor = Demand(cpu=self._settings.reserved_cpu_per_gpu)
        beside_floor = tuple(_beside_kept(node, kept=floor) for node in nodes)
        return _NodeRooms(nodes=nodes, beside_kept=beside_kept,
                          cpu_room=_total(beside_kept) if beside_kept else _beside_kept(capacity, kept=self._kept_on(None)),
                          beside_floor=beside_floor, floor_room=_total(beside_floor) if beside_floor else _beside_kept(capacity, kept=floor))

    def _pool_takes(self, pool: Mapping[str, str], item: RunningJob) -> bool:
        """Whether a node of AlloX's carrying ``pool``'s labels, up now, could take a pod of the
        started Job (its allocatable holds what one pod asks in its kind); true where those nodes
        are not known (nothing to judge by: held as any starting Job)."""
        if self._allocatable_carrying is None:
            return True
        asks = item.demand.get(item.kind)
        nodes = self._allocatable_carrying(pool).values()
        if asks is None:
            return bool(nodes)
        return any(asks.cpu <= room.cpu and asks.memory <= room.memory and asks.gpu <= room.gpu
                   for room in map(_in_demand_units, nodes))

    def _record_bound(self, job: Job) -> None:
        """Record on a Job AlloX started that a pod of it was bound in this run, once per run:
        a cellfit restarted after its pods left their node reads it back and does not suspend it
        again as one none of whose pods was ever bound. Only a Job the NotBound rule may suspend
        (AlloX's placement, not a trial Job) needs it; one whose start time the watch does not
        show yet is recorded on a later pass; a write that fails is tried again next pass. The
        replica whose bind verb bound the pod writes it first, leader or not
        (ClusterCache.bind): this leader's write is for a record that one could not make."""
        uid = job.metadata.uid
        start_time = job.status.startTime if job.status else None
        if uid in self._bound_recorded or not start_time or ANNOTATION_PLACEMENT not in job.annotations or _is_trial(job):
            return
        if not bound_in_this_run(job.annotations, start_time):
            try:
                self._api.annotate_job(namespace=job.metadata.namespace, name=job.metadata.name,
                                       annotations={ANNOTATION_PODS_BOUND: start_time})
            except CellfitError as error:
                log.warning("could not record that a Job's pods were bound", extra={
                    "job": f"{job.metadata.namespace}/{job.metadata.name}", "reason": str(error)[:300]})
                return
        self._bound_recorded.add(uid)

    def _suspend_again(self, job: Job, kind: str, *, pool: Mapping[str, str] | None = None) -> None:
        """A Job AlloX started none of whose pods was bound in ``unbound_hold_seconds`` (the room
        it was started on was kept for others: a resumed pod, a preemptor; or no node takes its
        pods now) goes back to AlloX's queue, suspended again: left unsuspended it stayed Pending
        for ever while AlloX counted its machine free (user24, F7). The Job controller deletes its
        pods; its ``cellfit.io/placement`` stays, so its next start takes that configuration out
        of the template first. Guarded by the Job's version and ``suspend: false``: a Job its
        user changed or suspended meanwhile is left to the next pass. A Job its user unsuspended
        by hand (no placement) is never suspended here."""
        namespace, name = job.metadata.namespace, job.metadata.name
        version = job.metadata.resourceVersion
        operations = [
            {"op": "test", "path": "/spec/suspend", "value": False},
            *([{"op": "test", "path": "/metadata/resourceVersion", "value": version}] if version else []),
            {"op": "replace", "path": "/spec/suspend", "value": True},
        ]
        try:
            self._api.patch_job(namespace=namespace, name=name, operations=operations)
        except CellfitError as error:
            log.warning("could not suspend again a Job none of whose pods was bound",
                        extra={"job": f"{namespace}/{name}", "reason": str(error)[:300]})
            return
        limit = f"{self._unbound_hold_seconds:.0f} s"
        cause = "the room it was started on went to other pods, or no node takes them now"
        if pool is not None:  # waited for a listed pool's node, which never joined
            limit = f"{self._joining_limit_seconds:.0f} s (estimator.pendingLimitSeconds)"
            cause = f"no node of {pool_said(pool)} joined (estimator.nodesMayJoin): check the autoscaler's node group for those labels"
        message = (f"suspended again, back in AlloX's queue: started on {kind}, and none of its pods was bound to a node "
                   f"within {limit} ({cause})")
        with self._lock:
            self._started.pop(job.metadata.uid, None)
            self._queued_where.pop(job.metadata.uid, None)  # queued again: told again
        self._released.pop(job.metadata.uid, None)
        configurations = job.annotations.get(ANNOTATION_CONFIGURATIONS, "")
        before = self._backed_off.get(job.metadata.uid)
        kinds = dict(before[1]) if before is not None and before[0] == configurations else {}
        times = kinds.get(kind, (0, 0.0))[0] + 1
        # Up to the minute, so "not started in gpu again before 00:07 UTC" is what happens.
        until = math.ceil((self._clock() + suspended_again_back_off(times, base_seconds=self._unbound_hold_seconds)) / 60) * 60
        kinds[kind] = (times, float(until))
        self._backed_off[job.metadata.uid] = (configurations, kinds)
        self._event(job, REASON_SUSPENDED_AGAIN, message)
        self._tell(job, status="False", reason=REASON_SUSPENDED_AGAIN, message=message)
        log.info("job suspended again", extra={"job": f"{namespace}/{name}", "kind": kind})

    def _within_selected_nodes(self, waiting: list[WaitingJob], by_key: Mapping[str, Job], beyond: dict[str, str]) -> list[WaitingJob]:
        """The waiting Jobs without the kinds whose node selector (the template's and the
        configuration's) admits only nodes of AlloX's none of which holds a pod of it, judged by
        those nodes' allocatable as the estimator judges it: AlloX's machines are cut from all of
        its nodes, and a larger node of another pool (one an autoscaler added for a listed pool's
        Job) made such a configuration look startable; its pods then never bound. A Job left with
        no kind is dropped, and why in ``beyond``. Not judged: a kind only a pool of
        ``estimator.nodesMayJoin`` runs (the autoscaler sizes the node it adds), one whose selector
        no node carries now (nothing to judge by), and required node affinity."""
        assert self._allocatable_carrying is not None
        if len(self._selectors) > 8192:
            self._selectors.clear()
        carrying: dict[frozenset[tuple[str, str]], list[Capacity]] = {}  # this pass's, per selector
        kept: list[WaitingJob] = []
        for item in waiting:
            job = by_key[item.key]
            reasons: dict[str, str] = {}
            for kind, (selector, awaited) in self._selected_nodes(job).items():
                demand = item.demand.get(kind)
                if kind not in item.seconds or demand is None or awaited is not None:
                    continue
                key = frozenset(selector.items())
                nodes = carrying.get(key)
                if nodes is None:
                    nodes = carrying[key] = [_in_demand_units(node) for node in self._allocatable_carrying(selector).values()]
                never = _beyond_each_node(demand, nodes) if nodes else None
                if never is not None:
                    asked = f"{demand.cpu:g} cores" + (f" and {demand.memory:g} GiB" if demand.memory > 0 else "")
                    if demand.gpu > 0:
                        asked = f"{demand.gpu:g} GPU{'' if demand.gpu == 1 else 's'}, {asked}"
                    reasons[kind] = f"{ANNOTATION_CONFIGURATIONS}.{kind}.resources, {asked} a pod, {never}"
            if not reasons:
                kept.append(item)
                continue
            seconds = {kind: value for kind, value in item.seconds.items() if kind not in reasons}
            if seconds:
                kept.append(replace(item, seconds=seconds))
                continue
            said = "; ".join(
                f"AlloX's nodes ({ALLOX_NODES}) carrying {pool_said(self._selected_nodes(job)[kind][0])} cannot start this Job: {why}"
                for kind, why in sorted(reasons.items()))
            beyond[item.key] = said
        return kept

    def _selected_nodes(self, job: Job) -> Mapping[str, tuple[Mapping[str, str], Mapping[str, str] | None]]:
        """Per kind of the Job whose pods carry a node selector (the template's, the
        configuration's over it), that selector and the pool of ``estimator.nodesMayJoin`` only
        whose nodes run them (None: none)."""
        text = job.annotations.get(ANNOTATION_CONFIGURATIONS, "")
        template = bytes(job.spec.template) if job.spec.has_template else b""
        found = self._selectors.get((text, template))
        if found is not None:
            return found
        selected: dict[str, tuple[Mapping[str, str], Mapping[str, str] | None]] = {}
        try:
            configurations = parse_configurations_cached(text)
            pod = json.loads(template) if template else {}
        except (InvalidAnnotation, ValueError):
            configurations, pod = None, {}
        for kind in configurations.kinds if configurations is not None else ():
            configuration = configurations[kind]  # type: ignore[index]
            # The template as a start in ``kind`` places it: less what an earlier placement in
            # another kind added (a Job suspended again keeps that kind's selector there).
            spec = unplaced(pod, configuration).get("spec") or {}
            selector = {**(spec.get("nodeSelector") or {}), **configuration.node_selector}
            if selector:
                selected[kind] = (selector, self._awaited_pool(job, kind))
        self._selectors[text, template] = selected
        return selected

    def _awaited_pool(self, job: Job, kind: str) -> Mapping[str, str] | None:
        """The pool of ``estimator.nodesMayJoin`` whose nodes alone run the Job's pods in
        ``kind`` (scheduler/kube/joining.py, the estimator's rule); None when none is."""
        if not self._nodes_may_join:
            return None
        try:
            configuration = parse_configurations_cached(job.annotations.get(ANNOTATION_CONFIGURATIONS))[kind]  # type: ignore[index]
        except (InvalidAnnotation, KeyError):
            return None
        # The template as a start in ``kind`` places it (as _selected_nodes reads it): a Job
        # suspended again keeps an earlier placement's selector there, another pool's perhaps.
        pod = json.loads(bytes(job.spec.template)) if job.spec.has_template else {}
        spec = unplaced(pod, configuration).get("spec") or {}
        selector = {**(spec.get("nodeSelector") or {}), **configuration.node_selector}
        return awaited_pool(selector=selector, spec=spec, pool=self._settings.node_selector, may_join=self._nodes_may_join)

    def _joining_start(
        self, job: Job, configurations: Configurations, *, beyond: frozenset[str]
    ) -> tuple[str, Mapping[str, str], str] | None:
        """A Job no node of AlloX's holds now in a kind that only a pool an autoscaler scales up
        from zero runs: started in that kind (the first such, by name), the pool and why, for its Pending
        pods are what make the autoscaler add the node; None when no such kind. Judged against
        the nodes up now, it "never fits" and is never started, so the node never joins."""
        for kind in sorted(beyond):
            if kind in configurations.kinds and (pool := self._awaited_pool(job, kind)) is not None:
                return kind, pool, (f"no node of AlloX's holds it now, and only a node of {pool_said(pool)} runs it: it waits for "
                              f"one to join (estimator.nodesMayJoin), up to {self._joining_limit_seconds:.0f} s "
                              "(estimator.pendingLimitSeconds)")
        return None

    def _trials(
        self, now: float, trials: list[WaitingJob], waiting: list[WaitingJob], running: list[RunningJob], free: list[NodeResources],
        gpu_pools: Mapping[str, int] | None, gpu_slots: Mapping[str, int] | None, by_key: Mapping[str, Job],
    ) -> list[tuple[WaitingJob, TrialChoice]]:
        """Trial Jobs start at once, each where it finishes first (``choose_for_trial``); under
        HiveD a trial Job's GPUs are its VC's (``gpu_pools``). Each start takes what it counts on:
        a best-effort pod FitGpp preempts for it, or the first busy GPU freeing (which then frees
        again when it is done), so the next trial Job, in this pass or a later one, sees what
        is left (``_preemptible``)."""
        if self._trial_gpu_by:
            on_gpu = {by_key[r.key].metadata.uid for r in running if r.kind == KIND_GPU}
            self._trial_gpu_by = {uid: by for uid, by in self._trial_gpu_by.items() if uid in on_gpu}
        if not trials:
            return []
        beside = beside_each_gpu([*waiting, *trials], running, free_nodes=free, reserved_cpu_per_gpu=self._reserved_cpu_per_gpu,
                                 reserved_memory_per_gpu=self._reserved_memory_per_gpu)
        reserved = beside.cpu
        queued_slot = queued_cpu_slot([*waiting, *trials], free_nodes=free, reserved_cpu_per_gpu=reserved, reserved_memory_per_gpu=beside.memory)
        cpu_slot = DEFAULT_CPU_SLOT if queued_slot is None else queued_slot
        holding = [r for r in running if not r.awaiting]
        machines = IdleMachines(free_nodes=free, running=holding, cpu_slot=cpu_slot, reserved_cpu_per_gpu=reserved, gpu_pools=gpu_pools,
                                gpu_slots=gpu_slots_for([*waiting, *trials], free_nodes=free, gpu_pools=gpu_pools) if gpu_slots is None else gpu_slots,
                                cpu_slot_queued=queued_slot is not None, reserved_memory_per_gpu=beside.memory).laid_out()
        idle: dict[str, int] = {}
        for machine in machines:
            idle[machine.kind] = idle.get(machine.kind, 0) + 1
        graces = self._preemptible(now, running, by_key)
        ends_by_pool: dict[str | None, list[float]] = {}
        gpus_on_a_node, room = most_gpus(free), gpu_room(free)
        chosen = []
        for trial in sorted(trials, key=lambda t: (t.arrival, t.key)):
            gpu = "gpu" if gpu_pools is None else (pool_kind(trial.pool) if trial.pool is not None else "")
            pool = None if gpu_pools is None else trial.pool
            gpu_ends = ends_by_pool.get(pool)
            if gpu_ends is None:
                ours = [r for r in running if r.kind == "gpu" and (gpu_pools is None or r.pool == trial.pool)]
                # A hand-started Job whose pod waits takes the first GPU to free (an idle one
                # first): no phantom end of its own (user26: "a busy GPU frees in ~0 s").
                idle[gpu], gpu_ends = claimed_first(
                    [max(0.0, r.started + r.seconds[r.kind] - now) for r in ours if not r.awaiting],
                    [r.seconds[r.kind] for r in ours if r.awaiting for _ in range(r.pods)],
                    idle=idle.get(gpu, 0))
                ends_by_pool[pool] = gpu_ends
            seen = {"cpu": idle.get("cpu", 0), "gpu": idle.get(gpu, 0)}
            # No GPU of its VC, or a configuration no node holds: not a kind of it now.
            dropped = kinds_beyond(trial, cpu_slot=cpu_slot, gpus=gpus_on_a_node, room=room) | ({"gpu"} if not gpu else set())
            seconds = {k: v for k, v in trial.seconds.items() if k not in dropped} if dropped else trial.seconds
            # A trial Job of several pods needs that many idle machines of a kind to start on it.
            choice = choose_for_trial(seconds=seconds, idle={k: v // trial.pods for k, v in seen.items()},
                                      gpu_free_in=gpu_ends[0] if gpu_ends else None, preemption_seconds=graces[0] if graces else None)
            if choice is None:
                continue
            if choice.kind == "gpu":
                self._trial_gpu_by[by_key[trial.key].metadata.uid] = choice.gpu_by
                if choice.gpu_by in ("preemption", "frees") and choice.gpu_wait is not None:
                    _take_gpus(choice, pods=trial.pods, run=seconds["gpu"], graces=graces, ends=gpu_ends)
            machine_kind = gpu if choice.kind == "gpu" else choice.kind
            idle[machine_kind] = max(0, idle.get(machine_kind, 0) - trial.pods)
            chosen.append((trial, choice))
        return chosen

    def _preemptible(self, now: float, running: Sequence[RunningJob], by_key: Mapping[str, Job]) -> list[float]:
        """The grace periods of the best-effort pods a trial Job may still count on FitGpp
        preempting, shortest first: those the trial Jobs started earlier on a GPU and not bound
        yet (nominated, their victims still leaving, or their pods not made yet) will take are
        not (``preemptible_for_trials``): FitGpp preempts for every trial pod that finds no GPU,
        whatever it was told. One this controller started on an idle GPU owes none."""
        if self._best_effort_gpus is not None:
            found = self._best_effort_gpus()
        else:
            grace = self._preemption_grace()
            found = BestEffortGpus(graces=() if grace is None else (grace,))
        started = {uid: r for r in running if r.kind == KIND_GPU and self._trial_gpu_by.get(uid := by_key[r.key].metadata.uid) != "idle"
                   and _is_trial(by_key[r.key])}
        if not started:
            return sorted(found.graces)
        pods = self._job_pods(frozenset(started)) if self._job_pods is not None else {}
        owed = 0
        for uid, item in started.items():
            have = pods.get(uid)
            if have is None and now - item.started >= self._unbound_hold_seconds:
                continue  # no pod of it left (placer/holding.py: gone)
            owed += max(0, item.pods - (have.here if have is not None else 0))
        return preemptible_for_trials(found, owed=owed)

    def _decide(self, **inputs: Any) -> tuple[AdmissionDecision, QueueSource]:
        """:func:`decide_starts`' decision and where its queue comes from, in the child process
        when ``allox.solverProcess`` (a broken child is replaced, and that one matching solved
        here)."""
        if not self._settings.solver_process or not inputs["waiting"]:
            # Nothing to match: no child is started for it (a new one spends a second or two of
            # CPU importing the matching, beside kube-scheduler, at every leader's first pass).
            decision, plan = decide_starts(**inputs, reuse=self._reuse, stop=self._stop_after(self._here_budget_seconds))
            if inputs["waiting"]:
                # What the matching keeps from pass to pass, out of the extender's full collections.
                freeze_once_more(after="AlloX's first decision in the extender's process")
            return decision, plan.queue
        try:
            if self._solver is None:
                self._solver = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                   initializer=exit_with_parent, initargs=(os.getpid(),))
                self._solver_started = False
                self._solver_pid = self._ask(os.getpid)
            # As msgpack, the Jobs the child holds from last pass by their keys (solver_wire.py).
            for _ in range(2):
                answer = self._session.answer(self._ask(decide_encoded, self._session.request(inputs, budget_seconds=self._budget_seconds)))
                self._solver_started = True
                if answer is not None:
                    answered, cut_short = self._session.answered_pass, answer.undecided_machines > 0
                    return answer, lambda: self._queue_from_child(answered, inputs, cut_short=cut_short)
            raise RuntimeError("the AlloX solver process asked for every Job twice")  # a defect: it holds what it was sent whole
        except BrokenProcessPool:
            log.warning("the AlloX solver process died; starting another")
            self._solver = None
            self._session.forget()
            decision, plan = decide_starts(**inputs, stop=self._stop_after(self._here_budget_seconds))
            return decision, plan.queue
        except BaseException:
            self._session.forget()
            raise

    def _stop_after(self, budget_seconds: float) -> Callable[[], bool]:
        """A decision's ``stop``: True once ``budget_seconds`` have passed since it was made."""
        deadline = self._monotonic() + budget_seconds
        return lambda: self._monotonic() >= deadline

    def _ask(self, call: Callable[..., R], *arguments: Any) -> R:
        """``call(*arguments)`` in the solver process. A child that answers nothing within
        ``allox.solverTimeoutSeconds`` (stopped, or stuck) is killed, and :class:`SolverHung` raised:
        the pass starts nothing (solving here could stick the same way, holding the interpreter
        the extender's verbs need), and the next pass starts another child. Until it answered a
        decision, it is given at least :data:`SOLVER_START_SECONDS` (its start)."""
        solver = self._solver
        assert solver is not None
        starting = not self._solver_started
        deadline = max(self._solver_timeout_seconds, SOLVER_START_SECONDS) if starting else self._solver_timeout_seconds
        try:
            return solver.submit(call, *arguments).result(timeout=deadline)
        except FutureTimeout:
            self._kill_solver()
            raise SolverHung(f"the AlloX solver process answered nothing in {deadline:g} s "
                             f"({'starting, at least ' + format(SOLVER_START_SECONDS, 'g') + ' s; ' if starting else ''}"
                             "allox.solverTimeoutSeconds): it was killed, "
                             "this pass starts no Job, and the next pass starts another") from None

    def _kill_solver(self) -> None:
        solver, pid = self._solver, self._solver_pid
        self._solver, self._solver_pid = None, None
        self._session.forget()
        pids: set[int] = set()
        if pid is not None:
            pids = {pid}
        elif solver is not None:
            pids = set(solver._processes or ())  # stuck before it told its pid: its pool's record
        for each in pids:
            try:
                os.kill(each, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it died meanwhile
        if solver is not None:
            solver.shutdown(wait=False, cancel_futures=True)

    def _queue_from_child(self, pass_number: int, inputs: Mapping[str, Any], *, cut_short: bool = False) -> tuple[Queued, ...] | None:
        """The queue the child planned for pass ``pass_number`` (it keeps the pass's plan). A
        child that died since it answered (or holds no plan of that pass) is replaced as in
        :meth:`_decide`, and the queue planned here: ``decide_starts`` is deterministic, so the
        same inputs give the starts just carried out and the queue the child would have planned.
        That costs a whole decision in this process, but only when a child dies, and after every
        start is out; skipping the queue instead would leave the queued Jobs' conditions, the
        inspect output and the queue gauge one pass behind, until a change or the resync. The
        same when :meth:`stop` shut the child down meanwhile. A pass its budget cut short is not
        decided again here (where its walk stopped depends on the clock, so its starts would not
        be those carried out): None, the queue as told stands until the next pass tells it."""
        solver = self._solver
        queue: tuple[Queued, ...] | None = None
        if solver is not None:
            try:
                queue = self._session.queue(self._ask(queue_encoded, pass_number))
            except SolverHung as error:
                log.warning("the AlloX solver process planned no queue; planning it here", extra={"reason": str(error)})
            except BrokenProcessPool:
                log.warning("the AlloX solver process died before planning the queue; starting another")
                self._solver = None
                self._session.forget()
            except (RuntimeError, CancelledError):
                if not self._stop.is_set():
                    raise
                # stop() shut the executor down while the starts were carried out (the term
                # ended): it takes no request, and cancels one it had not sent. The pass ends
                # as in process, its queue told, rather than failing after its starts.
        if queue is not None:
            return queue
        if cut_short:
            return None
        _, plan = decide_starts(**inputs)
        return plan.queue()

    def _classify(self, job: Job, now: float, configurations: dict[str, Configurations]) -> WaitingJob | RunningJob | None:
        if job.finished or job.metadata.deletionTimestamp:
            if job.finished and not job.metadata.deletionTimestamp:
                self._tell_finished(job)
            return None
        annotations = job.annotations
        configurations_text = annotations.get(ANNOTATION_CONFIGURATIONS)
        try:
            parsed = parse_configurations_cached(configurations_text)
        except InvalidAnnotation:
            return None  # the estimator reports it
        assert configurations_text is not None  # parsed
        configurations[job.metadata.uid] = parsed
        seconds: Mapping[str, float] = {}
        text = annotations.get(ANNOTATION_ESTIMATE)
        if text:
            try:
                seconds = parse_estimate_cached(text).seconds
            except InvalidAnnotation:
                seconds = {}
        # The estimate's kinds this Job has a configuration for: its mapping itself when that is
        # all of them (shared with the parse cache, so read only; copying was a tenth of reading
        # a Job the first time).
        known = seconds if parsed.by_kind.keys() >= seconds.keys() else {k: value for k, value in seconds.items() if k in parsed}
        key = f"{job.metadata.namespace}/{job.metadata.name}"
        user = self._user(job)
        start = self._started.get(job.metadata.uid)
        placement = annotations.get(ANNOTATION_PLACEMENT) or (start[0] if start is not None else None)
        if not job.suspended:
            # The kind its pods are made in: the template's label (a start writes it in the patch
            # that unsuspends, and a running Job's template changes no more), not the Job's
            # annotation alone, which its user may edit while it runs.
            labelled = _template_labels(job).get(LABEL_PLACEMENT)
            kind = (labelled if labelled in parsed else None) or placement or template_kind(job, self._gpu_resource, kinds=parsed.kinds)
            if job.metadata.uid not in self._started:  # else its start tells it, this pass or the last
                self._tell_running(job, kind, by_allox=ANNOTATION_PLACEMENT in annotations)
            self._started.pop(job.metadata.uid, None)
            started = timestamp(job.status.startTime if job.status else None) or now
            return self._running(job, key=key, user=user, kind=kind, started=started, known=known, configurations=configurations_text)
        if start is not None:
            if (job.metadata.resourceVersion or "") == start[1]:
                # Started by this process, the watch not showing the unsuspend yet: it runs from
                # now, and holds its machines (no pod of it may be seen yet).
                return self._running(job, key=key, user=user, kind=start[0], started=now, known=known, configurations=configurations_text)
            # Suspended at a version after the start's (which unsuspended it): suspended again
            # by its user, or a tool, before the watch showed it running. It waits again.
            with self._lock:
                self._started.pop(job.metadata.uid, None)
        # A suspended Job's cellfit.io/placement (its user suspended it again, or copied it from
        # a placed Job) starts nothing: a start writes it and unsuspends in one patch, so it is
        # never left half done. The Job waits like any other, and its start writes it anew.
        left_out = _why_not_queued(job, seconds=seconds, estimate=text, configurations=configurations_text)
        if left_out is not None:
            self._tell_not_queued(job, left_out)
            return None
        demand = _job_demands(job, configurations_text, self._gpu_resource)
        if demand is None:
            return None
        return WaitingJob(key=key, user=user, arrival=timestamp(job.metadata.creationTimestamp) or now, seconds=known, demand=demand,
                          pods=_pods(job))

    def _running(
        self, job: Job, *, key: str, user: str, kind: str, started: float, known: Mapping[str, float], configurations: str
    ) -> RunningJob | None:
        """The Job running on ``kind`` since ``started``; None when no estimate of that kind
        gives its ω (its pods hold their capacity, that is all)."""
        if kind not in known:
            return None
        demand = _job_demands(job, configurations, self._gpu_resource)
        if demand is None:
            return None
        return RunningJob(key=key, user=user, kind=kind, started=started, seconds=known, demand=demand, pods=max(_pods(job), 1))

    def _tell_queued(self, job: Job, queued: Queued, *, now: float, name_pool: bool = True, first: int | None = None,
                     starts: Mapping[int, float] | None = None, backing_off: str = "", overdue: str | None = None) -> int:
        """Tell a waiting Job its place and when it is expected to start, as a time, not a wait
        from now: the condition changes only when its place does or its expected start moves by
        more than :func:`start_tolerance_seconds`, not pass after pass as time goes by (every
        write is one for the API server and every watcher of Jobs). ``first``: the first
        position expected to start at its time (:func:`starting_together`), which it is told it
        starts together with. Whom the condition names stands while they (``starts``: each
        position of its kind's expected start) start within that tolerance of it: the ω grid,
        anchored at now, puts machines freeing 30 s apart on one second, then on two, pass
        after pass. The first position its condition names, which ``/v1/inspect/allox`` and so
        ``kubectl cellfit queue`` and ``why`` say too (its own: none). ``backing_off``: its
        back-off in its other kind (:meth:`_not_backed_off`), said before its place. A Job
        expected to start now (the machine it waits for is past its Job's estimated end, or
        idle) is told it starts any moment, with ``overdue``'s why, not a time that then lies in
        the past (user26: "expected start at 01:19:13Z" read at 01:19:20); a time told that has
        passed is told again."""
        where = queued.kind if queued.pool is None or not name_pool else f"{queued.kind} of virtual cluster {queued.pool!r}"
        place = f"{ordinal(queued.position)} on {where}"
        starts_at = now + queued.expected_start_seconds
        with_whom = together_with(queued.position, queued.position if first is None else first)
        with self._lock:
            told = self._told.get(job.metadata.uid)
        if told is None:  # told by this cellfit before it restarted, or by the replica that led before
            placed = job.condition(CONDITION_PLACED)
            told = placed.message if placed is not None and (placed.status, placed.reason) == ("False", "Queued") else None
        note = self._refusal_note(job)
        told_head, told_note = refusal_note_split(told) if told is not None else (None, "")
        any_moment = overdue if queued.expected_start_seconds <= 0 and overdue is not None else None
        message = queued_message(place=place, starts_at=starts_at, together=with_whom, backing_off=backing_off, any_moment=any_moment)
        self._event_queued(job, where=where, told=told, message=message)
        tolerance = start_tolerance_seconds(wait_seconds=queued.expected_start_seconds, grid_seconds=self._settings.omega_grid_seconds)
        if told is not None and told_head is not None and told_note == note and (
                told_head == message if any_moment is not None else
                still_says(told_head, place=place, starts_at=starts_at, tolerance_seconds=tolerance, backing_off=backing_off,
                           now=now)):
            named = told_first(told_head, position=queued.position)
            if named == queued.position or all(abs((starts or {}).get(position, starts_at) - starts_at) <= tolerance
                                               for position in range(named, queued.position)):
                with self._lock:
                    self._told[job.metadata.uid] = told
                return named
        self._tell(job, status="False", reason="Queued", message=message)
        return queued.position if first is None else first

    def _event_queued(self, job: Job, *, where: str, told: str | None, message: str) -> None:
        """A ``Queued`` Event when the Job enters AlloX's queue, and again only when it waits for
        a kind (or VC) no Event of it named yet: ``kubectl describe job`` shows Events, not
        conditions, and a Job's place changes pass after pass in a long queue (its condition
        follows it, an Event each time would flood the Job's Events). The plan may move a Job
        back and forth between kinds as others start (user21's session: "1st on cpu", "5th on
        gpu", "1st on cpu" within 30 s); it is told each kind once, its condition and ``kubectl
        cellfit why`` the current one. A Job its condition already says queued there (told by
        this cellfit before it restarted, or by the replica that led before) gets none."""
        uid = job.metadata.uid
        with self._lock:
            evented = self._queued_where.get(uid)
            if evented is None and told is not None:
                said = queued_said(told)
                waits = _waits_on(said[0]) if said is not None else None
                evented = frozenset({waits}) if waits is not None else None
            self._queued_where[uid] = (evented or frozenset()) | {where}
        if evented is not None and where in evented:
            return
        name = job.metadata.name
        self._event(job, "Queued", f"queued by AlloX: {message.removesuffix(' (AlloX)')} "
                                   f"(kubectl cellfit why job/{name} -n {job.metadata.namespace} for its current place)")

    def _tell_not_queued(self, job: Job, why: str) -> None:
        """A Job AlloX told where it waits, out of its queue now: told why, so that its condition
        does not go on naming its old place. One it never told waits for its estimate, which the
        estimator's condition tells."""
        placed = job.condition(CONDITION_PLACED)
        if placed is not None and placed.status == "False" and placed.reason in _WAITING_REASONS | {"NotQueued"}:
            self._tell(job, status="False", reason="NotQueued", message=f"not in AlloX's queue: {why}")

    def _tell_running(self, job: Job, kind: str, *, by_allox: bool) -> None:
        """A running Job whose ``Placed`` condition still says it waits (its user unsuspended it,
        or the cellfit that started it stopped before telling it) is told it runs."""
        placed = job.condition(CONDITION_PLACED)
        if placed is None or placed.status != "False":
            return
        if by_allox:
            self._tell(job, status="True", reason="Started", message=f"running on {kind}")
        else:
            self._tell(job, status="True", reason="Unsuspended", message=f"{RUNNING_ON}{kind}: {_BY_ITS_USER}")

    def _note_awaiting_on_idle(self, decision: AdmissionDecision, running: Sequence[RunningJob], by_key: Mapping[str, Job],
                               now: float) -> None:
        """Since when each Job unsuspended by hand whose pods wait to be bound has taken an idle
        machine of its kind (its pods not bound beside it): forgotten once it waits behind a busy
        one instead (:meth:`_holding` lets it go after the NotBound limit)."""
        on_idle = frozenset(decision.awaiting_on_idle)
        for item in running:
            if not item.awaiting:
                continue
            uid = by_key[item.key].metadata.uid
            if item.key in on_idle:
                self._idle_since.setdefault(uid, now)
            else:
                self._idle_since.pop(uid, None)

    def _tell_awaiting(self, job: Job, kind: str) -> None:
        """A Job its user unsuspended whose pods wait to be bound is told so, where its
        condition says it runs as its user unsuspended it (or still waits in AlloX's queue)."""
        placed = job.condition(CONDITION_PLACED)
        if placed is not None and placed.status == "True" and placed.reason != "Unsuspended":
            return
        self._tell(job, status="True", reason="Unsuspended",
                   message=f"unsuspended by its user, not by AlloX, on {kind} (the kind its pod template asks for): its pods wait "
                           f"to be bound; AlloX keeps the first {kind} machine to free for them, ahead of its queue, and counts "
                           "its estimate from when one is bound")

    def _tell_finished(self, job: Job) -> None:
        """A finished Job's ``Placed`` condition says where it ran and how it ended, not that it
        runs (user21's session: a Failed Job, and one preempted, kept "running on gpu: ..."); one
        AlloX never started says it ended before. Written once: a Job ends once."""
        placed = job.condition(CONDITION_PLACED)
        finished = job.finished
        if placed is None or finished is None or placed.reason in _ENDED_REASONS:
            return
        ending = job.condition(finished)
        outcome = "completed" if finished == "Complete" else "failed" + (f" ({ending.reason})" if ending is not None and ending.reason else "")
        if placed.status != "True":
            self._tell(job, status="False", reason="Ended", message=f"the Job {outcome} before AlloX started it")
            return
        kind = _template_labels(job).get(LABEL_PLACEMENT) or job.annotations.get(ANNOTATION_PLACEMENT)
        # AlloX's reason for the kind, as the running Job was told it ("running on gpu: <why>"),
        # though a later condition (PodsElsewhere, NotBound, Preempted, a resume) wrote over it.
        with self._lock:
            why = self._chose.get(job.metadata.uid) or ""
        if not why and kind:
            why = allox_why(placed.message, kind)
        where = f"ran on {kind}" if kind else "ran"
        self._tell(job, status="True", reason=REASON_RAN, message=f"{where}: {why}; the Job {outcome}" if why else f"{where}; the Job {outcome}")

    def _remember_why(self, job: Job, kind: str) -> None:
        """AlloX's reason for a running Job's kind, from its condition while that says it (this
        cellfit restarted since its start, or another replica started it), for its Ran condition."""
        uid = job.metadata.uid
        if uid in self._chose:
            return
        placed = job.condition(CONDITION_PLACED)
        why = allox_why(placed.message if placed is not None else None, kind)
        if why:
            with self._lock:
                self._chose[uid] = why

    def _with_pool(self, item: T, by_key: Mapping[str, Job], found: Guarantees) -> T:
        """``item`` with its virtual cluster; the object of last pass when the item and its VC are
        the same (so that decide's kept state serves under HiveD too)."""
        pool = self._pool(by_key[item.key], found)
        kept = self._pooled.get(item.key)
        pooled = kept[2] if kept is not None and kept[0] is item and kept[1] == pool else replace(item, pool=pool)
        self._pooled_next[item.key] = (item, pool, pooled)
        return pooled  # type: ignore[return-value]

    def _pool(self, job: Job, found: Guarantees) -> str | None:
        """The virtual cluster whose guarantee the Job's GPU configuration uses: its pods'
        ``cellfit.io/virtual-cluster`` label, or the implicit default VC. None for opportunistic
        pods (they run on other VCs' idle cells, which AlloX does not count) and for a VC
        HiveD does not know (its pods are refused at filter)."""
        labels = _template_labels(job)
        if labels.get(LABEL_PRIORITY) == PRIORITY_OPPORTUNISTIC:
            return None
        vc = labels.get(LABEL_VIRTUAL_CLUSTER) or found.default_vc
        return vc if vc in found.cells else None

    def _user(self, job: Job) -> str:
        label = self._settings.user_label
        if label:
            value = (job.metadata.labels or {}).get(label)
            if value:
                return value
        return job.metadata.namespace

    # ------------------------------------------------------------------ carrying out a start

    def _start(self, job: Job, configurations: Configurations, kind: str, *, why: str) -> None:
        namespace, name = job.metadata.namespace, job.metadata.name
        configuration = configurations[kind]  # type: ignore[index]
        raw_template, stated_no_more_names = _shed_previous(job, configurations, kind)
        mechanism = self._settings.mechanism
        try:
            if mechanism in ("template", "auto"):
                try:
                    placed = apply_configuration(
                        raw_template, configuration, extra_labels={LABEL_PLACEMENT: kind},
                        extra_annotations={ANNOTATION_CONFIGURATIONS: job.annotations[ANNOTATION_CONFIGURATIONS]},
                        pool=self._settings.node_selector,
                    )
                    placed["metadata"]["annotations"].update(containers_record(placed))
                    # The API server validates the template as written but each pod after its
                    # defaulting (a container's missing request is its limit, a missing pod-level
                    # request the containers'): a template it takes may make pods it refuses.
                    check_pod_level_resources(placed["spec"], configuration)
                    self._api.patch_job(namespace=namespace, name=name, operations=_operations(job, kind, placed))
                    used = "template"
                except KubernetesApiError as error:
                    if mechanism == "template" or not _template_immutable(error):
                        raise
                    if not self._pod_webhook:
                        raise NoPodWebhook(f"AlloX does not start this Job on {kind}: the API server does not let a "
                                           "suspended Job's pod template take this configuration (field is "
                                           "immutable), and cellfit's pod-create webhook, which would give each pod "
                                           "the configuration instead, is off (admission.enabled: false), so its pods "
                                           "would run without it") from error
                    # No KEP-5440, or a change it does not cover (env): this Job's pods are
                    # rewritten by the webhook instead.
                    log.info("the API server refuses this rewrite of a suspended Job's pod template: the pod-create "
                             "webhook places its pods", extra={"job": f"{namespace}/{name}", "reason": str(error)[:300]})
                    self._patch_for_webhook(job, raw_template, configuration, kind, stated_no_more=stated_no_more_names)
                    used = "webhook"
            else:
                if not self._pod_webhook:
                    raise NoPodWebhook(f"AlloX does not start this Job on {kind}: allox.mechanism is webhook, but "
                                       "cellfit's pod-create webhook, which gives each pod its configuration, is off "
                                       "(admission.enabled: false), so its pods would run without it")
                self._patch_for_webhook(job, raw_template, configuration, kind, stated_no_more=stated_no_more_names)
                used = "webhook"
        except CellfitError as error:
            log.warning("could not start a placed Job", extra={"job": f"{namespace}/{name}", "kind": kind, "reason": str(error)})
            if isinstance(error, PoolConflict):
                kinds = self._outside_pool(configurations, raw_template) | {kind}
                self._refuse(job, kinds, f"AlloX does not start this Job on {' or '.join(sorted(kinds))}: "
                                         f"its pods would run outside AlloX's nodes: {error}")
            elif isinstance(error, NoPodWebhook):
                self._refuse(job, frozenset({kind}), str(error))
            elif isinstance(error, PodsRefused) or (isinstance(error, KubernetesApiError) and _refuses_job(error)):
                self._refuse(job, frozenset({kind}), f"the API server refuses this Job in its {kind} configuration, "
                                                     f"so AlloX does not start it there: {error}")
            return
        self._mechanisms[used] = self._mechanisms.get(used, 0) + 1
        self._acted += 1
        with self._lock:
            self._started[job.metadata.uid] = (kind, job.metadata.resourceVersion or "")
        with self._lock:
            self._queued_where.pop(job.metadata.uid, None)  # queued again later: told again
        # The mechanism is the operator's concern (the log line below, /v1/inspect/allox's
        # startsByMechanism), not the user's.
        self._event(job, "Placed", f"started on {kind}: {why}")
        with self._lock:
            self._chose[job.metadata.uid] = why
        self._tell(job, status="True", reason="Started", message=f"running on {kind}: {why}")
        if self._on_start is not None:
            self._on_start(kind, used)
        log.info("job placed", extra={"job": f"{namespace}/{name}", "kind": kind, "mechanism": used})

    def _refuse(self, job: Job, kinds: frozenset[str], message: str) -> None:
        """The Job will not run in ``kinds`` as it is (the API server refuses it so, or its pods
        would run outside AlloX's nodes): its user is told why, and it is not chosen in those
        kinds again until it changes (each pass chose it for the same machine, and the Job after
        it on that machine never started)."""
        uid, refusable = job.metadata.uid, _refusable(job)
        before = self._refused.get(uid)
        refused = before[1] if before is not None and before[0] == refusable else frozenset()
        self._refused[uid] = (refusable, refused | kinds)
        self._acted += not kinds <= refused  # the next walk does not choose it there
        said = self._refusals.get(uid, {}) if refused else {}
        self._refusals[uid] = {**said, **dict.fromkeys(kinds, message)}
        if self._tell(job, status="False", reason="Refused", message=self._refusal_told(uid)):
            self._event(job, "PlacementRefused", message, warning=True)

    def _refusal_told(self, uid: str) -> str:
        """Each refused kind's reason, once each: kinds refused for the same reason are named
        together ("... on cpu or gpu: ..."), one refusal may cover several kinds."""
        said = self._refusals.get(uid, {})
        kinds_by_reason: dict[str, list[str]] = {}
        for kind in sorted(said):
            reason, named = _refused_reason(said[kind])
            kinds_by_reason.setdefault(reason, []).extend(named)
        return "; ".join(f"AlloX does not start this Job on {' or '.join(dict.fromkeys(kinds))}: {reason}" if kinds else reason
                         for reason, kinds in kinds_by_reason.items())

    def _refusal_note(self, job: Job) -> str:
        """``; not on cpu: <why>``: the kinds AlloX refuses a waiting Job in, which its condition
        says after why it waits in the others ("" for none, or once the Job changed since, which
        lifts the refusal). A Job this process has not refused keeps what its condition says of
        it (written before a restart): the refusals live in memory, and the Job is tried again
        there only when AlloX next chooses it in that kind, which refuses it again or starts it."""
        uid = job.metadata.uid
        said = self._refusals.get(uid)
        if said is None:
            with self._lock:
                told = self._told.get(uid)
            if told is None:
                placed = job.condition(CONDITION_PLACED)
                told = placed.message if placed is not None and placed.status == "False" and placed.reason in _NOTED_REASONS else ""
            return refusal_note_split(told or "")[1]
        standing = self._refused.get(uid)
        kinds = sorted(kind for kind in (standing[1] if standing is not None else ()) if kind in said)
        kinds_by_reason: dict[str, list[str]] = {}
        for kind in kinds:
            kinds_by_reason.setdefault(_refused_reason(said[kind])[0], []).append(kind)
        return "".join(f"{_REFUSED_NOTE}{' or '.join(named)}: {reason}" for reason, named in kinds_by_reason.items())

    def _outside_pool(self, configurations: Configurations, template: bytes) -> frozenset[str]:
        """The kinds of a Job whose pods would select no node of AlloX's (``allox.nodeSelector``):
        a conflict of the template's own is every kind's, refused in one pass, not one per kind."""
        spec = json.loads(template).get("spec") or {}
        return frozenset(kind for kind in configurations.kinds
                         if pool_conflict(spec, configurations[kind], self._settings.node_selector) is not None)

    def _patch_for_webhook(self, job: Job, shed: bytes, configuration: Configuration, kind: str, *,
                           stated_no_more: frozenset[str]) -> None:
        """Only what a suspended Job's template may always change (from ``shed``, the template
        less what a configuration of another kind added: :func:`_shed_previous`); its containers
        stay as stored, as the API server refuses any change of them (the env a configuration of
        another kind set, too), and the webhook rewrites each pod's (placer/patch.py): those the
        template names, less the resource names ``stated_no_more`` (recorded on the template for
        it: the stored containers may hold them). :class:`PodsRefused` where the API server would
        refuse every such pod."""
        template = json.loads(shed)
        placed = json.loads(bytes(job.spec.template)) if job.spec.has_template else {}
        placed["metadata"] = template.get("metadata") or {}
        metadata = placed["metadata"]
        metadata["labels"] = {**(metadata.get("labels") or {}), LABEL_PLACEMENT: kind}
        metadata["annotations"] = {
            **(metadata.get("annotations") or {}), **configuration.annotations,
            ANNOTATION_CONFIGURATIONS: job.annotations[ANNOTATION_CONFIGURATIONS], **containers_record(template),
            **({ANNOTATION_STATED_NO_MORE: ",".join(sorted(stated_no_more))} if stated_no_more else {}),
        }
        spec = placed.setdefault("spec", {})
        # The pool's selector goes into the template (a suspended Job's node selector may always
        # change), so each pod is created with it, and the webhook's rewrite keeps it.
        rewritten = apply_configuration(template, configuration, pool=self._settings.node_selector)["spec"]
        # Each pod's pod-level resources are defaulted from the template's containers as stored,
        # before the webhook rewrites them (a missing pod-level request is what they ask together).
        check_pod_level_resources(rewritten, configuration, created_from=template.get("spec") or {})
        for key in ("nodeSelector", "tolerations"):
            if key in rewritten:
                spec[key] = rewritten[key]
        self._api.patch_job(namespace=job.metadata.namespace, name=job.metadata.name, operations=_operations(job, kind, placed))

    # ------------------------------------------------------------------ telling users

    def _note_asked_per_gpu(self, now: float) -> None:
        """This pass's cores and memory (GiB) each of AlloX's nodes keeps beside each of its GPUs:
        the most per GPU asked by the GPU pods its kind of node holds (each node's allocatable, or
        their sum where none is known), over the window. A pod no node holds keeps nothing."""
        allocatable = self._allocatable_by_node()
        asked = self._asked_per_gpu() if self._asked_per_gpu is not None else GpuPodsAsk()
        shapes = set(allocatable.values()) or {self._capacity()}
        # A kind of node absent this pass (a device plugin restarting reads 0 GPUs a moment) keeps
        # what its GPU pods asked for the rest of its window (review27 #7).
        self._asked_lately = {shape: lately for shape, lately in self._asked_lately.items()
                              if shape in shapes or lately.noted_within(now)}
        for shape in shapes:
            self._asked_lately.setdefault(shape, AskedLately(window_seconds=self._unbound_hold_seconds))
        kept = {shape: self._asked_lately[shape].note(asked.per_gpu(nodes=[shape]), now=now) for shape in shapes}
        self._kept_by_node = {name: kept[shape] for name, shape in allocatable.items()}
        self._kept_elsewhere = Demand(cpu=max((k.cpu for k in kept.values()), default=0.0),
                                      memory=max((k.memory for k in kept.values()), default=0.0))

    def _kept_on(self, node: str | None) -> Demand:
        """The cores and memory (GiB) ``node`` keeps beside each GPU this pass, which no CPU slot is
        cut from (None, or a node whose allocatable is not known: the most any node keeps)."""
        found = self._kept_by_node.get(node, self._kept_elsewhere) if node is not None else self._kept_elsewhere
        return Demand(cpu=max(self._settings.reserved_cpu_per_gpu, found.cpu), memory=found.memory)

    def _tell(self, job: Job, *, status: str, reason: str, message: str) -> bool:
        """Set the Job's ``Placed`` condition; False when it says that already. A waiting Job's
        (``_NOTED_REASONS``) says after why it waits the kinds AlloX refuses it in
        (:meth:`_refusal_note`): the refusal's Event expires in an hour, and the condition said
        only "waiting for a gpu" of a Job whose cpu configuration never starts."""
        uid = job.metadata.uid
        if status == "False" and reason in _NOTED_REASONS:
            message += self._refusal_note(job)
        with self._lock:
            told = self._told.get(uid)
            self._told[uid] = message
            if told == message:
                return False
        placed = job.condition(CONDITION_PLACED)
        if told is None:
            self._remember_queued(uid, placed)
        if told is None and placed is not None and (placed.status, placed.reason, placed.message) == (status, reason, message):
            return False  # told so by this cellfit before it restarted, or by the replica that led before
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._clock()))
        condition = {"type": CONDITION_PLACED, "status": status, "reason": reason, "message": message,
                     "lastTransitionTime": now, "lastProbeTime": now}
        self._attempt(lambda: self._api.set_job_condition(namespace=job.metadata.namespace, name=job.metadata.name, condition=condition))
        return True

    def _remember_queued(self, uid: str, placed: JobCondition | None) -> None:
        """Where a Job's Queued condition, as this process first sees it, says it waits: its
        Queued Event was sent for that (by this cellfit before it restarted, or by the replica
        that led before), also when the first condition written now is another one."""
        if placed is None or (placed.status, placed.reason) != ("False", "Queued"):
            return
        said = queued_said(placed.message)
        waits = _waits_on(said[0]) if said is not None else None
        if waits is not None:
            with self._lock:
                self._queued_where.setdefault(uid, frozenset({waits}))

    def _event_once(self, job: Job, reason: str, message: str) -> None:
        """A warning Event, once per Job and message: a Job whose condition goes back and forth
        (a GPU freed and taken again by other pods, pass after pass) gets no Event each time."""
        uid = job.metadata.uid
        with self._lock:
            sent = self._warned.setdefault(uid, set())
            if message in sent:
                return
            sent.add(message)
        self._event(job, reason, message, warning=True)

    def _event(self, job: Job, reason: str, message: str, *, warning: bool = False) -> None:
        self._attempt(lambda: self._api.create_event(
            namespace=job.metadata.namespace, pod_name=job.metadata.name, pod_uid=job.metadata.uid, reason=reason,
            message=message, kind="Job", **({"warning": True} if warning else {})))

    @staticmethod
    def _attempt(call: Callable[[], None]) -> None:
        try:
            call()
        except CellfitError as error:
            log.warning("placer write failed", extra={"reason": str(error)})

    def inspect(self) -> dict[str, Any]:
        last = self.last
        queue_by_kind: dict[str, list[dict[str, Any]]] = {}
        for row in last.queue:
            queue_by_kind.setdefault(row["kind"], []).append(row)
        return {
            "policy": self._settings.policy, "alpha": self._settings.alpha, "mechanism": self._settings.mechanism,
            "startsByMechanism": dict(self._mechanisms),
            # Running Jobs placed through the pod-create webhook while it is off (admission.enabled:
            # false): their new pods run in no configuration.
            "runningWithoutPodWebhook": self._webhook_off.running_unconfigured() if self._webhook_off is not None else [],
            "decisionsCutShort": self._cut_short,  # by allox.decisionBudgetSeconds, since this process started
            # secondsFromState ends at the starts; the queue is planned after they are carried out.
            "lastDecision": {"at": last.at, "seconds": round(last.seconds, 6), "secondsFromState": round(last.from_state_seconds, 6),
                             "queueSeconds": round(last.queue_seconds, 6),
                             # When the queue shown was planned and told: at, but a pass cut short
                             # and followed at once plans none (its plan would count the machines
                             # it left idle), and the queue as told then stands.
                             "queuePlannedAt": last.queue_planned_at,
                             # Cut short at budgetSeconds (allox.decisionBudgetSeconds): the free
                             # machines its walk did not decide, decided by the pass after it, at once.
                             "budgetSeconds": last.budget_seconds, "undecidedMachines": last.undecided_machines,
                             "starts": last.starts, "unplaceable": last.unplaceable,
                             "waitingForQuota": last.waiting_for_pool, "waitingForNodes": last.waiting_for_nodes,
                             "holdingNoMachine": last.released, "awaitingBinding": last.awaiting,
                             "idleMachines": last.idle_machines, "busyMachines": last.busy_machines},
            # §3.3.2: each user's progress (the dominant shares of her running Jobs, discounted
            # on their slower kind) and its standard deviation over the users with Jobs here.
            "progress": {user: round(value, 6) for user, value in last.progress.items()},
            "progressSpread": round(last.progress_spread, 6),
            "queue": queue_by_kind,
            # Waiting Jobs outside the queue this pass, with their Placed condition's reason and
            # message: no machine fits them (NoMachine), theirs are in use (WaitingForMachine), or
            # their VC's quota is (WaitingForQuota), or each of its kinds is backed off after it was
            # suspended again there (SuspendedAgain). AlloX holds them and tries them each pass.
            "waiting": last.held,
        }


REASON_SUSPENDED_AGAIN = "SuspendedAgain"
# What _backed_off_message says, read back by a restarted cellfit (_backed_off_before).
_BACKED_OFF_MESSAGE: Final = re.compile(
    r"(?P<kind>\w+) start failed: [^;]*; not started in (?P=kind) again before (?P<until>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) "
    r"\(suspended again (?P<times>\d+) times?")
# What _backing_off_said says before a queued Job's place, read back the same way.
_BACKING_OFF_SAID: Final = re.compile(
    r"backing off on (?P<kind>\w+) until (?P<until>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) after [^;(]*\(suspended again (?P<times>\d+) times?\)")
BACK_OFF_MAX_SECONDS = 1800
# A Job backed off in one kind whose other kind no machine takes (NoMachine, WaitingForMachine,
# WaitingForQuota) is told the back-off first, then why; a restart reads the back-off back from it
# (review26: it was told only why, and a restarted cellfit started it at once on the room it was
# backed off from).
_HELD_REASONS: Final = frozenset({"NoMachine", "WaitingForMachine", "WaitingForQuota"})
_HELD_AFTER_BACK_OFF: Final = "; meanwhile: "


def _backing_off_first(backing_off: str | None, message: str) -> str:
    """``message`` after the back-off of the Job's other kind (_backing_off_said), if any."""
    return f"{backing_off}{_HELD_AFTER_BACK_OFF}{message}" if backing_off else message


def _let_go_in_this_spell(job: Job) -> Hold | None:
    """What the Job's ``Placed`` condition says it was let go for (``unbound``: reason
    ``NotBound``; ``elsewhere``: ``PodsElsewhere``), when written in its present spell of running:
    at or after its ``status.startTime``, which the Job controller resets at each unsuspend, so a
    let-go of a spell before its user suspended and unsuspended it again counts for nothing. The
    condition's time only orders it against that start, never times a hold: one dated after now
    (the writer's clock ahead of this one's) counts as any other, not as a fresh limit."""
    placed = job.condition(CONDITION_PLACED)
    let_go = _LET_GO_REASONS.get(placed.reason or "") if placed is not None and placed.status == "True" else None
    if placed is None or let_go is None:
        return None
    written = timestamp(placed.lastTransitionTime)
    started = timestamp(job.status.startTime if job.status else None)
    if written is None or started is None or written < started:
        return None
    return let_go


def suspended_again_back_off(times: int, *, base_seconds: float) -> float:
    """How long AlloX does not start a Job in the kind it was suspended again in ``times``
    times: the NotBound limit (what the failed start took to show), doubling per repeat, at most
    30 min (a room that was unusable comes back to it within half an hour of being usable)."""
    return float(min(base_seconds * 2 ** min(max(times - 1, 0), 16), BACK_OFF_MAX_SECONDS))


def _within(decision: AdmissionDecision, waiting: Sequence[WaitingJob]) -> AdmissionDecision:
    """``decision`` less what names no Job waiting this pass, a kind it does not wait in, or a Job
    a second time: a solver process answering garbage (its state corrupt) has it logged and left
    out, so that every other start is carried out once and the pass goes on to tell the queue."""
    kinds = {item.key: item.seconds for item in waiting}
    started: set[str] = set()
    starts: list[Start] = []
    for start in decision.starts:
        if start.key in started or start.kind not in kinds.get(start.key, ()):
            log.error("the AlloX decision names a start of no Job waiting in that kind; left out",
                      extra={"job": start.key, "kind": start.kind})
            continue
        started.add(start.key)
        starts.append(start)
    waits = kinds.keys() - started
    kept = (tuple(starts), tuple(queued for queued in decision.queue if queued.key in waits),
            tuple(key for key in decision.unplaceable if key in waits), tuple(key for key in decision.waiting_for_pool if key in waits))
    if kept == (decision.starts, decision.queue, decision.unplaceable, decision.waiting_for_pool):
        return decision
    if sum(map(len, kept[1:])) != len(decision.queue) + len(decision.unplaceable) + len(decision.waiting_for_pool):
        log.error("the AlloX decision names waiting Jobs that do not wait; left out")
    return replace(decision, starts=kept[0], queue=kept[1], unplaceable=kept[2], waiting_for_pool=kept[3])


def _operations(job: Job, kind: str, template: dict[str, Any]) -> list[dict[str, Any]]:
    """One JSON Patch: the placement recorded, the template replaced, the Job unsuspended. The
    test on ``suspend`` makes a second start of the same Job fail instead of patching twice; the
    test on ``resourceVersion`` makes a start of a Job changed since it was read fail (the API
    server answers 422) instead of writing back the template as read over its user's edit (a
    node selector, the configurations): the next pass decides from the Job as it is."""
    version = job.metadata.resourceVersion
    return [
        {"op": "test", "path": "/spec/suspend", "value": True},
        *([{"op": "test", "path": "/metadata/resourceVersion", "value": version}] if version else []),
        {"op": "add", "path": annotation_pointer(ANNOTATION_PLACEMENT), "value": kind},
        {"op": "replace", "path": "/spec/template", "value": template},
        {"op": "replace", "path": "/spec/suspend", "value": False},
    ]


# The paths the start's own tests guard: their failing means another start, or the Job changed.
_GUARDED_PATHS: Final = ("/spec/suspend", "/metadata/resourceVersion")


def _template_immutable(error: KubernetesApiError) -> bool:
    """Whether the API server refuses the template patch only as a change of the suspended Job's
    pod template it does not allow (no KEP-5440, or env, which it does not cover), which the
    webhook mechanism makes at pod creation instead. Any other refusal (a value invalid in the
    pod, an admission policy) would refuse every pod the webhook rewrites as well, or the guard
    that failed would fail again."""
    text = str(error)
    return error.status == 422 and "immutable" in text and not any(path in text for path in _GUARDED_PATHS)


def _refuses_job(error: KubernetesApiError) -> bool:
    """Whether the API server refuses the Job as patched (invalid: 422; an admission webhook or
    policy denied it: 400, 403), not a start that lost a race (a guard's test failed), nor one
    cellfit may not make (403 of its own RBAC: granted, the next pass starts it), nor a transient
    failure (409, 429, 5xx, unreachable)."""
    text = str(error)
    if any(path in text for path in _GUARDED_PATHS):
        return False
    return error.status == 422 or (error.status in (400, 403) and "denied" in text)


def _shed_previous(job: Job, configurations: Configurations, kind: str) -> tuple[bytes, frozenset[str]]:
    """The Job's pod template, less what the configuration it was placed in before added when
    that is not the one it is placed in now (a Job its user suspended again, or copied from a
    placed Job): the configuration as the template recorded it at that placement (its user may
    have edited the Job's since), else as the Job has it; and less each resource name that one,
    or an earlier placement the webhook carried out, stated and the Job's configurations state no
    more (:func:`~placer.rewrite.stated_no_more`), whose names come with it: the webhook
    mechanism leaves the containers as stored, and its pods take them out."""
    raw = bytes(job.spec.template)
    previous_kind = job.annotations.get(ANNOTATION_PLACEMENT) or _labels_of(raw).get(LABEL_PLACEMENT)
    template = json.loads(raw)
    recorded = recorded_configuration(template, previous_kind)
    previous = recorded or (configurations[previous_kind] if previous_kind in configurations else None)  # type: ignore[index]
    shed, names = shed_placement(template, previous=previous, configuration=configurations[kind])  # type: ignore[index]
    return (raw if shed is template else json.dumps(shed).encode()), names


# A queued Job's condition: its place, whom it starts together with (none: after every Job
# before it), and its expected start as a time (RFC 3339, UTC, whole seconds).
# scheduler/kubectl/why.py reads it back, and says the wait from the time it is read.
_TOGETHER: Final = ", starting together with "
# A queued Job backed off in its other kind is told so before its place (_backing_off_said).
_BACKING_OFF_PREFIX: Final = "backing off on "
# A queued Job expected to start now: no time, which would pass while it stands.
_ANY_MOMENT: Final = "expected to start any moment"
# Why, when no machine of its kind is idle: the Job on the one it waits for runs past its estimate.
_OVERDUE_WHY: Final = "its machine's Job running past its estimate"
_QUEUED_MESSAGE: Final = re.compile(
    r"(?:(?P<backing>" + re.escape(_BACKING_OFF_PREFIX) + r"[^;]*(?:; " + re.escape(_BACKING_OFF_PREFIX) + r"[^;]*)*); )?"
    r"(?P<place>.+?)(?:" + re.escape(_TOGETHER) + r"(?P<together>the [^,]+))?, "
    r"(?:expected start at (?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)|" + re.escape(_ANY_MOMENT) + r"(?:, [^()]*)?) \(AlloX\)")
_FIRST_NAMED: Final = re.compile(r"the (\d+)(?:st|nd|rd|th)\b")
# An expected start that moves by no more than this (or this share of the wait) is not written:
# the queue plan rounds busy machines' ends up to the ω grid (a minute, then cells 25% wider,
# scheduler/matching/admission.py), so a queue where nothing changes moves its expected starts by
# up to that much as time passes. A tenth of the wait wrote 27 conditions over 200 Jobs in 15
# minutes (tests/placer/test_review_97_queue_writes.py); a quarter, none.
START_TOLERANCE_SECONDS: Final = 60.0
START_TOLERANCE_SHARE: Final = 0.25


def chose_message(
    *, start: Start, seconds: Mapping[str, float], pool: str | None, decision: AdmissionDecision,
    running: Sequence[RunningJob], gpu_pools: Mapping[str, int] | None, now: float, capacity: Capacity | None = None,
    gpu_demand: Demand | None = None, name_pool: bool = True, outside: str | None = None, omega_grid_seconds: float = 0.0,
) -> str:
    """"AlloX chose cpu (estimated 101 s; gpu 27 s) because ...": a start on a kind slower than
    another of the Job's says why, from what the decision knew (:func:`_slower_because`).
    ``capacity``: what AlloX's nodes hold, to tell "none exists" from "pods AlloX did not start
    hold them all" (None: not known, neither said); ``gpu_demand``: one pod's GPU configuration, to
    tell a Job whose pods need more GPUs at once than AlloX's nodes have that waiting never helps;
    ``name_pool``: whether its VC is named (not where it is the only one); ``outside``: under
    HiveD, why its GPU configuration has no VC's GPUs (:func:`_gpu_outside_vcs`), which is then the
    reason: no GPU AlloX counts is ever its, busy or free."""
    kind = start.kind
    if set(seconds) <= {kind}:
        # Nothing to choose between: "AlloX chose cpu" read as if it had weighed a GPU.
        return f"its only configuration with an estimate (estimated {duration(seconds.get(kind, 0.0))})"
    others = ", ".join(f"{k} {duration(v)}" for k, v in sorted(seconds.items()) if k != kind)
    chose = f"AlloX chose {kind} (estimated {duration(seconds.get(kind, 0.0))}" + (f"; {others}" if others else "") + ")"
    faster = min(seconds, key=lambda k: seconds[k], default=kind)
    if faster == kind or seconds[faster] >= seconds.get(kind, 0.0):
        return chose
    if faster == KIND_GPU and outside is not None:
        return f"{chose} because AlloX starts no GPU configuration of it: {outside}"
    because = _beyond_all_gpus(start, faster=faster, capacity=capacity, gpu_demand=gpu_demand) or _slower_because(
        start=start, seconds=seconds, faster=faster, pool=pool, decision=decision, running=running, gpu_pools=gpu_pools, now=now,
        capacity=capacity, name_pool=name_pool, omega_grid_seconds=omega_grid_seconds)
    return f"{chose} because {because}"


# A running Job its user unsuspended, after "running on <kind>: ".
_BY_ITS_USER: Final = "unsuspended by its user, not by AlloX (the kind its pod template asks for)"
# What AlloX's matching does, said where no fact of the pass says more: it weighs every waiting
# Job's completion, so one Job may run slower for the others to finish sooner.
_MATCHING_AIM: Final = "AlloX places the waiting Jobs so that their total completion time is least, not each Job's own"


def _beyond_all_gpus(start: Start, *, faster: str, capacity: Capacity | None, gpu_demand: Demand | None) -> str | None:
    """Why a Job whose pods together need more GPUs than AlloX's nodes have started on CPU: it
    never runs on GPU here, however long it waits (None: they do not, or it is not known)."""
    if faster != KIND_GPU or capacity is None or gpu_demand is None:
        return None
    if capacity.gpu <= 0:
        return "AlloX's nodes have no GPU"
    pods = max(len(start.machines), 1)
    needed = pods * gpu_demand.gpu
    if needed <= capacity.gpu:
        return None
    who = f"its {pods} pods need {needed:g} GPUs at once" if pods > 1 else f"its pod needs {needed:g} GPUs"
    return f"{who} and AlloX's nodes have {capacity.gpu:g} in all"


def _slower_because(
    *, start: Start, seconds: Mapping[str, float], faster: str, pool: str | None, decision: AdmissionDecision,
    running: Sequence[RunningJob], gpu_pools: Mapping[str, int] | None, now: float, capacity: Capacity | None = None,
    name_pool: bool = True, omega_grid_seconds: float = 0.0,
) -> str:
    """Why a Job started on a slower kind than ``faster``: no machine of that kind was free
    (and when the first is expected free: the running Jobs' estimated ends; AlloX's aim too when
    waiting for it would have ended the Job sooner), the free ones
    started other Jobs, or fewer were left than its pods need."""
    machine_kind = _machine_kind(faster, pool, gpu_pools)
    of_pool = f" of virtual cluster {pool!r}" if machine_kind != faster and name_pool else ""
    what, whats = faster.upper() + of_pool, f"{faster.upper()}s{of_pool}"
    idle = decision.idle_machines.get(machine_kind, 0)
    if idle <= 0:
        ours = [r for r in running if _machine_kind(r.kind, r.pool, gpu_pools) == machine_kind and r.kind in r.seconds]
        # Hand-started Jobs whose pods wait take the first to free (no phantom end of theirs).
        _, ends = claimed_first([r.started + r.seconds[r.kind] - now for r in ours if not r.awaiting],
                                [r.seconds[r.kind] for r in ours if r.awaiting for _ in range(r.pods)])
        if not ends:
            exists = capacity is not None and (capacity.gpu if faster == KIND_GPU else capacity.cpu) > 0
            # Machines there, none free, none running a Job AlloX started: others' pods hold them
            # (sampling pods, Jobs unsuspended by their users), whose ends AlloX cannot foresee.
            return (f"no {what} was free for it: pods AlloX did not start (sampling pods, or Jobs it did not place) "
                    "held every one, so no end was known to wait for") if exists else f"no {what} was free for it"
        first = min(ends)
        if first < 1:
            return f"no {what} was free for it, the first to free runs a Job already past its estimated end"
        said = f"no {what} was free for it, the first expected free in {duration(first)}"
        if first + seconds[faster] >= seconds[start.kind]:
            return said
        # Waiting for it would have ended this Job sooner: said with by how much, so that the
        # reader sees what AlloX traded (other Jobs wait for that machine), not only its aim.
        sooner = seconds[start.kind] - (first + seconds[faster])
        counted = on_omega_grid(first, step=omega_grid_seconds)
        if counted + seconds[faster] < seconds[start.kind]:
            return f"{said}; waiting for it would have ended this Job ~{duration(sooner)} sooner, but {_MATCHING_AIM}"
        # As AlloX decided it, waiting did not pay: it counts a busy machine free at its end
        # rounded up to the ω grid (user26: "the first expected free in 19 s" for a 20 s GPU
        # run against 60 s on CPU read as if the matching's aim had cost this Job 21 s).
        later = counted + seconds[faster] - seconds[start.kind]
        than = f"~{duration(later)} later than on {start.kind}" if later >= 1 else f"no sooner than on {start.kind}"
        return (f"{said}; waiting for it would have ended this Job ~{duration(sooner)} sooner by the estimates, but AlloX "
                f"counts a busy machine free at its estimated end rounded up to its grid (allox.omegaGridSeconds), in "
                f"{duration(counted)} here, so waiting as it counted it would have ended this Job {than}")
    taken = sum(max(len(s.machines), 1) for s in decision.starts
                if s is not start and _machine_kind(s.kind, s.pool, gpu_pools) == machine_kind)
    if taken >= idle:
        went = f"the free {what} went to another Job" if idle == 1 else f"the {idle} free {whats} went to other Jobs"
        return f"{went}: {_MATCHING_AIM}"
    pods = max(len(start.machines), 1)
    if pods > idle - taken:
        return f"it needs {pods} {whats} at once and {idle - taken} were free"
    return _MATCHING_AIM


def allox_why(message: str | None, kind: str) -> str:
    """AlloX's reason for ``kind`` in a running Job's ``Placed`` message ("running on gpu: <why>"),
    "" where it says none (its pods resumed, or bound again, or no reason was told)."""
    prefix = f"{RUNNING_ON}{kind}: "
    why = message.removeprefix(prefix) if message and message.startswith(prefix) else ""
    return "" if why in (RESUMED, BOUND_AGAIN) else why


def _machine_kind(kind: str, pool: str | None, gpu_pools: Mapping[str, int] | None) -> str:
    """The machine kind AlloX's decision counts a ``kind`` configuration on: its virtual
    cluster's GPUs under HiveD (``gpu@<vc>``), else the kind itself (as the matching's own)."""
    if gpu_pools is None or kind != KIND_GPU or pool is None or pool not in gpu_pools:
        return kind
    return pool_kind(pool)


def queued_message(*, place: str, starts_at: float, together: str = "", backing_off: str = "", any_moment: str | None = None) -> str:
    """``2nd on gpu, expected start at 2026-11-28T14:32:05Z (AlloX)``; ``2nd on cpu, starting
    together with the 1st, expected start at ...`` with ``together`` (:func:`together_with`);
    ``backing off on gpu until ...; 1st on cpu, ...`` with ``backing_off``, the back-off in
    its other kind; ``1st on gpu, expected to start any moment, <any_moment> (AlloX)`` for a
    Job expected to start now, with why (no time: one that has passed would read as a lie)."""
    with_whom = f"{_TOGETHER}{together}" if together else ""
    backing = f"{backing_off}; " if backing_off else ""
    if any_moment is not None:
        return f"{backing}{place}{with_whom}, {_ANY_MOMENT}{', ' + any_moment if any_moment else ''} (AlloX)"
    return f"{backing}{place}{with_whom}, expected start at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(round(starts_at)))} (AlloX)"


def starting_together(queue: Sequence[Queued], *, now: float) -> dict[str, int]:
    """Per queued Job, the first position of its kind (and VC) whose expected start is its own,
    to the second as its condition says it: machines freeing together start several Jobs at
    once, and "2nd on cpu" alone read as "after the 1st" (user21's session: three CPU slots, two
    Jobs told 1st and 2nd, the same time). A kind's positions are in the order they start."""
    firsts: dict[str, int] = {}
    runs: dict[tuple[str, str | None], tuple[int, int]] = {}  # (kind, VC) -> (the second its run starts, the run's first position)
    for queued in sorted(queue, key=_position):
        group = (queued.kind, queued.pool)
        second = round(now + queued.expected_start_seconds)
        run = runs.get(group)
        first = run[1] if run is not None and run[0] == second else queued.position
        runs[group] = (second, first)
        firsts[queued.key] = first
    return firsts


def _position(queued: Queued) -> int:
    return queued.position


@lru_cache(maxsize=16384)  # each queued Job's, read again every pass while it stands
def queued_said(message: str | None) -> tuple[str, float] | None:
    """The place and the expected start (seconds since the epoch) a queued Job's condition says;
    None for any other message, an older cellfit's ("expected start in ~12 min") among them."""
    found = _QUEUED_MESSAGE.fullmatch(refusal_note_split(message or "")[0])
    if found is None:
        return None
    if found["at"] is None:  # expected to start any moment: no time
        return found["place"], -math.inf
    starts_at = timestamp(found["at"])
    return None if starts_at is None else (found["place"], starts_at)


def backing_off_said(message: str | None) -> str:
    """The back-off in its other kind a queued Job's condition says before its place ("" for
    none, or for any other message)."""
    found = _QUEUED_MESSAGE.fullmatch(refusal_note_split(message or "")[0])
    return (found["backing"] or "") if found is not None else ""


def told_first(message: str, *, position: int) -> int:
    """The first position a queued Job's condition says it starts together with ("the 1st to
    3rd": 1), ``position`` (its own) where it names none."""
    found = _QUEUED_MESSAGE.fullmatch(refusal_note_split(message)[0])
    named = _FIRST_NAMED.match(found["together"]) if found is not None and found["together"] else None
    return min(int(named[1]), position) if named is not None else position


def _waits_on(place: str) -> str | None:
    """What a queued place waits for: ``gpu of virtual cluster 'vision'`` from ``2nd on gpu of
    virtual cluster 'vision'``."""
    _, on, where = place.partition(" on ")
    return where if on else None


def still_says(told: str, *, place: str, starts_at: float, tolerance_seconds: float, backing_off: str = "",
               now: float | None = None) -> bool:
    """Whether a queued Job told ``told`` needs no new condition: the same place and back-off,
    and an expected start within ``tolerance_seconds`` of ``starts_at`` and, given ``now``, not
    passed (a time gone by reads as a start that never came; one told "any moment" has none)."""
    said = queued_said(told)
    return (said is not None and said[0] == place and abs(said[1] - starts_at) <= tolerance_seconds
            and (now is None or said[1] >= math.floor(now)) and backing_off_said(told) == backing_off)


def start_tolerance_seconds(*, wait_seconds: float, grid_seconds: float) -> float:
    """How far a queued Job's expected start may move before its condition is written again:
    a minute (or the ω grid's step, ``allox.omegaGridSeconds``, when longer), or a quarter of
    the wait when that is longer."""
    return max(START_TOLERANCE_SECONDS, grid_seconds, START_TOLERANCE_SHARE * max(wait_seconds, 0.0))


# The reasons of a Placed=False condition that tell a Job its place in AlloX's queue.
_WAITING_REASONS: Final = frozenset({"Queued", "NoMachine", "WaitingForMachine", "WaitingForQuota"})


def _why_not_queued(job: Job, *, seconds: Mapping[str, float], estimate: str | None, configurations: str) -> str | None:
    """Why a suspended Job with configurations does not wait in AlloX's queue (None: it does)."""
    if not seconds:
        # Said as the one case it is: "missing or unreadable" left the user of a Job whose
        # estimate the estimator had just withdrawn (its configurations edited) to guess.
        if estimate:
            return f"its {ANNOTATION_ESTIMATE} does not read; it waits for the estimator (or its user) to write one that does"
        estimated = job.condition("Estimated")
        if estimated is not None and estimated.status == "False" and estimated.reason == "ConfigurationsChanged":
            return (f"its estimate was withdrawn: {ANNOTATION_CONFIGURATIONS} changed since it was sampled; it waits for the "
                    "estimator to sample the edit")
        return f"it has no {ANNOTATION_ESTIMATE} yet; it waits for the estimator (or its user) to write one"
    if _pods(job) < 1:
        return "it runs no pod (spec.parallelism or spec.completions is 0)"
    if estimate and _estimate_predates(estimate, configurations):
        return (f"its {ANNOTATION_ESTIMATE} was sampled on a configuration edited since; it waits for the estimator to "
                "sample the edit")
    return None


@lru_cache(maxsize=8192)
def _estimate_predates(estimate: str, configurations: str) -> bool:
    """Whether cellfit sampled the estimate on a configuration its user edited since (an entry's
    ``configurationDigest`` is not the configuration's now): until the estimator withdraws it,
    a start would rest on a configuration the Job no longer has, and the withdrawal (which tests
    that the Job is still suspended) would then fail. An entry without a digest (a user's
    estimate) holds for whatever configuration is there."""
    document = parse_estimate_cached(estimate).document
    parsed = parse_configurations_cached(configurations)
    for kind in parsed.kinds:
        entry = document.get(kind)
        recorded = entry.get("configurationDigest") if isinstance(entry, dict) else None
        if recorded is not None and recorded != configuration_digest(parsed[kind]):
            return True
    return False


def _refusable(job: Job) -> tuple[bytes, str]:
    """What a start patches the Job from: its pod template and its configurations."""
    return bytes(job.spec.template), job.annotations.get(ANNOTATION_CONFIGURATIONS, "")


@lru_cache(maxsize=8192)
def _demands(configurations: str, gpu_resource: str, shape: bytes) -> Mapping[str, Demand]:
    """One pod's demand per kind, once per distinct ``cellfit.io/configurations`` value and pod
    shape (:func:`_pod_shape`; every pass reads every Job's, and parsing quantities was a quarter
    of a pass at 1,000 Jobs). Shared between passes, so read only; a plain dict, as the inputs go
    to the solver process pickled."""
    parsed = parse_configurations_cached(configurations)
    return {kind: _demand(parsed[kind], gpu_resource, shape=shape) for kind in parsed.kinds}


def _demand(configuration: Configuration, gpu_resource: str, *, shape: bytes) -> Demand:
    """What a pod of the Job asks for in ``configuration``, as kube-scheduler counts it
    (scheduler/kube/translate.py ``pod_requests``) of the pod the rewrite makes: the
    configuration is every container's (placer/rewrite.py: a trainer and its sidecar ask for it
    twice), init containers ask theirs while they run, sidecar init containers theirs beside the
    containers, pod-level resources replace the containers' CPU and memory, the overhead comes
    on top."""
    placed = apply_configuration(shape, configuration)
    requests = pod_requests(msgspec.convert(placed["spec"], wire.PodSpec), gpu_resource=gpu_resource, field="spec.template.spec")
    return Demand(cpu=requests.cpu_millis / 1000, gpu=requests.gpus, memory=requests.memory_bytes / GIB)


class _PodTemplate(msgspec.Struct, frozen=True, gc=False):
    spec: wire.PodSpec = wire.PodSpec()


_POD_TEMPLATE: Final = msgspec.json.Decoder(_PodTemplate)
_SIZED: Final = ("initContainers", "overhead", "resources")  # what of a pod's spec sizes it beside its containers


@lru_cache(maxsize=8192)
def _pod_shape(template: bytes) -> bytes:
    """What of a pod template sizes its pods beside the configuration, as JSON: as many
    containers (at least one: the configuration's own pod), its init containers, pod-level
    resources and overhead. Jobs whose templates differ elsewhere (names, labels, images) share
    it, and so their demand mapping."""
    spec = _POD_TEMPLATE.decode(template).spec
    shape: dict[str, Any] = {"containers": [{} for _ in range(max(len(spec.containers), 1))]}
    shape.update({key: value for key, value in msgspec.to_builtins(spec).items() if key in _SIZED and value is not None})
    return msgspec.json.encode({"spec": shape})


def _job_demands(job: Job, configurations: str, gpu_resource: str) -> Mapping[str, Demand] | None:
    """:func:`_demands` of the Job's pod template; None, logged with the field, for a template
    kube-scheduler could not count either (the API server validates it: a defect elsewhere),
    so that one Job does not stop every Job's admission."""
    try:
        return _demands(configurations, gpu_resource, _pod_shape(bytes(job.spec.template) if job.spec.has_template else b"{}"))
    except (CellfitError, msgspec.ValidationError, msgspec.DecodeError) as error:
        log.warning("a Job's pod template cannot be counted; AlloX leaves it out",
                    extra={"job": f"{job.metadata.namespace}/{job.metadata.name}", "reason": str(error)})
        return None


def _no_machine(
    item: WaitingJob, job: Job, *, beyond: frozenset[str], room: GpuRoom, outside: str | None,
    capacity: Capacity | None = None, nodes: Sequence[Capacity] = (), beside_kept: Sequence[Capacity] = (),
    cpu_room: Capacity | None = None, beside_floor: Sequence[Capacity] = (), floor_room: Capacity | None = None,
    window_seconds: float = DEFAULT_UNBOUND_HOLD_SECONDS,
) -> str:
    """Why no node of AlloX's starts the Job: its estimate names no kind it has a configuration
    for; or each configuration no node holds, named by its field with what one pod asks, and
    whether it never fits (more than AlloX's nodes have in all, ``capacity``, or than any one of
    them has, ``nodes``) or fits no node's free room now, and a GPU configuration outside every
    VC AlloX counts (``outside``); else that
    no node offers a kind it has an estimate for. The message is the NoMachine Event's once-key
    and the condition is written again when it changes: no number in it moves as pods come and
    go (``capacity`` is the nodes' allocatable, not what is free)."""
    if not item.seconds:
        estimated = sorted(parse_estimate_cached(job.annotations[ANNOTATION_ESTIMATE]).seconds)
        configured = parse_configurations_cached(job.annotations[ANNOTATION_CONFIGURATIONS]).kinds
        return (f"{ANNOTATION_ESTIMATE} gives {', '.join(estimated)} and {ANNOTATION_CONFIGURATIONS} "
                f"{', '.join(configured)}: no kind has both, and AlloX chooses only a kind with an estimate, so the Job is "
                "never started until one of them names the other's kind")
    counted = _counted(job)
    reasons = [_asks(kind, item.demand[kind], counted=counted, room=room, capacity=capacity, nodes=nodes,
                     beside_kept=beside_kept, cpu_room=cpu_room, beside_floor=beside_floor, floor_room=floor_room,
                     window_seconds=window_seconds)
               for kind in sorted(beyond)]
    unmatched = set(beyond)
    if outside is not None and "gpu" in item.seconds and "gpu" not in beyond:
        reasons.append(f"its gpu configuration: {outside}")
        unmatched.add("gpu")
    if not reasons:
        pods = _pods(job)
        return "no node of the cluster offers a kind this Job has an estimate for" + (f" with {pods} machines at once" if pods > 1 else "")
    others = sorted(set(item.seconds) - unmatched)
    return (f"AlloX's nodes ({ALLOX_NODES}) cannot start this Job: " + "; ".join(reasons)
            + (f"; and no node offers its {', '.join(others)} configuration" if others else ""))


# Where AlloX's nodes are chosen, named once in what a Job is told: "machine of AlloX's" meant
# nothing to its user.
ALLOX_NODES: Final = "allox.nodeSelector"


def _held_by_others(
    item: WaitingJob, *, beyond: frozenset[str], outside: str | None, capacity: Capacity, cpu_room: Capacity
) -> list[str]:
    """The Job's kinds whose machines AlloX's nodes have, but none free nor held by a Job AlloX
    started (so no end to queue behind): pods AlloX did not start hold them all. Empty when a
    kind of it no node holds now (:func:`_no_machine` names it), or AlloX's nodes together
    could not hold its pods in any kind it has (then none of them ever frees for it)."""
    if beyond or outside is not None:
        return []
    # cpu_room: the cores and memory not kept beside GPUs (§4.4, F17), each node's own
    held = []
    for kind in sorted(item.seconds):
        demand = item.demand.get(kind)
        if demand is None:
            continue
        room = capacity if demand.gpu > 0 else cpu_room
        pods = item.pods
        if demand.gpu * pods <= room.gpu and demand.cpu * pods <= room.cpu and demand.memory * pods <= room.memory:
            held.append(kind)
    return held


def _in_use_message(kinds: Sequence[str], *, pods: int) -> str:
    """What a Job waits for while pods AlloX did not start hold every machine of its kinds."""
    machines = " or ".join(kinds)
    wanted = f"{pods} of them free at once" if pods > 1 else "one frees"
    return (f"every {machines} machine of AlloX's nodes is in use by pods AlloX did not start, so no Job of AlloX's ends "
            f"for it to queue behind: it waits until {wanted}")


def _gpu_outside_vcs(job: Job, found: Guarantees) -> str | None:
    """Under HiveD, why the Job's GPU configuration has no VC's GPUs (None: it has its VC's)."""
    labels = _template_labels(job)
    if labels.get(LABEL_PRIORITY) == PRIORITY_OPPORTUNISTIC:
        return (f"its pods are opportunistic ({LABEL_PRIORITY}: {PRIORITY_OPPORTUNISTIC}), and AlloX starts a GPU "
                "configuration only on its virtual cluster's guarantee")
    vc = labels.get(LABEL_VIRTUAL_CLUSTER) or found.default_vc
    if vc in found.cells:
        return None
    if vc is None:
        return (f"its pod template has no {LABEL_VIRTUAL_CLUSTER} label, and no virtual cluster is the default: "
                f"label it with one of {', '.join(sorted(found.cells))}")
    return (f"{LABEL_VIRTUAL_CLUSTER} {vc!r} of its pod template is no virtual cluster HiveD knows "
            f"({', '.join(sorted(found.cells))}): label it with one of them")


def _asks(
    kind: str, demand: Demand, *, counted: str, room: GpuRoom, capacity: Capacity | None = None,
    nodes: Sequence[Capacity] = (), beside_kept: Sequence[Capacity] = (), cpu_room: Capacity | None = None,
    beside_floor: Sequence[Capacity] = (), floor_room: Capacity | None = None, window_seconds: float = DEFAULT_UNBOUND_HOLD_SECONDS,
) -> str:
    """Why no node holds the Job's ``kind`` configuration: the field and what one pod asks, and
    either that it is more than AlloX's nodes have in all (``capacity``) or than any one of them
    has (``nodes``, each node's allocatable: a pod runs on one node), so it never fits however
    long it waits, or more than any has free now (it may fit once pods leave). A CPU configuration
    is told it never fits only beyond what the nodes have less ``allox.reservedCpuPerGpu`` beside
    their GPUs (``beside_floor``, ``floor_room``); beyond what they have less the room kept for the
    GPU pods they hold (``beside_kept``, ``cpu_room``), that it fits once those pods have been gone
    ``window_seconds`` (review26: it was told it never fits, and started 301 s after they left)."""
    field = f"{ANNOTATION_CONFIGURATIONS}.{kind}.resources"
    if kind != "gpu":
        # Memory only when asked: "500 cores and 0 GiB a pod" read as if 0 GiB were too much too.
        cpu_asked = f"{demand.cpu:g} cores" + (f" and {demand.memory:g} GiB" if demand.memory > 0 else "")
        # A CPU slot is cut from what a node has beside the cores and memory kept for its GPUs.
        never = _beyond_capacity(demand, capacity, beside_kept=floor_room) or _beyond_each_node(demand, nodes, beside_kept=beside_floor)
        gone = f"it fits once the GPU pods asking that much beside their GPUs have been gone {window_seconds:.0f} s"
        later = None if never else (_beyond_capacity(demand, capacity, beside_kept=cpu_room, ending=gone)
                                    or _beyond_each_node(demand, nodes, beside_kept=beside_kept, ending=gone))
        return f"{field}, {cpu_asked} a pod{counted}, " + (never or later or "more than any of them has free now")
    short = gpu_shortfall(demand, room=room)
    gpus = f"{demand.gpu:g} GPU" + ("" if demand.gpu == 1 else "s")
    never_gpus = _beyond_capacity(Demand(gpu=demand.gpu), capacity) or _beyond_each_node(Demand(gpu=demand.gpu), nodes)
    if not short or short == ("gpu",) or never_gpus:
        return f"{field}, {gpus} a pod{counted}, " + (never_gpus or "more than any of them has free now")
    asked = {"cpu": f"{demand.cpu:g} cores", "memory": f"{demand.memory:g} GiB"}
    beside = Demand(cpu=demand.cpu if "cpu" in short else 0.0, memory=demand.memory if "memory" in short else 0.0)
    never = _beyond_capacity(beside, capacity) or _beyond_each_node(
        beside, [node for node in nodes if node.gpu >= demand.gpu], holders=f"any of them with {gpus}")
    return (" and ".join(f"{field}.{name}" for name in short) + f", {' and '.join(asked[name] for name in short)} a pod beside its "
            f"{gpus}{counted}, " + (never or f"more than any of them with {gpus} free has free now"))


def _beyond_capacity(
    demand: Demand, capacity: Capacity | None, *, beside_kept: Capacity | None = None, ending: str = "it never fits"
) -> str | None:
    """"more than they have in all (64 cores): it never fits" when one pod of ``demand`` asks more
    than AlloX's nodes have together (a pod runs on one node); None when not, or not known.
    ``beside_kept``: what they have less the cores and memory kept beside their GPUs, which a CPU
    pod's are not cut from: "(32 cores beside the 32 kept for their GPUs)"."""
    if capacity is None:
        return None
    left = capacity if beside_kept is None else beside_kept
    cores_kept, memory_kept = capacity.cpu - left.cpu, capacity.memory - left.memory
    over = [said for asked, total, said in (
        (demand.gpu, capacity.gpu, f"{capacity.gpu:g} GPU" + ("" if capacity.gpu == 1 else "s")),
        (demand.cpu, left.cpu, _left_beside_kept(left.cpu, cores_kept, unit="cores")),
        (demand.memory, left.memory, _left_beside_kept(left.memory, memory_kept, unit="GiB")),
    ) if asked > 0 and asked > total]
    return f"more than they have in all ({' and '.join(over)}): {ending}" if over else None


def _left_beside_kept(left: float, kept: float, *, unit: str) -> str:
    """"32 cores beside the 32 kept for their GPUs"; "none beside the 1152 GiB kept for their
    GPUs" where what is kept takes it all (review26: it read "-192 GiB beside the 1344 kept")."""
    if kept <= 0:
        return f"{round(left, 1):g} {unit}"
    if left <= 0:
        return f"none beside the {round(kept, 1):g} {unit} kept for their GPUs"
    return f"{round(left, 1):g} {unit} beside the {round(kept, 1):g} kept for their GPUs"


def _beyond_each_node(
    demand: Demand, nodes: Sequence[Capacity], *, holders: str = "any one of them", beside_kept: Sequence[Capacity] = (),
    ending: str = "it never fits",
) -> str | None:
    """"more than any one of them has (32 cores at most): it never fits" when no node of
    ``nodes`` (each one's allocatable, or ``beside_kept``: less what it keeps beside its GPUs) holds one
    pod of ``demand`` (:func:`beyond_largest_node`); None when one holds it, or no node is known.
    What is kept, where it is what the pod lacks: "(64 GiB at most, beside the memory kept for
    its GPUs)"."""
    left = list(beside_kept) or list(nodes)
    beyond = beyond_largest_node(
        [demand.gpu, demand.cpu, demand.memory], [[node.gpu, node.cpu, node.memory] for node in left],
        read=[gpu_count, lambda cores: f"{round(cores, 1):g} cores", lambda gib: f"{round(gib, 1):g} GiB"],
    )
    if beyond is None:
        return None
    lacking = [what for what, kept_some, asked, most in (
        ("cores", any(less.cpu < node.cpu for node, less in zip(nodes, left)), demand.cpu, max(node.cpu for node in left)),
        ("memory", any(less.memory < node.memory for node, less in zip(nodes, left)), demand.memory, max(node.memory for node in left)),
    ) if kept_some and asked > most and any(node.gpu > 0 for node in nodes)]
    kept = f", beside the {' and '.join(lacking)} kept for its GPUs" if lacking else ""
    return f"more than {holders} has ({beyond[1]}{kept}): {ending}"


def _beside_kept(node: Capacity, *, kept: Demand) -> Capacity:
    """The node (or nodes) as a CPU slot is cut from it: its cores and memory less those
    ``kept`` beside each of its GPUs, none below zero (more kept than it has leaves it none)."""
    return replace(node, cpu=max(node.cpu - kept.cpu * node.gpu, 0.0), memory=max(node.memory - kept.memory * node.gpu, 0.0))


def _total(nodes: Sequence[Capacity]) -> Capacity:
    """What ``nodes`` have together."""
    return Capacity(cpu=sum(node.cpu for node in nodes), gpu=sum(node.gpu for node in nodes), memory=sum(node.memory for node in nodes))


def _in_demand_units(resources: Resources) -> Capacity:
    """Allocatable resources in the units a Job's demand is in: cores, GPUs, GiB."""
    return Capacity(cpu=resources.cpu_millis / 1000, gpu=max(resources.gpus, 0), memory=max(resources.memory_bytes, 0) / GIB)


def _take_gpus(choice: TrialChoice, *, pods: int, run: float, graces: list[float], ends: list[float]) -> None:
    """What a trial Job started on a busy GPU takes from the next one's view (``choose_for_trial``):
    under ``preemption`` a best-effort pod per pod of it (FitGpp preempts for each pod that finds
    no GPU), under ``frees`` the first busy GPUs freeing; the GPUs it gets free again once it is
    done (``wait + run``), and a victim's GPU it does not get (a busy GPU freed sooner) frees at
    the victim's grace period. ``graces`` and ``ends`` sorted, changed in place."""
    wait = choice.gpu_wait or 0.0
    for _ in range(pods):
        if choice.gpu_by == "preemption" and graces:
            grace = graces.pop(0)
            if grace > wait and ends:  # a busy GPU frees first and its pod binds there
                ends.pop(0)
                bisect.insort(ends, grace)
        elif ends:
            ends.pop(0)
        bisect.insort(ends, wait + run)


def _resuming(job: Job, pods: JobPods | None) -> bool:
    """A Job cellfit preempted whose pods are all waiting to be placed again: none is bound, one
    is pending (its podFailurePolicy let the Job controller make it; else the Job failed)."""
    if pods is None or pods.here or pods.elsewhere or not pods.unbound:
        return False
    try:
        return preemption_count_of(job.annotations) > 0
    except InvalidAnnotation:
        return False


def _is_trial(job: Job) -> bool:
    """A FitGpp trial-and-error Job (label on the Job or on its pod template)."""
    if (job.metadata.labels or {}).get(LABEL_JOB_CLASS) == JOB_CLASS_TRIAL:
        return True
    return _template_labels(job).get(LABEL_JOB_CLASS) == JOB_CLASS_TRIAL


def _template_labels(job: Job) -> Mapping[str, str]:
    if not job.spec.has_template:
        return {}
    return _labels_of(bytes(job.spec.template))


def _counted(job: Job) -> str:
    """How a pod of the Job was counted, for a message: its containers each with the
    configuration, and what kube-scheduler adds beside them (:func:`_demand`)."""
    spec = json.loads(_pod_shape(bytes(job.spec.template) if job.spec.has_template else b"{}"))["spec"]
    containers = len(spec["containers"])
    terms = [f"{containers} containers, each the configuration"] if containers > 1 else []
    terms.extend(what for key, what in (("initContainers", "its init containers"), ("resources", "its pod-level resources"),
                                        ("overhead", "its overhead")) if key in spec)
    return f" ({'; with '.join(terms) if containers > 1 else 'with ' + ', '.join(terms)})" if terms else ""


@lru_cache(maxsize=8192)
def _labels_of(template: bytes) -> Mapping[str, str]:
    """The pod template's labels, once per distinct template (every pass asks of every Job;
    parsing the templates was a third of a pass at 1,000 Jobs). Shared, so read only."""
    return MappingProxyType(dict((json.loads(template).get("metadata") or {}).get("labels") or {}))


def _pods(job: Job) -> int:
    """Pods the Job runs at once (``spec.parallelism``, fewer when ``spec.completions`` is
    smaller): the machines it holds. Its estimate is already the whole Job's time (waves
    included, estimator/model.py)."""
    width = 1 if job.spec.parallelism is None else job.spec.parallelism
    return width if job.spec.completions is None else min(width, job.spec.completions)
