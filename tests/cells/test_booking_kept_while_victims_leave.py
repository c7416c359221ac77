"""A booking whose victims are leaving is kept when kube-scheduler does not offer its node.

kube-scheduler's own resource fit counts a terminating victim's GPUs until it is gone, so it
leaves the booked node out of its offers exactly while the victims there leave. HiveD keeps the
cells for the pod then (no node feasible, the reason names the victims it waits for) instead of
booking cells elsewhere with more victims; it places the pod anew only once those victims are
gone, or once they have taken longer than their grace period and a margin (expiry.py). The
engine is driven as kube-scheduler and the watch drive it; ``now`` is the sweeper's clock."""

from __future__ import annotations

import time
from typing import Callable

from msgspec.structs import replace

from scheduler.cells import HivedEngine
from scheduler.cells.freeing import FREED_CELL_WAIT_SECONDS
from scheduler.constants import ANNOTATION_RECLAIM_BOOKING
from scheduler.core.model import PodInfo
from tests.cells.helpers import bound, pod, rack_cluster, schedule
from scheduler.kube.names import NamedDecision, filter_offered
from tests.cells.test_no_reclaim_just_after_vc_cells_freed import Clock

MARGIN = 60.0  # BookingLimits.victim_exit_margin_seconds


def full_of_opportunistic_pods(
    nodes: int = 2, *, owned: int = 1, clock: Callable[[], float] = time.monotonic
) -> tuple[HivedEngine, list[str]]:
    """A rack of ``nodes`` 8-GPU nodes; VCs a and b own ``owned`` node cells each, and b's
    opportunistic 8-GPU pods o0.. fill every node."""
    vcs = {"a": [{"cellType": "V100-NODE", "count": owned}], "b": [{"cellType": "V100-NODE", "count": owned}]}
    engine = HivedEngine.from_config(rack_cluster(racks=1, nodes_per_rack=nodes, vcs=vcs), clock=clock)
    names = [f"r0n{n}" for n in range(nodes)]
    for i in range(nodes):
        running = schedule(engine, pod(f"o{i}", 8, "b", priority="opportunistic"), names)
        assert running is not None
        engine.apply_pod(running)
    return engine, names


def victim_on(engine: HivedEngine, node: str) -> PodInfo:
    """The opportunistic pod running on ``node``, as the watch shows it."""
    (uid,) = [uid for uid, booking in engine.allocator.by_pod.items() if booking.node == node and uid.startswith("o")]
    return bound(pod(uid, 8, "b", priority="opportunistic"), node, {})


def booked_node(engine: HivedEngine, uid: str) -> str | None:
    return engine.booked_nodes().get(uid)


def reasons(decision: NamedDecision) -> set[str]:
    return set(decision.failed.values()) | set(decision.unresolvable.values())


def booking_with_victim(engine: HivedEngine, names: list[str], g: PodInfo) -> tuple[str, str]:
    """g's filter books a node with one victim, which nobody deletes yet: (the booked node,
    another one)."""
    booked = next(iter(filter_offered(engine, g, names).failed))
    return booked, next(n for n in names if n != booked)


def preempting(engine: HivedEngine, names: list[str], g: PodInfo) -> tuple[str, str]:
    """:func:`booking_with_victim`, and kube-scheduler's preemption takes the victim."""
    booked, other = booking_with_victim(engine, names, g)
    (victim,) = engine.select_victims(g, {n: ["x"] for n in names}, {})[booked]
    assert victim_on(engine, booked).uid == victim
    return booked, other


def test_victims_handed_to_preemption_keep_the_booking_off_the_offered_nodes():
    engine, names = full_of_opportunistic_pods()
    g = pod("g", 8, "a")
    booked, other = preempting(engine, names, g)
    waited_for = engine.pending_preemptions()
    decision = filter_offered(engine, g, [other])
    assert not decision.feasible and not decision.failed  # no preemption helps on the node offered
    victim = victim_on(engine, booked)
    assert reasons(decision) == {
        f"HiveD keeps this pod's cells on node {booked}: waiting for the opportunistic pods there (ns/{victim.uid}) to leave"
    }
    assert booked_node(engine, "g") == booked and engine.pending_preemptions() == waited_for
    assert engine.select_victims(g, {other: ["x"]}, {}) == {}  # nobody on the other node is preempted for g
    engine.delete_pod(victim.uid)  # its grace period is over
    assert list(filter_offered(engine, pod("next", 8, "a"), names).feasible) == []  # the room freed stays g's
    assert list(filter_offered(engine, g, names).feasible) == [booked]


