"""The live driver of HiveD's booking expiry (scheduler/cells/expiry.py): a periodic sweep.

The core decides which bookings have lost their reason, given the time; this thread gives it
the time, every fraction of a second, under the engine lock, and tells each release where the
user looks: a Warning Event ``BookingReleased`` on the pod or Job the cells were booked for, and
a WARNING log line. Events are written after the lock is let go, so an API server that is slow
to take them never holds up kube-scheduler's calls, and by a writer thread of their own, so it
never holds up the next sweep either: a release is due on time whatever became of the Event
before it (at most ``EVENTS_QUEUED`` wait; beyond, an Event is dropped, its log line kept).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable, Final

from scheduler.cells.capabilities import BookingSweep
from scheduler.cells.expiry import REASON, BookingLimits, BookingReleased
from scheduler.cluster.api import KubernetesApi
from scheduler.errors import CellfitError

log = logging.getLogger(__name__)

# Sweeps come at least this often, and at a quarter of the shortest limit when that is shorter,
# so that a booking goes at most a quarter of its limit late.
MAX_SWEEP_SECONDS: Final = 1.0
MIN_SWEEP_SECONDS: Final = 0.05
# Release Events waiting for the API server at most; each may take the client's timeout.
EVENTS_QUEUED: Final = 256


def sweep_seconds(limits: BookingLimits) -> float:
    shortest = min(v for v in (limits.unseen_pod_grace_seconds, limits.gang_booking_timeout_seconds) if v is not None)
    return min(MAX_SWEEP_SECONDS, max(MIN_SWEEP_SECONDS, shortest / 4))


class BookingSweeper:
    """Sweeps ``engine``'s bookings from :meth:`start` to :meth:`stop`. ``events``: where the
    Events go (None standalone: the log line only)."""

    def __init__(
        self,
        *,
        engine: BookingSweep,
        lock: threading.RLock,
        events: KubernetesApi | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._lock = lock
        self._events = events
        self._clock = clock
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._writer: threading.Thread | None = None
        self._notices: queue.Queue[BookingReleased | None] = queue.Queue(maxsize=EVENTS_QUEUED)

    @classmethod
    def for_engine(
        cls, cells: BookingSweep | None, *, lock: threading.RLock, events: KubernetesApi | None, watched: bool
    ) -> BookingSweeper | None:
        """A sweeper for HiveD's cells (None without them: resource fit books nothing before
        bind). ``watched``: a watch cache feeds the engine every pod, so a booking for a pod it
        never shows can be told apart (expiry.py)."""
        if cells is None:
            return None
        with lock:
            cells.watch_pods(watched)
        return cls(engine=cells, lock=lock, events=events)

    def start(self) -> None:
        self._stopping.clear()
        if self._events is not None:
            # A daemon: an Event write hanging on the API server never holds up the exit.
            self._notices = queue.Queue(maxsize=EVENTS_QUEUED)
            self._writer = threading.Thread(target=self._write_events, args=(self._notices,), name="cellfit-booking-events", daemon=True)
            self._writer.start()
        self._thread = threading.Thread(target=self._run, name="cellfit-bookings", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        if self._writer is not None:
            self._writer = None
            try:
                self._notices.put_nowait(None)  # the writer ends after what is queued
            except queue.Full:
                pass  # it is stuck on the API server; a daemon, it goes with the process

    def sweep(self) -> list[BookingReleased]:
        """One sweep: release, then tell. What was released."""
        with self._lock:
            released = self._engine.expire_bookings(self._clock())
        for notice in released:
            self._tell(notice)
        return released

    def _run(self) -> None:
        while not self._stopping.wait(sweep_seconds(self._engine.booking_limits)):
            try:
                self.sweep()
            except Exception:  # noqa: BLE001 - the sweep must outlive any one failure
                log.exception("booking sweep failed; trying again")

    def _tell(self, notice: BookingReleased) -> None:
        log.warning(
            "booking released",
            extra={"kind": notice.kind, "object": f"{notice.namespace}/{notice.name}", "reason": notice.message},
        )
        if self._events is None:
            return
        if self._writer is None:  # swept by hand, not started: written here
            self._write(notice)
            return
        try:
            self._notices.put_nowait(notice)
        except queue.Full:
            log.warning("booking release not recorded as an Event: the API server is behind with them",
                        extra={"object": f"{notice.namespace}/{notice.name}"})

    def _write_events(self, notices: queue.Queue[BookingReleased | None]) -> None:
        while (notice := notices.get()) is not None:
            try:
                self._write(notice)
            except Exception:  # noqa: BLE001 - the writer must outlive any one Event
                log.exception("booking release Event failed")

    def _write(self, notice: BookingReleased) -> None:
        assert self._events is not None
        try:
            self._events.create_event(
                namespace=notice.namespace,
                pod_name=notice.name,
                pod_uid=notice.uid,
                reason=REASON,
                message=notice.message,
                warning=True,
                kind=notice.kind,
            )
        except CellfitError as error:
            log.warning("could not record a booking release", extra={"object": f"{notice.namespace}/{notice.name}", "reason": str(error)})
