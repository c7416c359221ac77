"""A preemptor whose victims have all left takes no second victim while its room is kept (user24b NEW-1).

Live: te-mp's victim on gpu-node-1 exited; cellfit's watch dropped it, kube-scheduler's cache still
counted it, so kube-scheduler ran its preemption again and offered other nodes only. FitGpp's wait
for pods leaving the preemptor's node no longer applied (nothing was leaving any more), so it took
a second best-effort victim on gpu-node-2, and 250 ms later te-mp bound on gpu-node-1: the second
victim was killed for nothing and used up its maxPreemptions. Now, while the preemptor hold (and,
under HiveD, the cells booked for it once its victims left) keeps that room for it, the preempt
verb answers no victim and says why, for ROOM_KEPT_SECONDS from the first such ask (a cache's lag),
and not for a node a pod can no longer land on (cordoned, not Ready).

On FitGppEngine around the real ResourceFitEngine and the real HivedEngine; injected clocks.
"""

from __future__ import annotations

import msgspec

from scheduler.kube.names import filter_offered
from scheduler.preemption.engine import ROOM_KEPT_SECONDS
from tests.preemption.test_engine import running
from tests.preemption.test_hived_fitgpp_candidates import job_pod
from tests.preemption.test_hived_preemptor_quota_hold import Clock, Scene, hived, place
from tests.preemption.test_holds import FakeClock
from tests.preemption.test_preemptor_hold_offers import N2_CANDIDATES, preempting_on_n1, preemptor_holds

KEPT_N1 = ("its room on node n1 is kept for it since its victims left; "
           "kube-scheduler places it there once its cache shows them gone")
KEPT_GPU1 = KEPT_N1.replace("n1", "gpu-1")


def test_resource_fit_a_preemptor_whose_victim_left_takes_no_second_victim_elsewhere() -> None:
    engine, preemptor = preempting_on_n1()
    engine.delete_pod("be-short")  # cellfit's watch: gone; kube-scheduler's cache still counts it on n1
    choice = engine.decide_preemption(preemptor, N2_CANDIDATES, {})
    assert choice.victims == {}, choice.victims
    assert choice.refusal == KEPT_N1
    assert preemptor_holds(engine) == [("n1", ("ml/te-1",))]
    assert engine.preemptions_of_job("job-d") == 0
    assert list(filter_offered(engine, preemptor, ["n1", "n2"]).feasible) == ["n1"]


def test_resource_fit_the_wait_is_a_caches_lag_then_the_pod_is_preempted_for_elsewhere() -> None:
    """kube-scheduler asking again ROOM_KEPT_SECONDS after the first ask refuses the node for a
    reason FitGpp cannot see (a taint): the pod is preempted for elsewhere, long before its hold
    (60 s here) would lapse."""
    clock = FakeClock()
    engine, preemptor = preempting_on_n1(clock=clock, hold_seconds=60)
    engine.delete_pod("be-short")
    clock.now += 30  # asked about again long after the victim left: the window starts at the ask
    assert engine.decide_preemption(preemptor, N2_CANDIDATES, {}).refusal == KEPT_N1
    clock.now += ROOM_KEPT_SECONDS - 0.5
    assert engine.decide_preemption(preemptor, N2_CANDIDATES, {}).victims == {}
    clock.now += 0.5
    assert engine.decide_preemption(preemptor, N2_CANDIDATES, {}).victims == {"n2": ["d-short"]}
    assert preemptor_holds(engine) == [("n2", ("ml/te-1",))]


def test_resource_fit_a_room_taken_by_another_pod_waits_for_nothing() -> None:
    # The room on n1 is no longer there (a pod the hold did not keep off, bound before it): FitGpp
    # preempts elsewhere at once, as before.
    engine, preemptor = preempting_on_n1()
    engine.delete_pod("be-short")
    engine.apply_pod(running("other", job="o", gpus=4, grace=30))
    assert engine.decide_preemption(preemptor, N2_CANDIDATES, {}).victims == {"n2": ["d-short"]}


def test_hived_a_preemptor_whose_cells_are_booked_takes_no_second_victim() -> None:
    scene = Scene()
    scene.victims_leave()  # te-2's cells on gpu-1 are booked for it, in the same step
    assert hived(scene.made).allocator.by_pod["te-2"].node == "gpu-1"
    # kube-scheduler still counts be-3/be-4 on gpu-1 and asks with team-a's other node only.
    choice = scene.made.decide_preemption(scene.te2, {"gpu-0": ["be-1"]}, {})
    assert choice.victims == {}, choice.victims
    assert choice.refusal == KEPT_GPU1
    assert scene.made.preemptions_of_job("uid-be-1") == 0
    assert hived(scene.made).allocator.by_pod["te-2"].node == "gpu-1"  # the booking stayed
    assert scene.made.reserve(scene.te2, "gpu-1").node_name == "gpu-1"


def test_hived_an_opportunistic_pod_is_not_reclaimed_for_a_preemptor_whose_cells_are_booked() -> None:
    # Without the wait, HiveD moved te-2's booking off gpu-1 to the offered gpu-2 and reclaimed
    # the opportunistic pod there, leaving gpu-1's freed cells idle.
    scene = Scene()
    made = job_pod("opp-0", 8, "team-b", "opp", "best-effort")
    opp = place(scene.made, msgspec.structs.replace(made, labels={**made.labels, "cellfit.io/priority": "opportunistic"}), ["gpu-2"])
    scene.victims_leave()
    choice = scene.made.decide_preemption(scene.te2, {"gpu-2": [opp.uid]}, {})
    assert choice.victims == {}, choice.victims
    assert choice.refusal == KEPT_GPU1
    assert hived(scene.made).allocator.by_pod["te-2"].node == "gpu-1"


def test_hived_the_wait_ends_after_a_caches_lag_and_the_cells_go_back() -> None:
    clock = Clock()
    scene = Scene(clock)
    scene.victims_leave()
    assert scene.made.decide_preemption(scene.te2, {"gpu-0": ["be-1"]}, {}).refusal == KEPT_GPU1
    clock.now += ROOM_KEPT_SECONDS - 0.5
    assert scene.made.decide_preemption(scene.te2, {"gpu-0": ["be-1"]}, {}).refusal == KEPT_GPU1
    clock.now += 0.5
    choice = scene.made.decide_preemption(scene.te2, {"gpu-0": ["be-1"]}, {})
    assert choice.refusal != KEPT_GPU1
    assert scene.made.holds.nominated_node("te-2") != "gpu-1"
    assert hived(scene.made).allocator.by_pod.get("te-2") is None or hived(scene.made).allocator.by_pod["te-2"].node != "gpu-1"
