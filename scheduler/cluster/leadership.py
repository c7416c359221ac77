"""Leader election on a coordination.k8s.io Lease, the way client-go's ``leaderelection`` does it,
and the terms of leadership that the live drivers run in.

Every replica serves the extender verbs to the kube-scheduler beside it: kube-scheduler's own
Lease decides which of those is called. What must run once per cluster - the estimator, AlloX
admission and the placer, the requeue nudge - runs on the holder of cellfit's own Lease only
(``leaderElection`` in the configuration):

* a replica takes the Lease when it does not exist, when it is released (no holder), when it
  holds it already (a restarted container keeps its identity, the pod's name, and takes it back
  at once), or when nobody renewed it for ``leaseDurationSeconds`` *as this replica observed it*:
  the lapse is measured on the local monotonic clock from the moment the record last changed,
  never from the timestamps in it, so clock skew between replicas cannot cut a term short, and
  never for less than its own ``leaseDurationSeconds`` (a duration edited to 0 by hand lets no
  standby take a living leader's Lease); a Lease deleted while another replica held it is
  waited for as if it were still there (its holder recreates it at its next round);
* a leader that reads the Lease naming another holder (taken over after a lapse it did not
  notice, or handed over by ``kubectl edit``) ends its term at once, not at the renew deadline;
* a replica that has written the Lease and finds it rewritten under its own name by another
  writer (two replicas given one ``identity``) treats it as held by another: it ends its term
  and takes the Lease only once it lapses, so the two never lead together past one round;
* the leader renews every ``retryPeriodSeconds``; when it could not for ``renewDeadlineSeconds``
  (shorter than the lease) it ends its term, so its drivers stop before a standby's can start.
  A renewal counts from when its write was sent (the server may commit it long before its
  answer arrives), and a watchdog ends the term on time while a call to the API hangs;
* writes carry the record's resourceVersion: of two replicas racing for the Lease, one wins;
* on a clean shutdown the leader releases the Lease, and a standby takes it within one retry.

A term's drivers are built fresh (:class:`Terms`): a stopped controller's threads cannot be
started again, and a new term rebuilds its state from the cluster, as a restart does. Built
with ``KubernetesApi.fenced(terms.in_term())``, their writes are refused from the moment the
term ends, before their stop() returns: a pass under way when the Lease is lost (a reclaim
deleting pod after pod) makes no deletion, patch or Event after that.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import msgspec

from scheduler.config import LeaderElectionSettings
from scheduler.errors import KubernetesApiError

log = logging.getLogger(__name__)

# Writes of this replica remembered: those whose answers were lost must not pass for another's.
_STAMPS_KEPT = 16
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class LeaseApi(Protocol):
    """The calls leader election makes (implemented by scheduler.cluster.api.KubernetesApi)."""

    def get_lease(self, *, namespace: str, name: str) -> bytes | None: ...

    def write_lease(self, *, namespace: str, lease: dict[str, Any]) -> bytes: ...


class Driver(Protocol):
    """A live driver that runs during a term of leadership."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


# ------------------------------------------------------------------ the Lease record


class _LeaseSpec(msgspec.Struct, frozen=True):
    holderIdentity: str | None = None
    leaseDurationSeconds: int | None = None
    acquireTime: str | None = None
    renewTime: str | None = None
    leaseTransitions: int | None = None


class _LeaseMeta(msgspec.Struct, frozen=True):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""


class _Lease(msgspec.Struct, frozen=True):
    metadata: _LeaseMeta = _LeaseMeta()
    spec: _LeaseSpec = _LeaseSpec()


_LEASE_DECODER = msgspec.json.Decoder(_Lease)


@dataclass(frozen=True)
class LeaseRecord:
    """What the Lease says, as read."""

    holder: str  # "" when released
    lease_duration_seconds: int
    acquire_time: str | None
    transitions: int
    resource_version: str
    renew_time: str | None = None  # as written: tells this replica's writes from another's


def parse_lease(raw: bytes) -> LeaseRecord:
    lease = _LEASE_DECODER.decode(raw)
    spec = lease.spec
    return LeaseRecord(
        holder=spec.holderIdentity or "",
        lease_duration_seconds=spec.leaseDurationSeconds or 0,
        acquire_time=spec.acquireTime,
        transitions=spec.leaseTransitions or 0,
        resource_version=lease.metadata.resourceVersion,
        renew_time=spec.renewTime,
    )


