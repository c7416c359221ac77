"""Move what a process has loaded for good out of CPython's garbage collections.

A full (generation 2) collection holds the GIL while it walks every object the collector
tracks, and in a long-running cellfit process most of those live as long as the process does
(modules, the app, the watch cache's maps, the solver child's kept Jobs): each full collection
walks all of them to find none of them garbage. :func:`freeze_long_lived` collects once and
moves every survivor to the permanent generation, which no collection walks. Frozen objects are
still freed by reference counting; only a reference cycle among them that later becomes garbage
stays until exit. A leaf module: the extender (scheduler/extender/gc_tuning.py, which says when
and how it is measured) and the placer's solver child (placer/solver_wire.py) both call it.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)


def freeze_long_lived(*, what: str) -> int:
    """Collect, then freeze every surviving object so that no later collection walks it; log
    and return how many objects are frozen in all. ``what``: the state just loaded, for the log."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info(
        "long-lived objects frozen out of garbage collections",
        extra={"after": what, "frozen_objects": frozen, "seconds": round(time.perf_counter() - started, 4)},
    )
    return frozen