def test_victims_the_watch_shows_terminating_keep_the_booking():
    # Another replica's kube-scheduler preempted them: this replica learns it from the watch.
    engine, names = full_of_opportunistic_pods()
    g = pod("g", 8, "a")
    booked, other = booking_with_victim(engine, names, g)
    engine.apply_pod(replace(victim_on(engine, booked), terminating=True))
    assert not filter_offered(engine, g, [other]).failed
    assert booked_node(engine, "g") == booked


def test_a_booking_whose_victims_nobody_deletes_follows_the_offered_nodes():
    engine, names = full_of_opportunistic_pods()
    g = pod("g", 8, "a")
    booked, other = booking_with_victim(engine, names, g)
    assert list(filter_offered(engine, g, [other]).failed) == [other]
    assert booked_node(engine, "g") == other


def test_once_the_victims_are_gone_a_node_left_out_is_kube_schedulers_verdict():
    # Past kube-scheduler's cache lag: until then the node is left out because its cache still
    # counts the victims (freeing.py JustFreed; review28 #1), and no second victim is taken.
    clock = Clock()
    engine, names = full_of_opportunistic_pods(clock=clock)
    g = pod("g", 8, "a")
    booked, other = preempting(engine, names, g)
    engine.delete_pod(victim_on(engine, booked).uid)
    assert not filter_offered(engine, g, [other]).failed  # its cells freed just now: no victim on the other node
    clock.now += FREED_CELL_WAIT_SECONDS
    assert list(filter_offered(engine, g, [other]).failed) == [other]  # placed anew on the nodes offered
    assert booked_node(engine, "g") == other


def test_a_victim_that_never_leaves_keeps_the_booking_only_for_its_grace_period_and_the_margin():
    engine, names = full_of_opportunistic_pods()
    g = pod("g", 8, "a")
    booked, other = booking_with_victim(engine, names, g)
    stuck = replace(victim_on(engine, booked), grace_period_seconds=120, terminating=True)
    engine.apply_pod(stuck)  # terminating behind a finalizer that never goes
    assert not filter_offered(engine, g, [other]).failed
    assert engine.expire_bookings(1000.0) == []  # the first sweep after the first wait starts its time
    assert engine.expire_bookings(1000.0 + 120 + MARGIN - 0.5) == []
    assert not filter_offered(engine, g, [other]).failed and booked_node(engine, "g") == booked
    assert engine.expire_bookings(1000.0 + 120 + MARGIN) == []  # nothing released: kept no longer
    assert booked_node(engine, "g") == booked  # still there for an offer of its node
    assert any(note.startswith("pod ns/g: ") and f"were kept {120 + MARGIN:g} s" in note and "kept no longer" in note
               for note in engine.allocator.anomalies)
    assert list(filter_offered(engine, g, [other]).failed) == [other]
    assert booked_node(engine, "g") == other
    # The new booking's own victim leaves in turn: its wait starts afresh.
    engine.select_victims(g, {other: ["x"]}, {})
    assert not filter_offered(engine, g, [booked]).failed and booked_node(engine, "g") == other


def test_a_kept_pod_takes_cells_freed_on_an_offered_node_without_victims():
    engine, names = full_of_opportunistic_pods(4, owned=2)
    g = pod("g", 8, "a")
    booked, free = preempting(engine, names, g)
    engine.delete_pod(victim_on(engine, free).uid)  # an opportunistic pod elsewhere finished
    assert list(filter_offered(engine, g, [free]).feasible) == [free]
    engine.reserve(g, free)
    assert booked_node(engine, "g") == free


