"""The discrete-event kernel every simulator workload runs on: a virtual clock that jumps from
one instant to the next, timed events in a heap, and arrivals merged in from their own source.

At each instant the kernel first calls ``advance(now)`` (a workload integrates what ran since
the last instant), then hands every event due at that instant to ``on_event``, in the order
(kind, order) the workload gave them, and last calls ``instant(now)``: the workload takes that
instant's arrivals and runs its scheduling pass there. Events an ``on_event`` handler schedules
for the same instant are handed over in the same round; those scheduled by ``instant`` wait for
the next round at that time. The run ends when no event is pending and ``next_arrival`` says
there is nothing more to come.

``order`` breaks ties between events of one kind at one instant; by default it is the order
they were scheduled in. It must be unique among such events only where the workload cares
which comes first; events that tie on everything are handed over in scheduling order.
"""

from __future__ import annotations

import heapq
from typing import Callable, Generic, TypeVar

E = TypeVar("E")


class EventKernel(Generic[E]):
    """Timed events of type ``E`` and the loop that applies them; :meth:`run` once."""

    __slots__ = ("now", "_heap", "_seq", "_ran")

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, int, int, E]] = []
        self._seq = 0
        self._ran = False

    def schedule(self, at: float, event: E, *, kind: int = 0, order: int | None = None) -> None:
        """Hand ``event`` to ``on_event`` at time ``at``; among events due at the same instant,
        lower ``kind`` first, then lower ``order`` (default: scheduling order)."""
        self._seq += 1
        seq = self._seq
        heapq.heappush(self._heap, (at, kind, seq if order is None else order, seq, event))

    @property
    def pending(self) -> int:
        """Events scheduled and not handed over yet."""
        return len(self._heap)

    def next_time(self) -> float | None:
        """When the earliest pending event is due; None when none is pending."""
        return self._heap[0][0] if self._heap else None

    def run(
        self,
        *,
        next_arrival: Callable[[], float | None],
        on_event: Callable[[E], None],
        instant: Callable[[float], None],
        advance: Callable[[float], None] | None = None,
    ) -> None:
        """Apply instants until nothing is pending and ``next_arrival`` returns None.

        ``next_arrival`` is asked before each instant: the time of the next arrival (an
        arrival due no later than the next event makes its time the next instant), or None.
        """
        if self._ran:
            raise RuntimeError("an EventKernel runs once")
        self._ran = True
        heap = self._heap
        pop = heapq.heappop
        while True:
            arrival = next_arrival()
            if heap and (arrival is None or heap[0][0] <= arrival):
                now = heap[0][0]
            elif arrival is not None:
                now = arrival
            else:
                return
            if advance is not None:
                advance(now)
            self.now = now
            while heap and heap[0][0] == now:
                on_event(pop(heap)[4])
            instant(now)
