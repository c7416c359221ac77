"""After an outage, make kube-scheduler retry the pods it parked while cellfit was away.

kube-scheduler keeps a pod that failed to schedule in its unschedulable queue until a cluster
event that one of the pod's rejecting plugins registered for says it may fit now, or until its
5-minute flush. A pod whose preemption met a down or restarting cellfit was rejected by
kube-scheduler's own NodeResourcesFit (the GPUs are full), and then the preempt call failed:
nothing in a quiet cluster wakes it for 5 minutes (measured 294 s and 312 s in issue 18).

What wakes it: an *update of the pod itself* only does when the rejection came partly from the
extender (kube-scheduler then records the pseudo-plugin "Extender", registered for every
event); NodeResourcesFit's queueing hints ignore updates of the pending pod (v1.35 and v1.37:
``PodSchedulingPropertiesChange`` yields TargetPod/Update, for which NodeResourcesFit registers
nothing), so an annotation or label patch leaves the usual preempt-path pod parked (seen on the
e2e control plane: the patched pod stayed in "Unschedulable" with rejectors NodeAffinity and
NodeResourcesFit). What NodeResourcesFit and "Extender" both requeue on is the deletion of an
assigned pod (``isSchedulableAfterAssignedPodDelete``: any assigned pod deleted, Queue). So the
requeue signal is a pod bound at creation to a node that never exists
(:data:`REQUEUE_SIGNAL_NODE`), deleted at once with no grace period: no kubelet ever sees it,
kube-scheduler's cache adds and removes it, and every pod parked on resources or by the
extender goes back to its active queue (or its backoff, at most 10 s). Two API calls however
many pods are parked; the retry is what any pod completing in a busy cluster would cause. A
signal pod whose deletion failed is removed by kube-controller-manager's pod garbage collector,
which deletes pods bound to a node that does not exist.

What it reads: the profile's pending pods that kube-scheduler found unschedulable, from the
term's :class:`~scheduler.cluster.pending.PendingPods` (listed once a term, then followed by a
watch of them alone, shared with HiveD's reclaim of stranded pods), or from its own when it is
given none: their key, and their PodScheduled=False condition's time and message, which the
process's own pod watch (cache.py) does not keep.

When: the leader (scheduler/cluster/leadership.py) looks at those pods every
``nudge.periodSeconds`` once its watch cache has synced, and signals when

* a pod has been unschedulable since before this term began (its PodScheduled=False condition
  is older than the moment this cellfit took charge): once per term;
* a pod's last attempt met an extender error (its condition message names cellfit's extender
  path: "connection refused", or HTTP 503 while cellfit was starting; not another status, which
  cellfit answered this pod with): while such pods remain, at most every
  ``nudge.minIntervalSeconds`` (another replica's cellfit may still be coming back).

The retry also replaces the stale "connection refused" FailedScheduling event: kube-scheduler
writes the new attempt's outcome.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Final, Protocol, Sequence

from scheduler.cluster.pending import PendingPods, PendingPodsApi, UnschedulablePod
from scheduler.cluster.pending import unschedulable_pods as unschedulable_pods  # the PodList's, as the nudge reads them
from scheduler.config import NudgeSettings
from scheduler.constants import EXTENDER_URL_PREFIX, LABEL_REQUEUE_SIGNAL, REQUEUE_SIGNAL_IMAGE, REQUEUE_SIGNAL_NODE
from scheduler.errors import KubernetesApiError

log = logging.getLogger(__name__)

# What kube-scheduler's messages contain when a call to cellfit failed: the verb's URL, in both
# "Post \"http://.../v1/extender/preempt\": ... connection refused" and "failed preemption with
# extender at URL http://.../v1/extender/preempt, code 503".
EXTENDER_ERROR_MARK = EXTENDER_URL_PREFIX + "/"
# The HTTP status cellfit answered a call with, as kube-scheduler words it ("... with extender at
# URL http://.../v1/extender/preempt, code 500"). Any other than 503 (starting) means cellfit was
# there and refused this pod: a retry meets the same answer.
_ANSWERED = re.compile(re.escape(EXTENDER_URL_PREFIX) + r"/\w+, code (\d+)")
STARTING_STATUS = "503"
# Never pulled: no kubelet runs a pod bound to a node that does not exist.
# Stated, though nothing runs it: a ResourceQuota tracking compute resources makes the API server
# refuse any pod whose containers leave one unstated (where no LimitRange defaults it), and the
# signal would then never be sent. The least amounts, counted against the quota for the
# milliseconds the pod exists.
SIGNAL_RESOURCES: Final = {"cpu": "1m", "memory": "1Mi", "ephemeral-storage": "1Mi"}
LOGGED_KEYS = 5  # pod names a signal's log line lists


class SignalApi(Protocol):
    """The calls a requeue signal makes (implemented by scheduler.cluster.api.KubernetesApi)."""

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None: ...

    def delete_pod(
        self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> None: ...


class NudgeApi(SignalApi, PendingPodsApi, Protocol):
    """The calls the nudge makes (implemented by scheduler.cluster.api.KubernetesApi)."""


# ------------------------------------------------------------------ which pods, and when (pure)


@dataclass(frozen=True)
class Parked:
    """The pods that call for a requeue signal, by why."""

    stale: tuple[str, ...] = ()  # unschedulable since before this term began
    failed: tuple[str, ...] = ()  # their last attempt met an extender error

    def __bool__(self) -> bool:
        return bool(self.stale or self.failed)


def parked(pods: Sequence[UnschedulablePod], *, term_began: float, error_mark: str = EXTENDER_ERROR_MARK) -> Parked:
    """Sort ``pods`` into those unschedulable since before ``term_began`` and those whose last
    attempt failed on an extender call while cellfit was away or starting (a pod that is both
    counts as failed)."""
    stale, failed = [], []
    for pod in pods:
        if _met_cellfit_away(pod.message, error_mark=error_mark):
            failed.append(pod.key)
        elif pod.since < term_began:
            stale.append(pod.key)
    return Parked(stale=tuple(sorted(stale)), failed=tuple(sorted(failed)))


def _met_cellfit_away(message: str, *, error_mark: str) -> bool:
    """Whether a call to cellfit failed without an answer (refused, reset, timed out) or with
    its 503 while starting; not when cellfit answered this pod with another error, for which
    a signal every minInterval would requeue every parked pod for as long as the pod stays."""
    if error_mark not in message:
        return False
    statuses = _ANSWERED.findall(message)
    return not statuses or STARTING_STATUS in statuses


@dataclass
class SignalPacer:
    """When to send the requeue signal: for stale pods once per term (one signal requeues them
    all; if they stay unschedulable afterwards, the cluster's own events wake them), for failed
    pods while they remain, never twice within ``min_interval`` seconds."""

    min_interval: float
    last: float | None = None
    stale_covered: bool = False
    sent: int = field(default=0)

    def due(self, found: Parked, now: float) -> bool:
        # ``now`` is wall time (the pods' conditions are): a clock stepped back since the last
        # signal leaves the interval over, not ahead of it for as long as the step.
        if self.last is not None and 0 <= now - self.last < self.min_interval:
            return False
        return bool(found.failed) or (bool(found.stale) and not self.stale_covered)

    def record(self, now: float) -> None:
        self.last = now
        self.stale_covered = True
        self.sent += 1


# ------------------------------------------------------------------ the signal


def signal_pod(name: str, *, namespace: str, image: str = REQUEUE_SIGNAL_IMAGE) -> dict[str, Any]:
    """The pod whose creation and deletion make kube-scheduler requeue parked pods: bound at
    creation to a node that never exists, requesting next to nothing, restricted in every way
    the Pod Security "restricted" profile asks."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {LABEL_REQUEUE_SIGNAL: "true"}},
        "spec": {
            "nodeName": REQUEUE_SIGNAL_NODE,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "signal",
                "image": image,
                "resources": {"requests": dict(SIGNAL_RESOURCES), "limits": dict(SIGNAL_RESOURCES)},
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }],
        },
    }


