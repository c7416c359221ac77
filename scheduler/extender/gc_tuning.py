"""Keep CPython's full (generation 2) garbage collections off the long-lived heap, and count them.

A full collection holds the GIL while it walks every object the collector tracks: in the
extender that is the event loop stalled (every verb kube-scheduler waits on, and /healthz); in
the AlloX solver child it is a pass's decision delayed. Most of what those processes hold lives
as long as they do (modules, the app, the watch cache's maps, the engines' indexes, the child's
kept Jobs), and a full collection walks all of it to find none of it garbage: about 115,000
objects, mostly the modules and the app rather than the pods (whose records are untracked
structs), 80-250 ms on a loaded two-core machine at 10,000 to 50,000 pods, and a filter call it
lands in takes as long (tests/benchmarks/bench_gc_freeze.py).

:func:`~scheduler.gc_freeze.freeze_long_lived` collects once and moves every surviving object to the permanent
generation (``gc.freeze()``), which no collection walks. It runs once per process, at the moment
the long-lived state is loaded: the extender's watch cache's first sync, the solver child's
first decision. Frozen objects are still freed by reference counting (a relist that replaces a
map frees the old one as before); only a reference cycle among them that later becomes garbage
stays until exit. The state that moves after the freeze (pods' records, bookings) is structs the
collector does not track and holds no cycles, so that leak is bounded by what the first sync
built; freezing again after each relist would add each relist's leftovers instead, so it is not
done.

:class:`GcPauses` times each collection (``gc.callbacks``) into the histogram
``cellfit_gc_pause_seconds`` by generation, so a pause that still lands in a verb shows.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any, Callable, Final

from prometheus_client import CollectorRegistry, Histogram

from scheduler.gc_freeze import freeze_long_lived

log = logging.getLogger(__name__)

# 100 µs .. 1.6 s, doubling: the verbs' buckets (scheduler/extender/metrics.py).
PAUSE_BUCKETS: Final = tuple(0.0001 * 2**exponent for exponent in range(15))
GENERATIONS: Final = ("0", "1", "2")


async def freeze_once_ready(*, ready: Callable[[], bool], what: str, poll_seconds: float = 1.0) -> None:
    """Wait until ``ready()`` (the watch cache's first sync), then :func:`freeze_long_lived`
    once. Cancelled with the process's other chores."""
    while not ready():
        await asyncio.sleep(poll_seconds)
    freeze_long_lived(what=what)


class GcPauses:
    """Each collection's duration, observed into ``cellfit_gc_pause_seconds{generation}`` while
    installed (``gc.callbacks`` is the process's: install once per running server)."""

    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.seconds = Histogram(
            "cellfit_gc_pause_seconds",
            "Duration of each CPython garbage collection by generation; 2 is a full collection. The "
            "event loop (every verb, /healthz) waits for as long as one takes.",
            ["generation"],
            buckets=PAUSE_BUCKETS,
            registry=registry,
        )
        for generation in GENERATIONS:
            self.seconds.labels(generation=generation)
        self._started: float | None = None

    def install(self) -> None:
        if self._observe not in gc.callbacks:
            gc.callbacks.append(self._observe)

    def remove(self) -> None:
        if self._observe in gc.callbacks:
            gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        if self._started is None:  # installed mid-collection
            return
        self.seconds.labels(generation=str(info["generation"])).observe(time.perf_counter() - self._started)
        self._started = None
