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


def placer_with_jobs() -> PlacerController:
    return controller(RecordingApi(), [job(f"j{index}", cpu=100 + index, gpu=10 + index, created=index) for index in range(6)])


def test_the_first_decision_in_the_extenders_process_is_frozen_and_the_next_is_not() -> None:
    placer = placer_with_jobs()
    freeze_long_lived(what="the watch cache synced")  # as the extender does, before AlloX's first pass
    frozen_at_sync = gc.get_freeze_count()
    placer.admit()
    kept = placer._reuse.waiting
    assert gc.get_freeze_count() > frozen_at_sync
    assert gc.is_tracked(kept) and not collected(kept)
    frozen_after_first = gc.get_freeze_count()
    placer._reuse.waiting = type(kept)()  # made after the freeze: the next pass does not freeze it
    placer.admit()
    assert gc.get_freeze_count() <= frozen_after_first
    assert collected(placer._reuse.waiting)


def test_a_pass_with_nothing_to_match_leaves_the_freeze_to_the_first_that_matches() -> None:
    empty = controller(RecordingApi(), [])
    freeze_long_lived(what="the watch cache synced")
    frozen_at_sync = gc.get_freeze_count()
    empty.admit()
    assert gc.get_freeze_count() <= frozen_at_sync
    placer_with_jobs().admit()
    assert gc.get_freeze_count() > frozen_at_sync


def test_a_process_that_froze_nothing_is_left_unfrozen() -> None:
    placer_with_jobs().admit()
    assert gc.get_freeze_count() == 0
