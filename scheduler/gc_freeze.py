"""Move what a process has loaded for good out of CPython's garbage collections.

A full (generation 2) collection holds the GIL while it walks every object the collector
tracks, and in a long-running cellfit process most of those live as long as the process does
(modules, the app, the watch cache's maps, the solver child's kept Jobs): each full collection
walks all of them to find none of them garbage. :func:`freeze_long_lived` collects once and
moves every survivor to the permanent generation, which no collection walks. Frozen objects are
still freed by reference counting; only a reference cycle among them that later becomes garbage
stays until exit. A leaf module: the extender (scheduler/extender/gc_tuning.py, which says when
and how it is measured) and the placer's solver child (placer/solver_wire.py) both call it.

:func:`freeze_once_more` freezes, once, what a process that froze already has loaded since: the
extender's first AlloX decision made in process (placer/controller.py, ``allox.solverProcess``
false) keeps each waiting Job's matching Job and each running Job's machines (DecideReuse) and
the controller's reading of each Job, ~10 tracked objects a Job, which the freeze at the watch
cache's sync came too early for. Once only: freezing after every pass would keep each pass's
leftover cycles instead.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)

# The moments after which this process froze once more (freeze_once_more).
_frozen_once_more: set[str] = set()


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


def freeze_once_more(*, after: str) -> int | None:
    """:func:`freeze_long_lived` the first time this process gets here ``after`` (the moment,
    for the log and as the once's key), where it froze its long-lived state already (the
    extender, once its watch cache has synced); None, nothing done, otherwise: a process that
    freezes nothing (tests, benchmarks, a tool) is left so, and one that has not frozen yet is
    frozen later, at its own moment, and here again after that."""
    if after in _frozen_once_more or not gc.get_freeze_count():
        return None
    _frozen_once_more.add(after)
    return freeze_long_lived(what=after)
