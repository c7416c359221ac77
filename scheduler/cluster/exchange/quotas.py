"""The exchange's quota moves, on every replica: each one's engine serves its own kube-scheduler,
so each follows the ledger (one ConfigMap, watched) and, at every window edge, hands its HiveD
engine the configured VCs with the exchanges under way applied (``quota.project``) through
``HivedEngine.reconfigure``, the path of a live configuration reload. A reload of the file goes
through :meth:`ExchangeQuotas.reconfigure_base`, so that the exchanges under way are applied
on top of the new VCs (and a file that leaves one of the exchanges not over impossible, under
way or matched for later, is refused, naming it). A replica started on such a file applies the
exchanges it can carry and shows the others (``inspect``: ``notApplied``, ``applyProblem``).

The leader's controller writes the ledger; this only reads it (and takes the controller's write
at once, without waiting for the watch to bring it back).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from scheduler.cells import CellsConfig
from scheduler.cells.capabilities import CellReconfiguration
from scheduler.cells.exchange import applicable, ledger, reconfiguration, schedule_problems
from scheduler.cells.exchange.charges import charged
from scheduler.cells.exchange.ledger import Entry
from scheduler.cells.exchange.resource import rfc3339
from scheduler.cells.feasibility import feasibility_problems
from scheduler.cluster.api import KubernetesApi
from scheduler.cluster.cache import path_reflector
from scheduler.cluster.exchange.objects import CONFIG_MAP_DECODER, ConfigMap, ledger_list_path
from scheduler.config import ExchangeSettings
from scheduler.errors import ConfigError

log = logging.getLogger(__name__)

# How often the quota thread looks whether the ledger's first list is in (it waits on the mark).
_SYNC_POLL_SECONDS = 1.0


class ExchangeQuotas:
    def __init__(
        self,
        *,
        api: KubernetesApi,
        engine: CellReconfiguration,
        lock: threading.RLock,
        base: CellsConfig,
        namespace: str,
        settings: ExchangeSettings,
        clock: Callable[[], float] = time.time,
        on_moved: Callable[[], None] | None = None,
    ) -> None:
        self._engine = engine
        # Told after each move of the quotas at a window's edge (runtime.py: the requeue signal).
        self._on_moved = on_moved
        self._lock = lock
        self._base = base
        self._settings = settings
        self._clock = clock
        self.namespace = namespace
        self._guard = threading.Lock()
        self._entries: list[Entry] = []
        self._settled: ledger.Settled = {}
        self._problems: list[str] = []
        self._applied: frozenset[str] = frozenset()  # keys of the entries under way in the engine now
        self._attempted: frozenset[str] = frozenset()  # keys of the entries under way at the last apply
        self._not_applied: dict[str, str] = {}  # key -> why the configured VCs cannot carry it
        self._apply_problem = ""
        self._listeners: list[Callable[[], None]] = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._caught_up = threading.Event()  # the ledger listed and its quota moves applied once
        self.reflector = path_reflector(
            api, ledger_list_path(namespace, settings.ledger_name), CONFIG_MAP_DECODER,
            name="exchange-ledger", replace=lambda items: self.observe(items[0] if items else None),
            apply=self.observe, delete=lambda _: self.observe(None),
        )
        self._thread = threading.Thread(target=self._run, name="exchange-quotas", daemon=True)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.reflector.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self.reflector.stop()

    @property
    def synced(self) -> bool:
        return self.reflector.synced.is_set()

    def ready(self) -> tuple[bool, str]:
        """Whether this replica's engine has the ledger's exchanges (part of readiness: before,
        it would serve the configured quotas, as if nothing were lent)."""
        if self._caught_up.is_set():
            return True, "exchange ledger applied"
        if not self.synced:
            return False, f"exchange ledger {self._settings.ledger_name} not listed yet"
        return False, "exchange ledger listed, its quota moves not applied yet"

    def subscribe(self, on_change: Callable[[], None]) -> None:
        """``on_change()`` after every new ledger content (the leader's controller wakes on it)."""
        self._listeners.append(on_change)

    # ------------------------------------------------------------------ the ledger

    def observe(self, config_map: ConfigMap | None) -> None:
        """New ledger content (from the watch, or the controller's own write)."""
        data = config_map.data if config_map is not None else None
        entries, problems = ledger.read(data)
        settled, unread = ledger.read_settled(data)
        problems += unread
        with self._guard:
            if problems and problems != self._problems:
                log.warning("exchange ledger entries left out", extra={"ledger": self._settings.ledger_name, "problems": problems[:10]})
            self._entries, self._settled, self._problems = entries, settled, problems
        self._wake.set()
        for listener in self._listeners:
            listener()

    @property
    def entries(self) -> list[Entry]:
        with self._guard:
            return list(self._entries)

    @property
    def settled(self) -> ledger.Settled:
        with self._guard:
            return self._settled

    @property
    def base(self) -> CellsConfig:
        """The configured cells section (the file's), before any exchange."""
        return self._base

    @property
    def not_applied(self) -> dict[str, str]:
        """Entry key -> why the configured VCs cannot carry that exchange under way."""
        return dict(self._not_applied)

    @property
    def applied(self) -> frozenset[str]:
        """The keys of the ledger entries whose quota moves the engine has now."""
        return self._applied

    # ------------------------------------------------------------------ applying

    def apply(self) -> bool:
        """Bring the engine to the exchanges under way now; True when the quotas moved. An
        exchange the configured VCs cannot carry (a file a reload refused for it, read at a
        restart) is left out and shown (``inspect``); the others still apply."""
        with self._lock:
            # The time and the ledger read under the lock: two threads apply (the quota thread and
            # the controller's round, both woken at an edge), and one that read them before the
            # other's apply must not undo it with the older state.
            now = self._clock()
            entries = self.entries
            under_way = sorted(ledger.under_way(entries, now=now), key=lambda e: (e.matched_at, e.key))
            keys = frozenset(e.key for e in under_way)
            if keys == self._attempted or not self._base.virtual_clusters:
                return False
            try:
                applied = self._reconfigure(self._base, under_way, now)
            except ConfigError as error:  # the engine refused what the proof let through
                if str(error) != self._apply_problem:
                    log.error("exchange quotas not applied: the VCs they give are not feasible", extra={"reason": str(error)})
                self._apply_problem = str(error)
                return False
            moved = applied != self._applied
            self._attempted, self._applied = keys, applied
        if moved:
            log.info("exchange quotas applied", extra={
                "under_way": sorted(f"{e.offer} -> {e.request}" for e in entries if e.key in applied),
                "virtual_clusters": self.guarantees()})
            if self._on_moved is not None:
                self._on_moved()
        return moved

    def reconfigure_base(self, base: CellsConfig) -> None:
        """A live reload's new cells section, with the exchanges under way applied on top (the
        caller holds the engine lock). ``ConfigError`` when it leaves one of the exchanges not
        over impossible, now or when its window opens: the engine and the base stay as they were."""
        now = self._clock()
        entries = self.entries
        if base.virtual_clusters:
            matches = [e.match() for e in ledger.not_over(entries, now=now)]
            # New VCs that do not fit the cluster on their own are the admin's edit, whatever is
            # matched: the engine refuses them below in its own words ("over-committed at level
            # ..."), not as exchanges that do not fit, which would send the admin to the CellOffers.
            if matches and not feasibility_problems(self._engine.topology, base.virtual_clusters):
                problems = schedule_problems(topology=self._engine.topology, base=base.virtual_clusters, matches=matches, now=now)
                if problems:
                    raise ConfigError("cells.virtualClusters: the cell exchanges matched do not fit: " + "; ".join(problems))
            under_way = sorted(ledger.under_way(entries, now=now), key=lambda e: (e.matched_at, e.key))
            self._applied = self._reconfigure(base, under_way, now)
        else:
            self._engine.reconfigure(base, prefix="cells")
            self._applied = frozenset()
            self._not_applied = {}
            self._apply_problem = ""
        self._base = base
        self._attempted = frozenset(e.key for e in ledger.under_way(entries, now=now))

    def _reconfigure(self, base: CellsConfig, under_way: list[Entry], now: float) -> frozenset[str]:
        """The engine at ``base`` with what it can carry of ``under_way``; the keys applied."""
        matches = [e.match() for e in under_way]
        key_of = {id(m): e.key for m, e in zip(matches, under_way)}
        result = applicable(topology=self._engine.topology, base=base.virtual_clusters, matches=matches, at=now)
        self._engine.reconfigure(reconfiguration(base, result.specs), prefix="cells")
        self._not_applied = {key_of[id(m)]: why for m, why in result.left_out}
        problem = "; ".join(f"exchange {m.offer.id} -> {m.request.id}: {why}" for m, why in result.left_out)
        if problem and problem != self._apply_problem:
            log.error("exchange quotas left out: the configured VCs cannot carry them", extra={"reason": problem})
        self._apply_problem = problem
        return frozenset(key_of[id(m)] for m in result.applied)

    def guarantees(self) -> dict[str, dict[str, int]]:
        """Each configured VC's quota in the engine now, by cell type."""
        with self._lock:
            return {vc["name"]: {c["cellType"]: c["quota"] for c in vc["cells"] if c["quota"]}
                    for vc in self._engine.inspect_virtual_clusters()["virtualClusters"] if vc["configured"]}

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.synced:
                now = self._clock()
                edge = ledger.next_edge(self.entries, now=now, grace_seconds=None)
                wait = self._settings.resync_seconds if edge is None else min(self._settings.resync_seconds, max(edge - now, 0.0) + 0.01)
                self._wake.wait(timeout=wait)
                self._wake.clear()
            else:
                # The first list reaches observe() before the reflector marks itself synced: wait
                # for the mark itself, so the ledger's moves apply the moment it is listed.
                self.reflector.synced.wait(timeout=_SYNC_POLL_SECONDS)
            if self._stop.is_set():
                return
            try:
                if self.synced:
                    self.apply()
                    self._caught_up.set()
            except Exception:  # a defect must not end the quota moves
                log.exception("applying exchange quotas failed")

    # ------------------------------------------------------------------ views

    def _charged(self, entries: list[Entry], now: float) -> list[Entry]:
        """The entries counting in the surplus: those the configured VCs carry (``charges``)."""
        return charged(entries=entries, topology=self._engine.topology, base=self._base.virtual_clusters, now=now)

    def metrics(self) -> dict[str, Any]:
        """What the exchange gauges read: GPU-hours lent and borrowed per VC and surplus (of the
        exchanges in effect), and the exchanges matched and under way."""
        now = self._clock()
        entries = self.entries
        counted = self._charged(entries, now)
        return {
            "exchanged": ledger.exchanged(counted, self.settled),
            "surplus": ledger.surplus(counted, self.settled),
            "matched": sum(1 for e in entries if now < e.window.start),
            "active": sum(1 for e in entries if e.window.holds(now)),
        }

    def inspect(self) -> dict[str, Any]:
        now = self._clock()
        entries = self.entries
        counted = self._charged(entries, now)
        charged_keys = {e.key for e in counted}
        with self._guard:
            problems = list(self._problems)
        return {
            "ledger": {"namespace": self.namespace, "name": self._settings.ledger_name, "synced": self.synced,
                       "entries": len(entries), "settledVirtualClusters": len(self.settled), "problems": problems},
            "surplus": {vc: round(v, 6) for vc, v in sorted(ledger.surplus(counted, self.settled).items())},
            "exchanges": [
                {
                    "offer": e.offer, "request": e.request, "lender": e.lender, "borrower": e.borrower,
                    "offerCells": [{"cellType": t, "count": n} for t, n in e.offer_cells],
                    "requestCells": [{"cellType": t, "count": n} for t, n in e.request_cells],
                    "start": rfc3339(e.window.start), "end": rfc3339(e.window.end), "gpuHours": round(e.gpu_hours, 6),
                    "state": "matched" if now < e.window.start else ("active" if now < e.window.end else "returned"),
                    "applied": e.key in self._applied,
                    "charged": e.key in charged_keys,
                    **({"notApplied": self._not_applied[e.key]} if e.key in self._not_applied else {}),
                }
                for e in sorted(entries, key=lambda e: (e.window.start, e.key))
                if now < e.window.end + (self._settings.return_grace_seconds or 0.0) + 3600
            ],
            "virtualClusters": self.guarantees(),
            **({"applyProblem": self._apply_problem} if self._apply_problem else {}),
        }
