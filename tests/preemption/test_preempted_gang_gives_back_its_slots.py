"""F14 (user24): after a trial pod preempted a gang member, HiveD re-booked the gang's slot on the
victim's node for the member's replacement, and that booking and the trial's preemptor hold on
the same node blocked each other for ever (8 GPUs idle, the trial never ran). With the gang taken
whole (F6), no booking of the preempted gang outlives the preemption: its slots are given back
as its pods leave, so the preemptor gets the cells it preempted for and binds; the gang's next
pods plan the gang afresh.

FitGppEngine around the real HivedEngine: two 8-GPU nodes, vc-a's quota both; the best-effort
gang ns/gang-x (2 x 8 GPUs) fills them; the trial pod te-g of vc-a asks for 8 GPUs."""

from __future__ import annotations

import msgspec

from scheduler.cells import HivedEngine
from scheduler.core.model import Disruption, JobInfo, PodInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import node, pod, schedule
from tests.preemption.test_fitgpp_takes_gangs_whole import config, trial

NODES = ["n-a", "n-b"]


def scene() -> tuple[FitGppEngine, list[PodInfo]]:
    engine = FitGppEngine(HivedEngine.from_config(config(NODES)), settings=FitGppSettings())
    for name in NODES:
        engine.apply_node(node(name))
    running = []
    for index in range(2):
        placed = schedule(engine, pod(f"gang-x-{index}", 8, "vc-a", gang=("gang-x", 2)), NODES)  # type: ignore[arg-type]
        assert placed is not None
        running.append(msgspec.structs.replace(placed, phase="Running"))
        engine.apply_pod(running[-1])
    return engine, running


def test_the_preemptor_binds_on_the_node_the_whole_gang_left() -> None:
    engine, running = scene()
    te = trial("te-g")
    choice = engine.decide_preemption(te, {running[0].node_name or "": [running[0].uid]}, {})
    (node_name,) = choice.victims
    assert set(choice.victim_uids) == {"gang-x-0", "gang-x-1"}
    for member in running:  # kube-scheduler deletes one, cellfit the other; both exit
        engine.apply_pod(msgspec.structs.replace(member, terminating=True))
        engine.delete_pod(member.uid)
    # The gang's replacement pods come back pending (its Job's controller) before the preemptor is retried.
    engine.apply_pod(pod("gang-x-0-new", 8, "vc-a", gang=("gang-x", 2)))
    decision = filter_offered(engine, te, NODES)
    assert list(decision.feasible) == [node_name], decision
    placement = engine.reserve(te, node_name)
    assert placement.node_name == node_name


def test_the_gangs_replacement_is_not_placed_on_the_preemptors_node() -> None:
    engine, running = scene()
    te = trial("te-g")
    choice = engine.decide_preemption(te, {running[0].node_name or "": [running[0].uid]}, {})
    (node_name,) = choice.victims
    for member in running:
        engine.delete_pod(member.uid)
    again = pod("gang-x-0-new", 8, "vc-a", gang=("gang-x", 2))
    assert node_name not in list(filter_offered(engine, again, NODES).feasible)


def test_no_slot_of_the_gang_is_left_for_its_replacement_while_another_member_still_leaves() -> None:
    engine, running = scene()
    te = trial("te-g")
    choice = engine.decide_preemption(te, {running[0].node_name or "": [running[0].uid]}, {})
    (node_name,) = choice.victims
    answered = next(m for m in running if m.node_name == node_name)
    other = next(m for m in running if m.node_name != node_name)
    engine.apply_pod(msgspec.structs.replace(other, terminating=True))  # deleted by cellfit, still in its grace period
    engine.delete_pod(answered.uid)  # kube-scheduler's victim is gone first
    again = pod("gang-x-0-new", 8, "vc-a", gang=("gang-x", 2))
    assert list(filter_offered(engine, again, NODES).feasible) == []  # no slot of the old gang to take, the gang waits whole
    assert list(filter_offered(engine, te, NODES).feasible) == [node_name]
    engine.reserve(te, node_name)
    engine.delete_pod(other.uid)
    hived = engine.inner
    assert isinstance(hived, HivedEngine)
    assert "uid-gang-x" not in hived.allocator.groups
    assert not [b for b in hived.allocator.bookings.values() if b.group is not None and b.group.key == "uid-gang-x"]


def test_a_restart_while_a_member_still_leaves_gives_the_gangs_slots_back_too() -> None:
    engine, running = scene()
    te = trial("te-g")
    choice = engine.decide_preemption(te, {running[0].node_name or "": [running[0].uid]}, {})
    (node_name,) = choice.victims
    other = next(m for m in running if m.node_name != node_name)
    # A restart: the answered member is gone; the other, marked as cellfit marks it, still terminates.
    restarted = FitGppEngine(HivedEngine.from_config(config(NODES)), settings=FitGppSettings())
    for name in NODES:
        restarted.apply_node(node(name))
    said = choice.victim_messages()[other.uid]
    restarted.apply_job(JobInfo(uid="uid-gang-x", namespace="ns", name="gang-x", parallelism=2, completions=2,
                                 annotations={"cellfit.io/preemptions": "1"}))
    restarted.apply_pod(msgspec.structs.replace(
        other, terminating=True, disruption=Disruption(reason="PreemptionByScheduler", message=f"cellfit: {said}")))
    again = pod("gang-x-0-new", 8, "vc-a", gang=("gang-x", 2))
    assert list(filter_offered(restarted, again, NODES).feasible) == []
    assert list(filter_offered(restarted, te, NODES).feasible) == [node_name]
