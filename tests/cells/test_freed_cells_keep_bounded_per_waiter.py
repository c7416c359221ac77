"""A stream of a VC's pods leaving one node keeps opportunistic pods off it only
FREED_CELL_WAIT_SECONDS per waiter (review28, seen beside #1): each pod gone opened the node's
JustFreed entry again for its full window, and the node stayed kept as long as a waiter was
pending, though a waiter kube-scheduler has not placed there within the cache's lag is held
elsewhere (or nowhere) for another reason, and the freed GPUs stayed idle meanwhile. Now a waiter
keeps the node for the window from when the cells it waits for were freed, however many pods of
its VC leave the node after.

Two 8-GPU V100 nodes (tests/cells/test_no_preemption_while_vc_cells_free.py's scene): vc-a's
g1 (4 GPUs), g5 and g6 (2 each) fill n-a and terminate; vc-b's opportunistic opp fills n-b.
"""

from __future__ import annotations

from scheduler.cells import HivedEngine
from scheduler.cells.freeing import FREED_CELL_WAIT_SECONDS
from scheduler.kube.names import filter_offered
from tests.cells.helpers import pod
from tests.cells.test_freed_cells_kept_from_opportunistic import opportunistic
from tests.cells.test_no_preemption_while_vc_cells_free import run, scene, terminating
from tests.cells.test_no_reclaim_just_after_vc_cells_freed import Clock

STEP = FREED_CELL_WAIT_SECONDS * 0.6  # a pod of vc-a gone every STEP: each within the last one's window


def _g2_waits_while_n_a_empties(clock: Clock) -> HivedEngine:
    engine, g1, _ = scene(g1_gpus=4, clock=clock)
    leaving = [g1] + [run(engine, pod(name, 2, "vc-a"), ["n-a"]) for name in ("g5", "g6")]
    for p in leaving:
        engine.apply_pod(terminating(p))
    engine.delete_pod("g1")  # at 100 s: 4 GPUs of n-a free
    assert not filter_offered(engine, pod("g2", 4, "vc-a"), ["n-b"]).feasible  # g2 told to wait for n-a
    return engine


def test_the_waiter_keeps_the_node_for_the_window_from_when_its_cells_were_freed() -> None:
    clock = Clock()
    engine = _g2_waits_while_n_a_empties(clock)
    clock.now += STEP
    engine.delete_pod("g5")  # the entry opens again
    assert not filter_offered(engine, opportunistic("opp-2"), ["n-a"]).feasible  # within g2's window
    clock.now += STEP
    engine.delete_pod("g6")  # and again
    assert run(engine, opportunistic("opp-2"), ["n-a"]).node_name == "n-a"  # g2's window is over


def test_a_waiter_told_later_keeps_the_node_for_its_own_window() -> None:
    clock = Clock()
    engine = _g2_waits_while_n_a_empties(clock)
    clock.now += STEP
    engine.delete_pod("g5")
    assert not filter_offered(engine, pod("g3", 4, "vc-a"), ["n-b"]).feasible  # g3 told to wait at 103 s
    clock.now += STEP  # g2's window is over, not g3's
    decision = filter_offered(engine, opportunistic("opp-2"), ["n-a"])
    assert not decision.feasible
    assert "for its guaranteed pod ns/g3" in next(iter(decision.unresolvable.values()))


def test_the_wait_still_restarts_with_each_pod_gone() -> None:
    """The bound is on the keep, not on the freed-cells wait itself (a second pod's leaving
    lags in kube-scheduler's cache too: tests/cells/test_no_reclaim_just_after_vc_cells_freed.py)."""
    clock = Clock()
    engine = _g2_waits_while_n_a_empties(clock)
    for name in ("g5", "g6"):
        clock.now += STEP
        engine.delete_pod(name)
    assert engine.select_victims(pod("g2", 4, "vc-a"), {"n-b": ["opp"]}, {}) == {}


def test_a_waiter_told_while_its_cells_are_being_freed_outlives_the_nodes_earlier_entry() -> None:
    clock = Clock()
    engine, g1, _ = scene(g1_gpus=4, clock=clock)
    g0 = run(engine, pod("g0", 4, "vc-a"), ["n-a"])
    for p in (g1, g0):
        engine.apply_pod(terminating(p))
    engine.delete_pod("g1")  # at 100 s: n-a's entry opens
    clock.now += FREED_CELL_WAIT_SECONDS + 1  # g1's entry is over; g0 still leaving
    assert not filter_offered(engine, pod("g2", 8, "vc-a"), ["n-b"]).feasible  # g2 waits for g0's cells
    assert run(engine, opportunistic("opp-3"), ["n-b", "n-a"]).node_name == "n-a"  # nothing kept yet: n-a's 4 free
    engine.delete_pod("opp-3")
    engine.delete_pod("g0")  # n-a's 8 GPUs free: g2's
    assert not filter_offered(engine, opportunistic("opp-2"), ["n-a"]).feasible
