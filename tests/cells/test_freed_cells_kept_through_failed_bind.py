"""review28 #2 (LOW): HivedEngine.reserve told JustFreed the waiter was bound
(``_just_freed.bound``) before the bind had happened. The waiter was forgotten and, with no
waiter left, the (VC, node) entry dropped; when the bind then failed (an API 5xx or timeout:
kube-scheduler calls unreserve and retries the pod), nothing restored it. In the same 5 s window
an opportunistic pod was placed on the freed cells, and the waiter reclaimed it on its retry a
moment later: user25 #1's victim-for-nothing, after any failed bind. Now the entry ends when the
watch shows the pod bound; a failed bind leaves the pod waiting and the cells kept for its retry.
"""

from __future__ import annotations

from scheduler.kube.names import filter_offered
from tests.cells.helpers import bound, pod
from tests.cells.test_freed_cells_kept_from_opportunistic import g2_waits, opportunistic
from tests.cells.test_no_preemption_while_vc_cells_free import run, scene, terminating
from tests.cells.test_no_reclaim_just_after_vc_cells_freed import Clock


def test_a_failed_bind_of_the_waiter_keeps_its_freed_cells_kept() -> None:
    engine = g2_waits(Clock())  # g1 left n-a just now; g2 (8 GPUs of vc-a) told to wait for it
    g2 = pod("g2", 8, "vc-a")
    engine.reserve(g2, "n-a")  # kube-scheduler's cache has dropped g1: g2 is reserved on n-a
    engine.unreserve(g2.uid)  # ... and its bind fails: g2 is pending again, still waiting for n-a
    assert not filter_offered(engine, opportunistic("opp-2"), ["n-a"]).feasible
    assert run(engine, g2, ["n-a", "n-b"]).node_name == "n-a"  # its retry gets them


def test_the_freed_cells_are_taken_when_the_watch_shows_the_pod_bound_not_at_reserve() -> None:
    engine, g1, _ = scene(g1_gpus=4, clock=Clock())  # n-a: g1's 4 GPUs and 4 free
    engine.apply_pod(terminating(g1))
    engine.delete_pod("g1")  # n-a's 8 GPUs free just now
    g2 = pod("g2", 4, "vc-a")
    placement = engine.reserve(g2, "n-a")  # no waiter: g2 takes half of them, once bound
    assert engine.freeing_wait(pod("g3", 4, "vc-a")) is not None  # not bound yet: the cells are still just freed
    engine.delete_pod("g3")  # g3, told to wait, gone: no pod waits for them
    engine.apply_pod(bound(g2, "n-a", dict(placement.annotations)))
    assert engine.freeing_wait(pod("g4", 4, "vc-a")) is None  # bound: the cells freed there are taken