def send_signal(api: SignalApi, *, namespace: str, image: str = REQUEUE_SIGNAL_IMAGE) -> None:
    """Create the signal pod and delete it at once (no grace: nothing runs it). Sent once
    created: a deletion that fails is the pod garbage collector's to make (it deletes pods bound
    to a node that does not exist), which requeues the parked pods the same way, later; raising
    then would have the callers send another signal pod at every try."""
    name = f"cellfit-requeue-{uuid.uuid4().hex[:10]}"
    api.create_pod(namespace=namespace, pod=signal_pod(name, namespace=namespace, image=image))
    try:
        api.delete_pod(namespace=namespace, name=name, grace_period_seconds=0)
    except KubernetesApiError as error:
        log.warning(
            "requeue signal pod not deleted; the pod garbage collector removes it, and kube-scheduler retries then",
            extra={"pod": f"{namespace}/{name}", "reason": str(error)},
        )


VICTIMS_GONE = "preemption victims gone"
CELLS_CHANGED = "this replica's virtual clusters or cells changed"
HOLD_ENDED = "a room hold that kept pods off ended"
LOOK_AT_CELLS = "the cells may have changed"  # not a reason to signal: to look whether CELLS_CHANGED is one


class VictimRequeue:
    """Makes kube-scheduler retry its parked pods once cellfit has seen preemption victims go,
    and once this replica's virtual clusters or cells have changed.

    kube-scheduler retries a preemptor when a victim's deletion reaches its own informer;
    cellfit's watch applies the same deletion a few milliseconds later or sooner. A filter
    answered in between still counts the victim's GPUs as used and refuses the pod, which
    kube-scheduler then parks until another cluster event requeues it: in a quiet cluster, its
    5-minute flush (seen once in the cell exchange's e2e before its controller signalled). One
    requeue signal after cellfit applied the deletions closes that window. The victims are the
    ones this replica chose (the preempt verb, the leader's reclaim) and, after a restart, those
    of each preemptor hold it rebuilt from the pods (a preemptor's record or nomination:
    ``ClusterCache.remember_victims``, told by the engine). The victims that go
    within ``delay_seconds`` of the first share one signal, and signals are at least
    ``min_interval_seconds`` apart. :meth:`victims_gone` only sets an event: the watch cache
    calls it under the engine lock.

    The same holds for a live reload that adds a VC or grows one (or the cell exchange, or a
    discovered node joining): kube-scheduler parked the pods HiveD refused before, and no cluster
    event tells it that cellfit would place them now. Whatever may have changed them calls
    :meth:`cells_may_have_changed` (runtime.py wires the three); the loop then reads
    ``cells_summary``, the engine's one-line summary of its cells and VCs
    (``CellInspection.summary``, under the engine lock), and a signal follows when it differs
    from the last one read: a reload that changed only a booking limit, or an exchange move
    undone before the loop looked, sends none. Each replica reloads its own file when its
    kubelet updates the mount, so each signals for its own kube-scheduler."""

    def __init__(
        self,
        *,
        api: SignalApi,
        namespace: str,
        delay_seconds: float = 0.2,
        min_interval_seconds: float = 1.0,
        on_signal: Callable[[], None] | None = None,
        signal_image: str = REQUEUE_SIGNAL_IMAGE,
        cells_summary: Callable[[], str] | None = None,
        on_cells_signal: Callable[[], None] | None = None,
        on_hold_signal: Callable[[], None] | None = None,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._signal_image = signal_image
        self._delay = delay_seconds
        self._min_interval = min_interval_seconds
        self._on_signal = on_signal
        self._cells_summary = cells_summary
        self._on_cells_signal = on_cells_signal
        self._on_hold_signal = on_hold_signal
        # What the cells were when last looked at: the engine as startup built it.
        self._seen_summary = cells_summary() if cells_summary is not None else None
        self._reasons: set[str] = set()  # why the next signal is due; guarded by _due
        self._due_lock = threading.Lock()
        self._gone = threading.Event()  # set while a signal is due
        self._stop = threading.Event()
        self._last = float("-inf")
        self.sent = 0
        self._thread = threading.Thread(target=self._run, name="victim-requeue", daemon=True)

    def victims_gone(self) -> None:
        self._want(VICTIMS_GONE)

    def hold_ended(self) -> None:
        """A room hold (FitGpp's, for a preemptor or a resumed pod) that kept pods off ended
        without its pod bound (it lapsed, ended on another replica, or its pod or Job was
        deleted): kube-scheduler parked the pods it kept off (user26: a node idle ~70 s until
        unrelated events requeued them). Only sets an event: the cache calls it under the engine lock."""
        self._want(HOLD_ENDED)

    def cells_may_have_changed(self) -> None:
        """The cells or VCs may have changed (a reload applied, an exchange's quota moved, a
        discovered node joined or left): the loop looks, and signals if they did. Only sets an
        event: the engine calls it under the engine lock."""
        if self._cells_summary is not None:
            self._want(LOOK_AT_CELLS)

    def check_cells(self) -> bool:
        """Whether the cells' summary changed since the last look (read under the engine lock:
        the caller must not hold a lock the engine's callers take after it); a signal is then
        due."""
        if not self._cells_changed():
            return False
        self._want(CELLS_CHANGED)
        return True

    def _cells_changed(self) -> bool:
        if self._cells_summary is None:
            return False
        summary = self._cells_summary()
        if summary == self._seen_summary:
            return False
        self._seen_summary = summary
        return True

    def _want(self, reason: str) -> None:
        with self._due_lock:  # the event moves with the reasons: no wake-up is lost between them
            self._reasons.add(reason)
            self._gone.set()

    def _take_reasons(self) -> set[str]:
        with self._due_lock:
            reasons, self._reasons = self._reasons, set()
            self._gone.clear()
        return reasons

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._gone.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for the loop's thread to end once stopped: a signal in
        flight at shutdown (two API calls) is still sending, and would log after the service
        stopped."""
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._gone.wait()
            if self._stop.wait(max(self._delay, self._last + self._min_interval - time.monotonic())):
                return
            reasons = self._take_reasons()
            if LOOK_AT_CELLS in reasons:
                # Looked at after the wait: the changes made within it share one look.
                reasons.discard(LOOK_AT_CELLS)
                try:
                    if self._cells_changed():
                        reasons.add(CELLS_CHANGED)
                except Exception:  # a defect must not end the loop
                    log.exception("the cells' summary was not read for the requeue signal")
            if not reasons:
                continue
            try:
                send_signal(self._api, namespace=self._namespace, image=self._signal_image)
            except KubernetesApiError as error:
                log.warning("requeue signal not sent; retrying", extra={"reason": str(error), "why": sorted(reasons)})
                self._retry(reasons)
                continue
            except Exception:  # a defect must not end the loop
                log.exception("requeue signal failed; retrying")
                self._retry(reasons)
                continue
            finally:
                self._last = time.monotonic()
            self.sent += 1
            log.info("requeue signal sent: kube-scheduler retries its parked pods", extra={"why": sorted(reasons)})
            self._signalled(reasons)

    def _retry(self, reasons: set[str]) -> None:
        """The reasons still hold: try again after the interval."""
        for reason in reasons:
            self._want(reason)

    def _signalled(self, reasons: set[str]) -> None:
        if VICTIMS_GONE in reasons and self._on_signal is not None:
            self._on_signal()
        if CELLS_CHANGED in reasons and self._on_cells_signal is not None:
            self._on_cells_signal()
        if HOLD_ENDED in reasons and self._on_hold_signal is not None:
            self._on_hold_signal()


# ------------------------------------------------------------------ the loop


class Nudger:
    """One term's nudge loop (start and stop it with the term). ``pending``: the term's view of
    the pending pods, which its owner starts and stops; without one, the nudge keeps its own."""

    def __init__(
        self,
        *,
        api: NudgeApi,
        settings: NudgeSettings,
        namespace: str,
        ready: Callable[[], bool],
        clock: Callable[[], float] = time.time,
        on_signal: Callable[[Parked], None] | None = None,
        pending: PendingPods | None = None,
    ) -> None:
        self._api = api
        self._settings = settings
        self._namespace = namespace
        self._ready = ready
        self._clock = clock
        self._on_signal = on_signal
        self._pacer = SignalPacer(min_interval=settings.min_interval_seconds)
        self._own_pending = pending is None
        self._pending = pending if pending is not None else PendingPods(
            api=api, scheduler_name=settings.scheduler_name, constrained=False)
        self._stop = threading.Event()
        self._failing = False
        self.term_began: float | None = None  # when this cellfit took charge: leading and synced
        self._thread = threading.Thread(target=self._run, name="nudge", daemon=True)

    def start(self) -> None:
        if self._own_pending:
            self._pending.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._own_pending:
            self._pending.stop()

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds (each) for the loop's thread and its own view's to end
        once stopped."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        if self._own_pending:
            self._pending.join(timeout)

    @property
    def signals(self) -> int:
        return self._pacer.sent

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.pass_once()
            except Exception:  # a defect must not end the loop
                log.exception("nudge pass failed")
            self._stop.wait(self._settings.period_seconds)

    def pass_once(self) -> Parked:
        """Read the pending pods (waiting up to a period for their first list), select, and
        signal if due; what was found."""
        if not self._ready():
            return Parked()
        if self.term_began is None:
            self.term_began = self._clock()
        pods = self._pending.unschedulable(wait=self._settings.period_seconds)
        if pods is None:  # the list failed: the reflector logs why, and retries
            if not self._failing:
                self._failing = True
                log.warning("nudge: the pending pods are not listed yet; retrying")
            return Parked()
        try:
            found = parked(pods, term_began=self.term_began)
            now = self._clock()
            if not self._pacer.due(found, now):
                self._recovered()
                return found
            send_signal(self._api, namespace=self._namespace, image=self._settings.signal_image)
        except KubernetesApiError as error:
            if not self._failing:
                self._failing = True
                log.warning("nudge: the API call failed; retrying", extra={"reason": str(error)})
            return Parked()
        self._recovered()
        self._pacer.record(now)
        log.info(
            "requeue signal sent: kube-scheduler retries the pods it parked",
            extra={
                "stale": len(found.stale), "failed": len(found.failed),
                "pods": list((found.failed + found.stale)[:LOGGED_KEYS]),
            },
        )
        if self._on_signal is not None:
            self._on_signal(found)
        return found

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            log.info("nudge: the API answers again")
