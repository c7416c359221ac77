"""the room-kept rule (c2d8939) keeps a preemptor waiting for a node kube-scheduler refuses.

After its victim on n1 has left, the trial pod's hold node n1 is cordoned (or goes NotReady).
kube-scheduler's NodeUnschedulable filter turns n1 away for good, so it asks the preempt verb
with n2 only. FitGppEngine._room_kept still answers "its room on node n1 is kept for it" because
it checks only the free room and the hold, not whether a pod can land on n1 (the node index
knows it: NodeIndex._usable = ready and not unschedulable). The trial pod then waits the whole
resume_hold_seconds (120 s by default) for nothing, and with resume_hold_seconds null (config:
"until that pod is bound") for ever.
"""

from __future__ import annotations

from scheduler.core.model import NodeInfo

from tests.preemption.test_engine import NODE
from tests.preemption.test_holds import FakeClock
from tests.preemption.test_preemptor_hold_offers import N2_CANDIDATES, preempting_on_n1


def test_a_cordoned_hold_node_does_not_keep_the_preemptor_waiting() -> None:
    engine, preemptor = preempting_on_n1(clock=FakeClock(), hold_seconds=120)
    engine.delete_pod("be-short")  # its victim left
    engine.apply_node(NodeInfo(name="n1", allocatable=NODE.allocatable, unschedulable=True))  # kubectl cordon n1
    choice = engine.decide_preemption(preemptor, N2_CANDIDATES, {})
    assert choice.victims == {"n2": ["d-short"]}, choice.refusal


def test_a_not_ready_hold_node_does_not_keep_the_preemptor_waiting_for_ever() -> None:
    engine, preemptor = preempting_on_n1()  # resume_hold_seconds null: the hold waits until bound
    engine.delete_pod("be-short")
    engine.apply_node(NodeInfo(name="n1", allocatable=NODE.allocatable, ready=False))
    choice = engine.decide_preemption(preemptor, N2_CANDIDATES, {})
    assert choice.victims == {"n2": ["d-short"]}, choice.refusal


def test_hived_a_cordoned_hold_node_with_the_cells_booked_does_not_keep_the_preemptor_waiting() -> None:
    """Under HiveD (team-a: 2 node cells, be-1 on gpu-0, te-2's cells booked on gpu-1 once its
    victims left): gpu-1 is cordoned, kube-scheduler offers gpu-0 with be-1. te-2 is answered
    'its room on node gpu-1 is kept' (and HiveD's select_victims answers {} for a claim with a
    booking) for as long as the hold lasts: for ever with resume_hold_seconds null."""
    from tests.cells.helpers import node
    from tests.preemption.test_hived_preemptor_quota_hold import Scene

    scene = Scene()  # no clock: resume_hold_seconds null
    scene.victims_leave()
    scene.made.apply_node(node("gpu-1", unschedulable=True))
    choice = scene.made.decide_preemption(scene.te2, {"gpu-0": ["be-1"]}, {})
    assert choice.victims == {"gpu-0": ["be-1"]}, choice.refusal
