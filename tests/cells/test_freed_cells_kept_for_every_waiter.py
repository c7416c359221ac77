"""JustFreed keeps one waiter per (VC, node) and drops the node's whole entry when any
pod of the VC binds there. With two guaranteed pods of vc-a (4 GPUs each) told to wait for the 8
GPUs g1 freed on n-a, the first to bind ends the keep: an opportunistic pod is then placed on the
other 4 freed GPUs, and the second waiter preempts it a moment later -- user25 #1's victim taken
for nothing, for any VC whose freed node is awaited by more than one pod (a Job of several pods).
"""

from __future__ import annotations

from scheduler.kube.names import filter_offered
from tests.cells.helpers import pod
from tests.cells.test_freed_cells_kept_from_opportunistic import opportunistic
from tests.cells.test_no_preemption_while_vc_cells_free import run, scene, terminating
from tests.cells.test_no_reclaim_just_after_vc_cells_freed import Clock


def test_the_second_waiter_still_has_the_cells_kept_after_the_first_binds() -> None:
    engine, g1, _ = scene(clock=Clock())
    engine.apply_pod(terminating(g1))
    engine.delete_pod("g1")  # n-a's 8 GPUs freed just now
    assert not filter_offered(engine, pod("g2", 4, "vc-a"), ["n-b"]).feasible  # g2 told to wait for n-a
    assert not filter_offered(engine, pod("g3", 4, "vc-a"), ["n-b"]).feasible  # so is g3
    assert run(engine, pod("g2", 4, "vc-a"), ["n-a"]).node_name == "n-a"  # g2 gets half of them
    # g3 still waits for the other half: no opportunistic pod should be placed there meanwhile.
    assert not filter_offered(engine, opportunistic("opp-2"), ["n-a"]).feasible


def test_the_first_waiter_still_has_the_cells_kept_after_a_later_waiter_is_deleted() -> None:
    engine, g1, _ = scene(clock=Clock())
    engine.apply_pod(terminating(g1))
    engine.delete_pod("g1")
    assert not filter_offered(engine, pod("g2", 8, "vc-a"), ["n-b"]).feasible  # g2 waits for n-a
    assert not filter_offered(engine, pod("g3", 8, "vc-a"), ["n-b"]).feasible  # g3 too: it replaces g2 as the waiter
    engine.delete_pod("g3")  # its user deletes g3: g2 still waits
    assert not filter_offered(engine, opportunistic("opp-2"), ["n-a"]).feasible