def may_take(
    record: LeaseRecord | None,
    *,
    identity: str,
    observed_at: float,
    now: float,
    named_by_another: bool = False,
    least_duration_seconds: float = 0,
) -> bool:
    """Whether ``identity`` may write itself into the Lease now: it does not exist, nobody holds
    it, ``identity`` holds it, or it went unrenewed for its duration since ``observed_at`` (the
    local monotonic time the record was last seen to change). ``named_by_another``: the record
    names ``identity`` but another replica wrote it: held by another. ``least_duration_seconds``:
    the shortest wait this replica accepts, whatever the record says (a duration edited to 0 by
    hand would otherwise let it take a living leader's Lease at once)."""
    if record is None or not record.holder or (record.holder == identity and not named_by_another):
        return True
    return now >= observed_at + max(record.lease_duration_seconds, least_duration_seconds)


def lease_body(
    record: LeaseRecord | None,
    *,
    name: str,
    namespace: str,
    identity: str,
    lease_duration_seconds: int,
    now: datetime,
    release: bool = False,
) -> dict[str, Any]:
    """The Lease ``identity`` writes to take or renew it (or, ``release``, to give it up): the
    acquire time and transition count carry over while the holder stays the same."""
    stamp = micro_time(now)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if record is not None:
        metadata["resourceVersion"] = record.resource_version
    keeps = record is not None and record.holder == identity
    transitions = record.transitions if record is not None else 0
    if record is not None and not keeps and not release:
        transitions += 1
    spec: dict[str, Any] = {
        "holderIdentity": "" if release else identity,
        # Released: a standby may take it at once (client-go writes 1 s as well).
        "leaseDurationSeconds": 1 if release else lease_duration_seconds,
        "acquireTime": record.acquire_time if keeps and record is not None and record.acquire_time else stamp,
        "renewTime": stamp,
        "leaseTransitions": transitions,
    }
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


def micro_time(moment: datetime) -> str:
    """A metav1.MicroTime: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _moment(stamp: str | None) -> datetime | None:
    """A MicroTime as a moment; None when absent or unreadable."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
    except ValueError:
        return None


def default_identity() -> str:
    """The host name: in a pod its name, unique per replica and kept across container restarts."""
    return socket.gethostname()


def default_namespace() -> str:
    """The pod's namespace (its service account's), else ``default``."""
    try:
        return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


# ------------------------------------------------------------------ the elector


