"""The cell exchange's controller, on the leader: CellOffer and CellRequest objects in, matches,
statuses, Events and preemptions out.

Each round (on every change of the objects, their Namespaces or the ledger; at every window edge
and grace end; at least every ``exchange.resyncSeconds``):

1. the ledger ConfigMap is read from the API server (not the watch, which may lag this
   replica's own last write: an offer is matched once);
2. ``board.exchange_round`` validates what is not matched yet, matches the open offers and
   requests (Algorithm 2, the ledger's surplus, the quota proof over the exchanges not over)
   and gives each object's status;
3. new matches are written to the ledger first, in one write that fails if another came in
   between (the round is then run again): a match is durable before anyone is told of it, and
   keyed by the match, so a restart never counts it twice; ``quotas`` takes the write at once;
4. each object whose status differs gets it (``/status``), with an Event when its phase
   changes (``Invalid`` and ``Expired`` as warnings, naming the field);
5. guaranteed pods still on cells that changed hands when a grace period ends are preempted
   (``preemption.due_preemptions``): deleted with their own grace period, an Event on each;
6. when the quotas moved (a window opened or ended) and when the preempted pods have left the
   engine, kube-scheduler is made to retry the pods it parked (the nudge's requeue signal,
   scheduler/cluster/nudge.py): a pod a VC's quota or a busy cell kept out was parked as
   unschedulable, and nothing else in the cluster would make kube-scheduler try it again before
   its 5-minute flush. (Retried on the deletion alone, it may reach cellfit's filter before
   cellfit's own watch has seen the deletion, and be parked again.)

Nothing here keeps a copy of pods or cells: the engine's views of the VCs involved are read
under the engine lock; the round itself (matching, quota proofs) runs outside it, on those views
and the topology (fixed for the engine's life), so the verbs never wait for it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Sequence

from scheduler.cells.capabilities import CellInspection
from scheduler.cells.exchange import CellCatalog, Posting, draining_pods, due_preemptions, exchange_round, ledger
from scheduler.cells.exchange.board import Outcome
from scheduler.cells.exchange.charges import charged, settle
from scheduler.cells.exchange.ledger import Entry
from scheduler.cells.exchange.preemption import BORROWER_HORIZON_SECONDS, carried_at_end
from scheduler.cells.topology import Topology
from scheduler.cluster.api import KubernetesApi
from scheduler.cluster.cache import path_reflector
from scheduler.cluster.disruption import Preempted, preempt_pod
from scheduler.cluster.exchange.definitions import ExchangeDefinitions
from scheduler.cluster.exchange.objects import (
    CELL_OBJECT_DECODER,
    CONFIG_MAP_DECODER,
    NAMESPACE_DECODER,
    NAMESPACES_PATH,
    CellObject,
    ConfigMap,
    collection_path,
    config_maps_path,
    status_path,
)
from scheduler.cluster.exchange.quotas import ExchangeQuotas
from scheduler.cluster.nudge import send_signal
from scheduler.config import ExchangeSettings
from scheduler.constants import EXCHANGE_API_VERSION, KIND_CELL_OFFER, KIND_CELL_REQUEST, REQUEUE_SIGNAL_IMAGE
from scheduler.errors import CellfitError, KubernetesApiError
from scheduler.kube.times import timestamp

log = logging.getLogger(__name__)

# Short enough that a burst of postings is one round.
DEBOUNCE_SECONDS = 0.5
# A pod deleted for the exchange is not deleted again while it terminates.
_PREEMPTED_MEMORY_SECONDS = 600.0
_WARNINGS = frozenset({"Invalid", "Expired"})
# A ledger write refused for another reason than a conflict is retried after this, doubling up to
# the most (the ConfigMap full: no hot loop).
_FIRST_BACKOFF_SECONDS = 1.0
_MAX_BACKOFF_SECONDS = 60.0
# A ConfigMap holds 1 MiB; past three quarters of it the log says so.
_CONFIG_MAP_BYTES = 1 << 20
_LEDGER_WARN_BYTES = _CONFIG_MAP_BYTES * 3 // 4


def _size(data: Mapping[str, str]) -> int:
    return sum(len(k) + len(v.encode("utf-8")) for k, v in data.items())


@dataclass
class LastRound:
    at: float = 0.0
    seconds: float = 0.0
    matched: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    board: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    unrecorded: list[str] = field(default_factory=list)  # objects of matches the ledger refused


class _Store:
    """One kind's objects as the watch delivers them, by UID."""

    def __init__(self, on_change: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, Any] = {}
        self._on_change = on_change

    def replace(self, items: Sequence[Any]) -> None:
        with self._lock:
            self._objects = {item.metadata.uid or item.metadata.name: item for item in items}
        self._on_change()

    def apply(self, item: Any) -> None:
        with self._lock:
            self._objects[item.metadata.uid or item.metadata.name] = item
        self._on_change()

    def delete(self, item: Any) -> None:
        with self._lock:
            self._objects.pop(item.metadata.uid or item.metadata.name, None)
        self._on_change()

    def items(self) -> list[Any]:
        with self._lock:
            return list(self._objects.values())


