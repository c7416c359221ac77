"""AlloX's admission decided in the extender's process (allox.solverProcess false) is frozen out
of garbage collections after its first decision, once (scheduler/gc_freeze.py's
freeze_once_more): the extender froze its long-lived state at the watch cache's sync, before the
matching had kept anything, so every full collection walked what the matching keeps from pass to
pass (each waiting Job's matching Job, each running Job's machines, DecideReuse) and the
bench's in-process wall-clock p99 carried those pauses. A process that froze nothing (tests,
benchmarks) is left unfrozen, as the solver child's rule leaves the parent."""

from __future__ import annotations

import gc
from typing import Iterator

import pytest

from placer.controller import PlacerController
from scheduler import gc_freeze
from scheduler.gc_freeze import freeze_long_lived
from tests.placer.test_controller import RecordingApi, controller, job


@pytest.fixture(autouse=True)
def nothing_frozen(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(gc_freeze, "_frozen_once_more", set())
    gc.unfreeze()
    yield
    gc.unfreeze()


def collected(thing: object) -> bool:
    """Whether a collection walks ``thing`` (frozen objects are in no generation)."""
    return any(each is thing for each in gc.get_objects())


def kept_by_the_pass(placer: PlacerController) -> object:
    """The record of the matching's Jobs the last pass made and keeps (reuse.Reuse's, a dict
    each pass makes anew): an object the pass itself created, unlike the store holding it."""
    kept: object = placer._reuse.waiting._kept
    return kept


def placer_with_jobs() -> PlacerController:
    return controller(RecordingApi(), [job(f"j{index}", cpu=100 + index, gpu=10 + index, created=index) for index in range(6)])


def test_the_first_decision_in_the_extenders_process_is_frozen_and_the_next_is_not() -> None:
    placer = placer_with_jobs()
    freeze_long_lived(what="the watch cache synced")  # as the extender does, before AlloX's first pass
    placer.admit()
    kept = kept_by_the_pass(placer)
    # What the pass kept is in no generation. Not the freeze count's growth: frozen objects are
    # still freed by reference counting, and in a whole test run the sync's freeze holds
    # hundreds of thousands of them, some of which the pass lets go (a cache's evictions).
    assert gc.is_tracked(kept) and not collected(kept)
    frozen_after_first = gc.get_freeze_count()
    placer.admit()  # the next pass keeps a new record of the Jobs it made, and does not freeze it
    assert gc.get_freeze_count() <= frozen_after_first
    assert collected(kept_by_the_pass(placer))


def test_a_pass_with_nothing_to_match_leaves_the_freeze_to_the_first_that_matches() -> None:
    empty = controller(RecordingApi(), [])
    freeze_long_lived(what="the watch cache synced")
    frozen_at_sync = gc.get_freeze_count()
    empty.admit()
    assert gc.get_freeze_count() <= frozen_at_sync
    placer = placer_with_jobs()
    placer.admit()
    assert not collected(kept_by_the_pass(placer))


def test_a_process_that_froze_nothing_is_left_unfrozen() -> None:
    placer_with_jobs().admit()
    assert gc.get_freeze_count() == 0