class LeaderElector:
    """Campaigns for the Lease in a thread of its own; ``on_started`` and ``on_stopped`` run in
    that thread at the start and end of each term."""

    def __init__(
        self,
        *,
        api: LeaseApi,
        settings: LeaderElectionSettings,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
        on_change: Callable[[bool], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self._api = api
        self._settings = settings
        self.identity = settings.identity or default_identity()
        self.namespace = settings.namespace or default_namespace()
        self.name = settings.lease_name
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._on_change = on_change
        self._monotonic = monotonic
        self._wall = wall
        self._stop = threading.Event()
        self._record: LeaseRecord | None = None
        self._observed_at = 0.0
        self._renewed_at = 0.0  # when the latest write that renewed the Lease was sent
        # Term changes (started by a round, ended by a round, the deadline's watchdog or stop).
        self._term_lock = threading.RLock()
        self._failing = False  # the API has failed since the last success: said once, not every retry
        # The renewTime stamps of this replica's latest writes (answered or not): a record naming
        # this identity with another stamp was written by another replica of the same identity.
        self._stamps: deque[datetime] = deque(maxlen=_STAMPS_KEPT)
        self._twin_warned = False
        self.leading = False
        self.holder = ""  # as last read: who leads now
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._watchdog = threading.Thread(target=self._watch_deadline, name="leader-election-deadline", daemon=True)

    def start(self) -> None:
        log.info(
            "campaigning for the controllers' Lease",
            extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity},
        )
        self._thread.start()
        self._watchdog.start()

    def stop(self) -> None:
        """End the term, if any, and release the Lease so that a standby takes over at once."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._settings.retry_period_seconds + self._request_margin())
        with self._term_lock:
            if self.leading:
                self._end_term("shutting down")
                self._release()

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        period = self._settings.retry_period_seconds
        while not self._stop.is_set():
            try:
                self.campaign_once()
            except Exception:  # a defect must not end leader election (the drivers would stay as they are)
                if not self._failing:
                    self._failing = True
                    log.exception("leader election failed; retrying")
            self._stop.wait(period)

    def campaign_once(self) -> None:
        """One round: take or renew the Lease if it may be, and begin or end the term."""
        renewed_at = self._try_acquire_or_renew()
        with self._term_lock:
            if renewed_at is not None:
                self._renewed_at = max(self._renewed_at, renewed_at)
            if renewed_at is not None and self._stop.is_set():
                # Answered after shutdown ended the term: no new term in a process going away,
                # and the Lease it renewed goes back so that a standby takes it at once.
                self._release()
                return
            # A write answered past the deadline renewed nothing safe: a standby may be about to
            # take the Lease (it counts from the commit, at most from when the write was sent).
            if renewed_at is not None and not self._overdue():
                if not self.leading:
                    self._begin_term()
            else:
                self._end_term_if_overdue()

    def _begin_term(self) -> None:
        """Under the term lock. Controllers that fail to start end the term at once: a leader
        renewing the Lease with none running would keep every replica's controllers off. The
        next round, still holding the Lease, begins it again."""
        self.leading = True
        log.info("leading: starting the controllers", extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity})
        self._changed(True)
        try:
            self._on_started()
        except Exception:  # noqa: BLE001 - any failure: the term cannot run as it is
            log.exception("the controllers did not start; trying again at the next round")
            self._end_term("the controllers did not start")

    def _watch_deadline(self) -> None:
        """Ends the term at the renew deadline while a round is stuck in a call to the API (a
        black-holed connection holds it for the client's timeout and retries, past the lease).
        It looks often enough to end the term in the first half of the margin between the
        deadline and the lease, however narrow the settings make it."""
        settings = self._settings
        period = min(settings.retry_period_seconds / 4, (settings.lease_duration_seconds - settings.renew_deadline_seconds) / 2)
        while not self._stop.wait(period):
            try:
                self._end_term_if_overdue()
            except Exception:  # the term ended all the same; this thread must outlive it
                log.exception("ending the term at the renew deadline failed")

    def _overdue(self) -> bool:
        return self._monotonic() - self._renewed_at > self._settings.renew_deadline_seconds

    def _end_term_if_overdue(self) -> None:
        with self._term_lock:
            if self.leading and self._overdue():
                self._end_term(f"could not renew the Lease for {self._settings.renew_deadline_seconds:g}s")

    def _try_acquire_or_renew(self) -> float | None:
        """When the write that took or renewed the Lease was sent (monotonic); None when it
        was not written."""
        try:
            raw = self._api.get_lease(namespace=self.namespace, name=self.name)
            record = parse_lease(raw) if raw is not None else None
            now = self._monotonic()
            deciding = self._observe(record, now=now)
            self.holder = deciding.holder if deciding is not None else ""
            twin = self._written_by_twin(record)
            if twin:
                self._twin_wrote()
            if not may_take(deciding, identity=self.identity, observed_at=self._observed_at, now=now, named_by_another=twin,
                            least_duration_seconds=self._settings.lease_duration_seconds):
                self._recovered()
                if deciding is not None and deciding.holder != self.identity:
                    self._taken_by(deciding.holder)
                return None
            body = lease_body(
                record, name=self.name, namespace=self.namespace, identity=self.identity,
                lease_duration_seconds=self._settings.lease_duration_seconds, now=self._wall(),
            )
            self._stamps.append(_moment(body["spec"]["renewTime"]) or self._wall())
            sent_at = self._monotonic()
            written = parse_lease(self._api.write_lease(namespace=self.namespace, lease=body))
        except KubernetesApiError as error:
            if error.status == 409:  # another replica wrote first: read again next round
                return None
            if not self._failing:
                self._failing = True
                log.warning("the controllers' Lease is unreachable; retrying", extra={"reason": str(error)})
            return None
        self._recovered()
        self._record, self._observed_at = written, self._monotonic()
        self.holder = written.holder
        return sent_at

    def _observe(self, record: LeaseRecord | None, *, now: float) -> LeaseRecord | None:
        """The record this round decides on, and when it was seen to change. A Lease deleted
        while another replica held it (``kubectl delete lease``) is waited for as if it were
        still there: its holder may be alive and recreate it at its next round."""
        previous = self._record
        if record is None and previous is not None and previous.holder and previous.holder != self.identity:
            return previous
        if record is None or previous is None or record.resource_version != previous.resource_version:
            self._record, self._observed_at = record, now
        return record

    def _taken_by(self, holder: str) -> None:
        """The Lease names another holder (written by a replica that saw it lapse, or by hand):
        that one leads or is about to, so this term ends now, not at the renew deadline."""
        with self._term_lock:
            if self.leading:
                self._end_term(f"the Lease names {holder} as its holder")

    def _written_by_twin(self, record: LeaseRecord | None) -> bool:
        """Whether ``record`` names this identity but another replica wrote it. A replica that
        has not written yet cannot tell: it takes the Lease as its own (a restarted container)."""
        if record is None or record.holder != self.identity or not self._stamps:
            return False
        # Compared as moments, not strings: a server writing MicroTime its own way is no twin.
        written = _moment(record.renew_time)
        return written is not None and written not in self._stamps

    def _twin_wrote(self) -> None:
        """Another replica renews the Lease under this identity: it leads, this one stands by."""
        if not self._twin_warned:
            self._twin_warned = True
            log.error(
                "another replica writes the controllers' Lease under this replica's identity; standing by "
                "(give each replica its own leaderElection.identity)",
                extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity},
            )
        with self._term_lock:
            if self.leading:
                self._end_term("another replica holds the Lease under this identity")

    def _end_term(self, why: str) -> None:
        """Under the term lock."""
        self.leading = False
        log.warning("no longer leading: stopping the controllers", extra={"reason": why, "identity": self.identity})
        self._changed(False)
        self._on_stopped()

    def _release(self) -> None:
        if self._record is None or self._record.holder != self.identity:
            return
        body = lease_body(
            self._record, name=self.name, namespace=self.namespace, identity=self.identity,
            lease_duration_seconds=self._settings.lease_duration_seconds, now=self._wall(), release=True,
        )
        try:
            self._api.write_lease(namespace=self.namespace, lease=body)
            log.info("released the controllers' Lease", extra={"identity": self.identity})
        except KubernetesApiError as error:  # the standby then waits for the lease to lapse
            log.warning("could not release the controllers' Lease", extra={"reason": str(error)})

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            log.info("the controllers' Lease is reachable again")

    def _changed(self, leading: bool) -> None:
        if self._on_change is not None:
            self._on_change(leading)

    def _request_margin(self) -> float:
        return 15.0  # one API call in flight may take the client's timeout


# ------------------------------------------------------------------ terms


class Terms:
    """The drivers of each term of leadership, built by ``build`` when the term starts and
    stopped (last built, first stopped) when it ends. Without leader election there is one term,
    from start to shutdown."""

    def __init__(self, build: Callable[[], Sequence[Driver]]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._drivers: Sequence[Driver] = ()
        self.started = 0  # terms begun in this process
        self._open: int | None = None  # the number of the term under way (or being built)

    def begin(self) -> None:
        with self._lock:
            if self._drivers:
                return
            term = self.started + 1
            self._open = term
            try:
                self._drivers = self._build()
            except BaseException:
                self._open = None
                raise
            self.started = term
            for driver in self._drivers:
                driver.start()

    def end(self) -> None:
        # Closed first, without the lock: the drivers' writes stop now, not once each has stopped.
        self._open = None
        with self._lock:
            drivers, self._drivers = self._drivers, ()
            for driver in reversed(drivers):
                try:
                    driver.stop()
                except Exception:  # noqa: BLE001 - the others must stop all the same
                    log.exception("a controller did not stop cleanly", extra={"driver": type(driver).__name__})

    def in_term(self) -> Callable[[], bool]:
        """Whether the term under way now (called from ``build``: the term being built) lasts
        yet; false for good once it ends, whatever term comes next. Drivers' writes are checked
        against it (``KubernetesApi.fenced``)."""
        term = self._open
        return lambda: term is not None and self._open == term

    @property
    def drivers(self) -> Sequence[Driver]:
        return self._drivers

