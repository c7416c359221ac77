"""HiveD's JustFreed (c2d8939) misses the sequence the kubelet writes for a deleted pod.

Since Kubernetes 1.27 the kubelet moves a deleted pod of restartPolicy Never/OnFailure (every Job
pod) to a terminal phase (Failed, or Succeeded) before the API server removes it, so cellfit's
watch shows: deletionTimestamp set (terminating), then phase Failed, then DELETED. HivedEngine's
apply_pod releases the cells on the terminal phase (TERMINAL_PHASES branch) without telling
JustFreed, and delete_pod then finds no booking: the 5 s wait never starts, and the VC's next
guaranteed pod reclaims the opportunistic pod elsewhere while kube-scheduler's cache still
counts g1 (user24b item 6, the very race the window is for). The wait starts only when the
engine is told delete_pod straight after terminating.

LOW: the live watch cache (ClusterCache._apply_pod: _finished -> _delete_pod) turns a terminal
phase into delete_pod, so `cellfit serve` is not affected; HivedEngine.apply_pod's own terminal
branch (a contract other drivers and the simulators may use) is.
"""

from __future__ import annotations

from msgspec.structs import replace

from tests.cells.helpers import pod
from tests.cells.test_no_preemption_while_vc_cells_free import scene, terminating
from tests.cells.test_no_reclaim_just_after_vc_cells_freed import WAITS, Clock


def test_a_pod_that_left_through_its_terminal_phase_starts_the_wait() -> None:
    engine, g1, _ = scene(clock=Clock())
    engine.apply_pod(terminating(g1))
    engine.apply_pod(replace(terminating(g1), phase="Failed"))  # the kubelet's terminal phase on deletion
    engine.delete_pod("g1")
    assert engine.freeing_wait(pod("g2", 8, "vc-a")) == WAITS
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {}


def test_a_pod_that_completes_starts_the_wait() -> None:
    """review28: a Job's pod that finishes, not deleted, frees its cells the same way: kube-scheduler's
    pod informer lists no finished pod, and drops it a moment after cellfit's watch shows it."""
    engine, g1, _ = scene(clock=Clock())
    engine.apply_pod(replace(g1, phase="Succeeded"))
    assert engine.freeing_wait(pod("g2", 8, "vc-a")) == WAITS
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {}


def test_a_bound_pod_gone_without_a_leaving_seen_starts_the_wait() -> None:
    """cellfit's cache turns a finished pod into its deletion (ClusterCache._apply_pod), and a pod
    deleted at once (no grace period) is gone with no terminating event either."""
    engine, _, _ = scene(clock=Clock())
    engine.delete_pod("g1")
    assert engine.freeing_wait(pod("g2", 8, "vc-a")) == WAITS
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {}