# ------------------------------------------------------------------ gangs


def gang_pod(uid: str) -> PodInfo:
    return pod(uid, 8, "a", gang=("train", 2))


def test_a_gang_members_slot_is_kept_while_its_victims_leave():
    # Before, the only member left its slot and with it the gang's booking: the whole gang was
    # planned anew on the nodes offered, with new victims.
    engine, names = full_of_opportunistic_pods(4, owned=2)
    first = gang_pod("t-0")
    booked = next(iter(filter_offered(engine, first, names).failed))
    slots = {slot.id: slot.node for slot in engine.allocator.groups["uid-train"].slots}
    engine.select_victims(first, {n: ["x"] for n in names}, {})
    decision = filter_offered(engine, first, [n for n in names if n != booked])
    assert not decision.feasible and not decision.failed
    assert any(f"cells on node {booked}: waiting for the opportunistic pods there" in reason for reason in reasons(decision))
    assert booked_node(engine, "t-0") == booked
    assert {slot.id: slot.node for slot in engine.allocator.groups["uid-train"].slots} == slots


def test_a_gangs_free_slot_whose_victims_leave_is_not_moved_for_another_member():
    engine, names = full_of_opportunistic_pods(4, owned=2)
    first, second = gang_pod("t-0"), gang_pod("t-1")
    taken = next(iter(filter_offered(engine, first, names).failed))
    group = engine.allocator.groups["uid-train"]
    (free,) = [slot.node for slot in group.slots if slot.pod_uid is None]
    assert free is not None
    engine.apply_pod(replace(victim_on(engine, free), terminating=True))  # preempted for the gang elsewhere
    slots = {slot.id: slot.node for slot in group.slots}
    elsewhere = [n for n in names if n not in (taken, free)]
    decision = filter_offered(engine, second, elsewhere)
    assert not decision.feasible and not decision.failed
    assert any(f"cells of a slot of gang ns/train on node {free}: waiting for the opportunistic pods there" in reason for reason in reasons(decision))
    assert {slot.id: slot.node for slot in group.slots} == slots
    assert list(filter_offered(engine, second, [free]).failed) == [free]  # offered its slot's node: it takes the slot


def test_a_gang_members_slot_is_planned_anew_once_its_wait_runs_out():
    engine, names = full_of_opportunistic_pods(4, owned=2)
    first = gang_pod("t-0")
    booked = next(iter(filter_offered(engine, first, names).failed))
    engine.select_victims(first, {n: ["x"] for n in names}, {})
    elsewhere = [n for n in names if n != booked]
    assert not filter_offered(engine, first, elsewhere).failed
    engine.expire_bookings(0.0)
    engine.expire_bookings(30 + MARGIN)  # the victims' default grace period, and the margin
    assert list(filter_offered(engine, first, elsewhere).failed) != []
    assert booked_node(engine, "t-0") in elsewhere


# ------------------------------------------------------------------ HiveD's reclaim


def test_cells_the_leaders_reclaim_booked_are_kept_off_the_offered_nodes():
    engine, names = full_of_opportunistic_pods()
    g = pod("g", 8, "a")
    waiting = engine.book_reclaim(g, among=names)
    assert waiting is not None and waiting.node is not None
    other = next(n for n in names if n != waiting.node)
    assert not filter_offered(engine, g, [other]).failed
    assert booked_node(engine, "g") == waiting.node


def test_a_replica_keeps_the_recorded_cells_off_the_offered_nodes():
    leader, names = full_of_opportunistic_pods()
    g = pod("g", 8, "a")
    waiting = leader.book_reclaim(g, among=names)
    record = leader.reclaim_record("g")
    assert waiting is not None and record is not None
    replica, _ = full_of_opportunistic_pods()
    replica.apply_pod(replace(g, annotations={**g.annotations, ANNOTATION_RECLAIM_BOOKING: record}))
    assert booked_node(replica, "g") == waiting.node
    other = next(n for n in names if n != waiting.node)
    assert not filter_offered(replica, g, [other]).failed
    assert booked_node(replica, "g") == waiting.node
