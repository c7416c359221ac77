"""Cells a VC's own pod freed a moment ago go to the VC's guaranteed pod waiting for them, not to
an opportunistic pod placed there first and reclaimed seconds later (user25 #1, 3 of 3 live:
"HiveD waits for the cells of virtual cluster 'vc-b' on node gpu-node-2, which pods of it freed
just now", and in the same second the filter let the pending opportunistic b-opp bind there; 9 s
later HiveD preempted it for the guaranteed pod, which started 14 s late).

Two 8-GPU V100 nodes (tests/cells/test_no_preemption_while_vc_cells_free.py's scene): vc-a's
guaranteed g1 on n-a, vc-b's opportunistic opp on n-b. g1 leaves; g2 of vc-a waits for n-a's
cells; a second opportunistic pod of vc-b asks next.
"""

from __future__ import annotations

from scheduler.core.model import PodInfo
from scheduler.cells import HivedEngine
from scheduler.cells.freeing import FREED_CELL_WAIT_SECONDS
from scheduler.kube.names import filter_offered
from tests.cells.helpers import pod
from tests.cells.test_no_preemption_while_vc_cells_free import run, scene, terminating
from tests.cells.test_no_reclaim_just_after_vc_cells_freed import Clock

KEPT = ("HiveD keeps the cells virtual cluster 'vc-a' freed just now on node n-a for its guaranteed pod ns/g2, which waits "
        "for them (for 5 s): an opportunistic pod placed there would be preempted for it at once")


def opportunistic(name: str) -> PodInfo:
    return pod(name, 4, "vc-b", priority="opportunistic")


def g2_waits(clock: Clock) -> HivedEngine:
    engine, g1, _ = scene(clock=clock)
    engine.apply_pod(terminating(g1))
    engine.delete_pod("g1")  # gone from cellfit's watch; kube-scheduler's cache still counts it
    assert not filter_offered(engine, pod("g2", 8, "vc-a"), ["n-b"]).feasible  # g2 told to wait for n-a
    return engine


def test_an_opportunistic_pod_is_not_placed_on_cells_a_waiting_guaranteed_pod_was_told_are_its() -> None:
    engine = g2_waits(Clock())
    decision = filter_offered(engine, opportunistic("opp-2"), ["n-a"])
    assert not decision.feasible
    assert set(decision.unresolvable.values()) == {KEPT}
    assert run(engine, pod("g2", 8, "vc-a"), ["n-a"]).node_name == "n-a"  # the waiter gets them


def test_without_a_waiter_the_freed_cells_are_anybodys() -> None:
    engine, g1, _ = scene(clock=Clock())
    engine.apply_pod(terminating(g1))
    engine.delete_pod("g1")
    assert run(engine, opportunistic("opp-2"), ["n-a"]).node_name == "n-a"


def test_the_cells_are_kept_only_for_the_window() -> None:
    clock = Clock()
    engine = g2_waits(clock)
    clock.now += FREED_CELL_WAIT_SECONDS
    assert run(engine, opportunistic("opp-2"), ["n-a"]).node_name == "n-a"


def test_the_waiter_gone_keeps_nothing() -> None:
    engine = g2_waits(Clock())
    engine.delete_pod("g2")
    assert run(engine, opportunistic("opp-2"), ["n-a"]).node_name == "n-a"


def test_the_waiter_told_while_the_cells_were_still_being_freed_keeps_them_once_freed() -> None:
    engine, g1, _ = scene(clock=Clock())
    engine.apply_pod(terminating(g1))
    assert engine.freeing_wait(pod("g2", 8, "vc-a")) is not None  # g1 still leaving: g2 told to wait
    engine.delete_pod("g1")
    assert not filter_offered(engine, opportunistic("opp-2"), ["n-a"]).feasible