class ExchangeController:
    def __init__(
        self,
        *,
        api: KubernetesApi,
        quotas: ExchangeQuotas,
        engine: CellInspection,
        lock: threading.RLock,
        settings: ExchangeSettings,
        clock: Callable[[], float] = time.time,
        on_preempt: Callable[[str], None] | None = None,
        signal_image: str = REQUEUE_SIGNAL_IMAGE,
    ) -> None:
        self._api = api
        self._signal_image = signal_image
        self._quotas = quotas
        self._engine = engine
        self._lock = lock
        self._settings = settings
        self._clock = clock
        self._on_preempt = on_preempt
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._told: dict[str, str] = {}  # object UID -> the last phase an Event announced
        self._preempted: dict[str, float] = {}  # pod UID -> when it was deleted
        self._leaving: set[str] = set()  # pods preempted that the engine still holds
        self._seen_applied = quotas.applied  # the quota moves as of the last round
        self.requeue_signals = 0
        self._backoff = _FIRST_BACKOFF_SECONDS
        self._retry_at: float | None = None  # when a refused ledger write is tried again
        self._unread: list[str] = []  # the ledger's entries that did not read, as last logged
        self._held: list[str] = []  # the objects held, as last logged
        self.last = LastRound()
        self._stores = {kind: _Store(self._wake.set) for kind in ("offer", "request", "namespace")}
        # Without the CRDs (cellfit serve outside the chart) the exchange waits for them, told once.
        self.definitions = ExchangeDefinitions(resources=("celloffers", "cellrequests"))
        self._reflectors = [
            path_reflector(api, collection_path(kind), CELL_OBJECT_DECODER, name=resource,
                           replace=self.definitions.listed(resource, self._stores[kind].replace), apply=self._stores[kind].apply,
                           delete=self._stores[kind].delete, told=self.definitions.told(resource))
            for kind, resource in (("offer", "celloffers"), ("request", "cellrequests"))
        ] + [
            path_reflector(api, NAMESPACES_PATH, NAMESPACE_DECODER, name="namespaces",
                           replace=self._stores["namespace"].replace, apply=self._stores["namespace"].apply,
                           delete=self._stores["namespace"].delete),
        ]
        quotas.subscribe(self._wake.set)
        self._worker = threading.Thread(target=self._run, name="cell-exchange", daemon=True)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for reflector in self._reflectors:
            reflector.start()
        self._worker.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for reflector in self._reflectors:
            reflector.stop()

    @property
    def synced(self) -> bool:
        return self._quotas.synced and all(r.synced.is_set() for r in self._reflectors)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=self._next_wait())
            if self._stop.is_set():
                return
            time.sleep(DEBOUNCE_SECONDS)
            self._wake.clear()
            try:
                if self.synced:
                    self.reconcile()
            except Exception:  # a defect must not end the exchange
                log.exception("cell exchange round failed")

    def _next_wait(self) -> float:
        if self._leaving:
            return 1.0  # the preempted pods' deletion reaches the engine through the watch
        now = self._clock()
        edge = ledger.next_edge(self._quotas.entries, now=now, grace_seconds=self._settings.return_grace_seconds)
        wait = self._settings.resync_seconds
        if self._retry_at is not None:
            wait = min(wait, max(self._retry_at - now - DEBOUNCE_SECONDS, 0.0) + 0.05)
        return wait if edge is None else min(wait, max(edge - now - DEBOUNCE_SECONDS, 0.0) + 0.05)

    # ------------------------------------------------------------------ one round

    def reconcile(self) -> None:
        started = time.perf_counter()
        # The quotas as of now (the quota thread may not have reached this edge yet).
        self._quotas.apply()
        moved = self._quotas.applied != self._seen_applied
        self._seen_applied = self._quotas.applied
        now = self._clock()
        config_map, entries, unread, settled = self._read_ledger()
        postings = {kind: [self._posting(kind, obj) for obj in self._stores[kind].items() if not obj.metadata.deletionTimestamp]
                    for kind in ("offer", "request")}
        namespaces = {ns.metadata.name: dict(ns.metadata.labels or {}) for ns in self._stores["namespace"].items()}
        base = self._quotas.base.virtual_clusters
        # Only the VCs of exchanges not long over: each view walks every booking, under the lock.
        grace = self._settings.return_grace_seconds or 0.0
        involved = {vc for e in entries if e.window.end + grace + BORROWER_HORIZON_SECONDS > now for vc in (e.lender, e.borrower)}
        with self._lock:
            views = {vc: self._engine.inspect_virtual_cluster(vc) or {} for vc in sorted(involved & set(base))}
            topology = self._engine.topology  # fixed for the engine's life: reconfigure refuses a new one
        # The matching and its quota proofs run outside the lock: the verbs wait for nothing of it.
        result = exchange_round(
            offers=postings["offer"], requests=postings["request"], namespaces=namespaces, base=base,
            catalog=CellCatalog(topology.config.cell_types), topology=topology,
            entries=entries, now=now, grace_seconds=self._settings.return_grace_seconds, draining=draining_pods(views),
            settled=settled, not_applied=self._quotas.not_applied, unread=unread,
        )
        if result.problems:
            log.error("cell exchange objects not judged (each is Invalid, saying why)", extra={"problems": result.problems[:10]})
        if result.held != self._held:  # each set once
            if result.held:
                log.warning("cell exchange objects held, matched to nobody: the ledger does not say their match (each status says why)",
                            extra={"held": result.held[:10]})
            self._held = result.held
        posted = {p.id for kind in ("offer", "request") for p in postings[kind]}
        counted = {e.key for e in charged(entries=entries, topology=topology, base=base, now=now)}
        folded, settled = ledger.fold(entries, settled, now=now, objects=posted, after_seconds=grace + BORROWER_HORIZON_SECONDS,
                                      charged=counted)
        # The charge of each match just over, decided once (a later file never changes it).
        decided = settle(entries=entries, topology=topology, base=base, now=now)
        recorded = entries
        # A new match whose key holds a value that does not read (an operator's edit, an entry of
        # an older format) is not written over it: it waits, told to nobody, until that is fixed.
        taken = set((config_map.data or {}) if config_map is not None else {})
        new_entries = [e for e in result.new_entries if e.key not in taken]
        unrecorded = {object_id for e in result.new_entries if e.key in taken for object_id in (e.offer, e.request)}
        if not (new_entries or folded or decided):
            self._retry_at, self._backoff = None, _FIRST_BACKOFF_SECONDS  # nothing waits to be written
        else:
            backing_off = self._retry_at is not None and now < self._retry_at  # a round woken early tries no write
            written = "failed" if backing_off else self._record(config_map, new_entries, folded, settled, decided)
            if written == "conflict":
                self._wake.set()  # another write came in between: decide again on what it holds
                return
            if written == "failed":
                # Told to nobody and preempted for by nobody until recorded; the rest goes on.
                unrecorded |= {object_id for e in new_entries for object_id in (e.offer, e.request)}
                if not backing_off:
                    self._retry_at = now + self._backoff
                    self._backoff = min(self._backoff * 2, _MAX_BACKOFF_SECONDS)
            else:
                self._retry_at, self._backoff = None, _FIRST_BACKOFF_SECONDS
                recorded = [*entries, *new_entries]
                self._quotas.apply()
                if folded:
                    log.info("exchange ledger entries folded into the settled totals", extra={"entries": len(folded)})
                rebuilt = {e.key for e in result.rebuilt}
                for entry in new_entries:
                    if entry.key in rebuilt:
                        log.warning("exchange match missing from the ledger rebuilt from its objects' statuses (the ledger was "
                                    "lost or emptied: its settled totals and the matches of deleted objects are not recoverable)",
                                    extra={"offer": entry.offer, "request": entry.request, "lender": entry.lender,
                                           "borrower": entry.borrower, "gpu_hours": round(entry.gpu_hours, 3)})
                        continue
                    log.info("cells exchanged", extra={"offer": entry.offer, "request": entry.request, "lender": entry.lender,
                                                       "borrower": entry.borrower, "gpu_hours": round(entry.gpu_hours, 3),
                                                       "explanation": entry.explanation})
        watched = {(kind, obj.metadata.namespace, obj.metadata.name): obj for kind in ("offer", "request")
                   for obj in self._stores[kind].items()}
        for outcome in result.outcomes:
            posting = outcome.posting
            if posting.id in unrecorded:
                continue
            current = watched.get((posting.kind, posting.namespace, posting.name))
            if current is not None:
                try:
                    self._report(outcome, current)
                except Exception:  # one object's status must not stop the others' or the preemptions
                    log.exception("exchange status not reported", extra={"object": posting.id})
        held = {str(p.get("uid")) for view in views.values() for p in view.get("placements") or []}
        left = self._leaving - held
        self._leaving -= left
        if moved or left:
            self._requeue("quotas moved" if moved else "preempted pods gone")
        preempted = self._preempt(self._in_effect(recorded, now, topology), now, views)
        self.last = LastRound(
            at=now, seconds=time.perf_counter() - started,
            matched=[f"{e.offer} -> {e.request}" for e in result.new_entries if e.offer not in unrecorded],
            refused=[f"{r.offer.id} for {r.request.id}: {r.reason}" for r in result.refused], preempted=preempted,
            board={kind + "s": [{"object": o.posting.id, "phase": o.phase, "message": o.message}
                                for o in result.outcomes if o.posting.kind == kind and o.posting.id not in unrecorded]
                   for kind in ("offer", "request")},
            unrecorded=sorted(unrecorded),
        )

    def _posting(self, kind: str, obj: CellObject) -> Posting:
        # creationTimestamp is whole seconds: ties between offers posted in the same second go
        # to the name, the same after a restart.
        return Posting(kind=kind, obj=obj.as_posted(), posted=timestamp(obj.metadata.creationTimestamp) or self._clock())  # type: ignore[arg-type]

    # ------------------------------------------------------------------ the ledger

    def _ledger_path(self) -> str:
        return f"{config_maps_path(self._quotas.namespace)}/{self._settings.ledger_name}"

    def _read_ledger(self) -> tuple[ConfigMap | None, list[Entry], list[ledger.Unread], ledger.Settled]:
        raw = self._api.get_path(self._ledger_path())
        config_map = CONFIG_MAP_DECODER.decode(raw) if raw is not None else None
        data = config_map.data if config_map is not None else None
        entries, unread = ledger.read_all(data)
        problems = [u.problem for u in unread]
        if problems != self._unread:  # each set once: the replicas' quotas name them too (inspect)
            if problems:
                log.error("exchange ledger entries that do not read: what they name is held, matched to nobody, until they are "
                          "fixed or deleted (never overwritten)", extra={"ledger": self._settings.ledger_name, "problems": problems[:10]})
            self._unread = problems
        settled, problems = ledger.read_settled(data)
        if problems:  # never overwrite totals that do not read: an operator's to fix
            raise KubernetesApiError(f"exchange ledger {self._settings.ledger_name}: " + "; ".join(problems))
        return config_map, entries, unread, settled

    def _record(
        self, config_map: ConfigMap | None, new: list[Entry], folded: list[Entry], settled: ledger.Settled, decided: list[Entry]
    ) -> Literal["written", "conflict", "failed"]:
        """The new entries added, the ``decided`` ones rewritten with their charge and the folded
        ones moved into ``settled``, in one write that fails (``conflict``) if the ledger changed
        since it was read; ``failed`` on any other error (the ConfigMap full, the API server
        down): retried after a back-off."""
        data = {**((config_map.data or {}) if config_map is not None else {}),
                **{e.key: ledger.encode(e) for e in (*new, *decided)}}
        for entry in folded:
            data.pop(entry.key, None)
        if settled:
            data[ledger.SETTLED_KEY] = ledger.encode_settled(settled)
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "ConfigMap", "data": data,
            "metadata": {"name": self._settings.ledger_name, "namespace": self._quotas.namespace,
                         "labels": {"app.kubernetes.io/name": "cellfit", "app.kubernetes.io/component": "cell-exchange"}},
        }
        try:
            if config_map is None:
                written = self._api.write_path("POST", config_maps_path(self._quotas.namespace), body)
            else:
                body["metadata"]["resourceVersion"] = config_map.metadata.resourceVersion
                body["metadata"]["labels"] = {**(config_map.metadata.labels or {}), **body["metadata"]["labels"]}
                written = self._api.write_path("PUT", self._ledger_path(), body)
        except KubernetesApiError as error:
            if error.status == 409:
                log.info("exchange ledger changed meanwhile; deciding again", extra={"ledger": self._settings.ledger_name})
                return "conflict"
            log.warning("exchange ledger not written; the new matches wait, retried after a back-off",
                        extra={"reason": str(error), "retry_in_seconds": self._backoff, "bytes": _size(data)})
            return "failed"
        self._quotas.observe(CONFIG_MAP_DECODER.decode(written))
        size = _size(data)
        if size > _LEDGER_WARN_BYTES:
            log.warning("exchange ledger nearly full", extra={"bytes": size, "limit": _CONFIG_MAP_BYTES})
        return "written"

    # ------------------------------------------------------------------ telling

    def _report(self, outcome: Outcome, current: CellObject) -> None:
        posting = outcome.posting
        uid = current.metadata.uid
        observed = current.status if isinstance(current.status, dict) else {}
        wanted = {k: v for k, v in outcome.status.items() if v is not None}
        if observed != wanted:
            try:
                self._api.write_path("PATCH", status_path(posting.kind, posting.namespace, posting.name), {"status": outcome.status},
                                     content_type="application/merge-patch+json")
            except KubernetesApiError as error:
                if error.status != 404:  # deleted meanwhile: nothing to tell
                    log.warning("exchange status not written", extra={"object": posting.id, "reason": str(error)})
                return
        told = self._told.get(uid, observed.get("phase"))
        if told != outcome.phase:
            self._told[uid] = outcome.phase
            self._event(posting, uid, outcome.phase, outcome.message, warning=outcome.phase in _WARNINGS)

    def _event(self, posting: Posting, uid: str, reason: str, message: str, *, warning: bool) -> None:
        try:
            self._api.create_event(namespace=posting.namespace, pod_name=posting.name, pod_uid=uid, reason=reason, message=message,
                                   warning=warning, kind=KIND_CELL_OFFER if posting.kind == "offer" else KIND_CELL_REQUEST,
                                   api_version=EXCHANGE_API_VERSION)
        except CellfitError as error:
            log.warning("exchange event not written", extra={"object": posting.id, "reason": str(error)})

    # ------------------------------------------------------------------ preemption

    def _in_effect(self, entries: list[Entry], now: float, topology: Topology) -> list[Entry]:
        """The exchanges whose drains are theirs to cut short: one under way whose quota move this
        engine carries, one over that was carried as it ended. An exchange the configured VCs
        cannot carry moved no cell; the drains of the VCs it names are another cause's (a file that
        cut them), which the exchange must not turn into preemptions."""
        grace = self._settings.return_grace_seconds
        if grace is None:
            return []  # nothing is preempted: every drain is a pure drain
        base = self._quotas.base.virtual_clusters
        applied = self._quotas.applied

        def returned_lately(entry: Entry) -> bool:  # the borrower's side is looked at, and only then proved
            return entry.window.end + grace <= now < entry.window.end + grace + BORROWER_HORIZON_SECONDS

        return [e for e in entries if (e.key in applied if e.window.holds(now) else
                                       returned_lately(e) and carried_at_end(entry=e, entries=entries, topology=topology, base=base))]

    def _preempt(self, entries: list[Entry], now: float, views: Mapping[str, Mapping[str, Any]]) -> list[str]:
        self._preempted = {uid: at for uid, at in self._preempted.items() if now - at < _PREEMPTED_MEMORY_SECONDS}
        done: list[str] = []
        for due in due_preemptions(entries=entries, now=now, grace_seconds=self._settings.return_grace_seconds, views=views):
            if due.uid is None or due.uid in self._preempted:
                continue
            namespace, _, name = due.pod.partition("/")
            try:
                preempted = preempt_pod(self._api, namespace=namespace, name=name, uid=due.uid, message=due.reason, now=now)
            except CellfitError as error:
                log.warning("exchange preemption failed", extra={"pod": due.pod, "reason": str(error)})
                continue
            if preempted is not Preempted.DELETED:  # it freed nothing now: not told preempted
                log.warning("exchange preemption failed", extra={"pod": due.pod, "reason": preempted.value})
                continue
            self._preempted[due.uid] = now
            self._leaving.add(due.uid)
            done.append(due.pod)
            if self._on_preempt is not None:
                self._on_preempt(due.vc)
            log.info("pod preempted for a cell exchange", extra={"pod": due.pod, "vc": due.vc, "cell": due.cell, "reason": due.reason})
            try:
                self._api.create_event(namespace=namespace, pod_name=name, pod_uid=due.uid, reason="Preempted",
                                       message=due.reason, warning=True)
            except CellfitError as error:
                log.warning("exchange event not written", extra={"pod": due.pod, "reason": str(error)})
        return done

    def _requeue(self, why: str) -> None:
        try:
            send_signal(self._api, namespace=self._quotas.namespace, image=self._signal_image)
        except CellfitError as error:
            log.warning("requeue signal not sent", extra={"reason": str(error)})
            return
        self.requeue_signals += 1
        log.info("requeue signal sent: kube-scheduler retries its parked pods", extra={"why": why})

    def inspect(self) -> dict[str, Any]:
        last = self.last
        waiting = self.definitions.waiting
        return {
            "synced": self.synced,
            **({"waiting": waiting} if waiting is not None else {}),
            "lastRound": {"at": last.at, "seconds": round(last.seconds, 6), "matched": last.matched, "refused": last.refused,
                          "preempted": last.preempted, "unrecorded": last.unrecorded},
            "board": last.board,
            "requeueSignals": self.requeue_signals,
        }

