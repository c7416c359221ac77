"""No booking outlives its reason (issue 18): cells booked for pods that never come are given
back after a limit, with a notice for the pod's or the Job's Event. The engine is driven as the
watch cache and kube-scheduler drive it; ``now`` is the driver's clock, passed to each sweep."""

from __future__ import annotations

import json

from scheduler.cells import HivedEngine
from scheduler.cells.expiry import BookingReleased
from scheduler.core.model import JobInfo
from tests.cells.helpers import node_names, pod, rack_cluster, schedule
from scheduler.kube.names import filter_offered

NODES = node_names()  # 2 racks x 4 nodes x 8 GPUs, one implicit VC "default" owning them all


def engine(**limits: float | None) -> HivedEngine:
    config = rack_cluster()
    config.update({"unseenPodGraceSeconds": 10, "gangBookingTimeoutSeconds": 300, **limits})
    hived = HivedEngine.from_config(config)
    hived.expiry.pods_watched = True  # as when the watch cache feeds it
    return hived


def gang_pod(uid: str, size: int, gpus: int = 8, *, job: str = "train"):
    return pod(uid, gpus, None, gang=(job, size))


def booked_gpus(hived: HivedEngine) -> int:
    return sum(len(b.gpus) for b in hived.allocator.bookings.values())


def test_a_gang_pod_that_exists_nowhere_books_the_cluster_only_for_the_grace():
    hived = engine()
    phantom = gang_pod("phantom-0", 8)
    assert len(filter_offered(hived, phantom, NODES).feasible) == 1
    assert booked_gpus(hived) == 64
    refused = filter_offered(hived, pod("real", 8, None), NODES)
    assert not refused.feasible and "quota exhausted" in next(iter(refused.unresolvable.values()))
    assert hived.expire_bookings(100.0) == []  # the first sweep that sees it starts its time
    assert hived.expire_bookings(109.9) == []
    (released,) = hived.expire_bookings(110.0)
    assert released.kind == "Pod" and (released.namespace, released.name, released.uid) == ("ns", "phantom-0", "phantom-0")
    assert "a slot of gang ns/train (8 GPUs on node" in released.message
    assert "and with it the gang's other 7 slots" in released.message
    assert "within 10 s of the booking (cells.unseenPodGraceSeconds)" in released.message
    assert booked_gpus(hived) == 0 and hived.allocator.groups == {}
    assert schedule(hived, pod("real", 8, None), NODES) is not None


def test_a_pod_the_watch_shows_within_the_grace_keeps_its_booking():
    hived = engine()
    first = gang_pod("g-0", 2)
    filter_offered(hived, first, NODES)  # kube-scheduler was a moment ahead of the watch
    hived.expire_bookings(0.0)
    hived.apply_pod(first)  # pending, now seen
    hived.apply_pod(gang_pod("g-1", 2))
    assert hived.expire_bookings(1000.0) == []
    assert booked_gpus(hived) == 16 and "g-0" in hived.allocator.by_pod


def test_a_held_booking_for_a_pod_that_exists_nowhere_is_released():
    # A guaranteed pod waiting for its victims holds its cells; not one the cluster never had.
    hived = engine()
    for i, name in enumerate(NODES):
        running = pod(f"o{i}", 8, None, priority="opportunistic")
        hived.apply_pod(running)
        assert schedule(hived, running, [name]) is not None
    phantom = pod("phantom", 8, None)
    assert filter_offered(hived, phantom, NODES).failed
    assert hived.pending_preemptions() == {"phantom": ["o0"]}
    hived.expire_bookings(0.0)
    (released,) = hived.expire_bookings(10.0)
    assert released.name == "phantom" and "8 GPUs on node r0n0" in released.message
    assert hived.pending_preemptions() == {}


def test_without_a_watch_nothing_is_released_for_being_unseen():
    hived = HivedEngine.from_config(rack_cluster())  # standalone: kube-scheduler's calls are all there is
    filter_offered(hived, pod("lonely", 8, None, priority="opportunistic"), NODES)
    hived.reserve(pod("lonely", 8, None, priority="opportunistic"), "r0n0")
    hived.expire_bookings(0.0)
    assert hived.expire_bookings(10_000.0) == []
    assert "lonely" in hived.allocator.by_pod


def test_a_gang_larger_than_its_jobs_parallelism_is_refused_at_filter():
    hived = engine()
    hived.apply_job(JobInfo(uid="uid-train", namespace="ns", name="train", parallelism=2))
    first = gang_pod("g-0", 4)
    hived.apply_pod(first)
    decision = filter_offered(hived, first, NODES)
    assert not decision.feasible and not decision.failed
    assert set(decision.unresolvable.values()) == {
        "gang ns/train: annotation cellfit.io/gang-size is 4 but the Job runs at most 2 pods at once "
        "(spec.parallelism 2): the gang could never be complete (set it to 2)"
    }
    assert booked_gpus(hived) == 0
    # Scaled up to its gang-size, the Job's gang is placed.
    hived.apply_job(JobInfo(uid="uid-train", namespace="ns", name="train", parallelism=4))
    assert filter_offered(hived, first, NODES).feasible


def arrive(hived: HivedEngine, p):
    """A gang pod created, filtered and bound, as the watch and kube-scheduler report it."""
    hived.apply_pod(p)
    placed = schedule(hived, p, NODES)
    assert placed is not None
    hived.apply_pod(placed)
    return placed


def test_slots_of_gang_pods_that_never_come_are_released_after_the_timeout():
    # gang-size 4 on a Job that runs 2 pods (its Job not seen by the watch, so not refused).
    hived = engine()
    arrive(hived, gang_pod("g-0", 4))
    arrive(hived, gang_pod("g-1", 4))
    assert booked_gpus(hived) == 32
    assert hived.expire_bookings(50.0) == []
    assert hived.expire_bookings(349.0) == []
    (released,) = hived.expire_bookings(350.0)
    assert released == BookingReleased(
        kind="Job",
        namespace="ns",
        name="train",
        uid="uid-train",
        message="cellfit released the 2 slots (16 GPUs) booked for gang ns/train: 2 of its 4 pods came within 300 s "
        "(cells.gangBookingTimeoutSeconds); a pod that comes later is placed on its own",
    )
    assert booked_gpus(hived) == 16 and {"g-0", "g-1"} <= set(hived.allocator.by_pod)
    # A pod of the gang that comes after all gets a slot of its own.
    late = arrive(hived, gang_pod("g-2", 4))
    assert late.node_name in NODES and booked_gpus(hived) == 24


def test_a_gang_whose_pods_exist_keeps_its_slots():
    # All four pods exist (the watch shows them), two are held up before filter: their slots wait.
    hived = engine()
    for i in range(4):
        hived.apply_pod(gang_pod(f"g-{i}", 4))
    arrive(hived, gang_pod("g-0", 4))
    hived.expire_bookings(0.0)
    assert hived.expire_bookings(10_000.0) == []
    assert booked_gpus(hived) == 32
    # One of them is deleted and not replaced: the gang waits for it no longer than the timeout.
    hived.delete_pod("g-3")
    hived.expire_bookings(10_000.0)
    (released,) = hived.expire_bookings(10_300.0)
    assert "3 of its 4 pods came" in released.message and booked_gpus(hived) == 8


def test_a_deleted_jobs_free_slots_are_released_at_once():
    hived = engine()
    hived.apply_job(JobInfo(uid="uid-train", namespace="ns", name="train", parallelism=4))
    arrive(hived, gang_pod("g-0", 4))
    hived.delete_job("uid-train")
    assert booked_gpus(hived) == 8  # the placed pod keeps its GPUs until it is gone
    (released,) = hived.expire_bookings(0.0)
    assert (released.kind, released.name, released.uid) == ("Job", "train", "uid-train")
    assert released.message == "cellfit released the 3 slots (24 GPUs) booked for gang ns/train: its Job was deleted"
    hived.delete_pod("g-0")
    assert booked_gpus(hived) == 0 and hived.allocator.groups == {}


def test_slots_recovered_from_bind_info_wait_no_longer_than_the_timeout():
    # After a restart the first bound pod's bind-info re-books its three siblings' slots; if no
    # sibling ever comes (their pods were never created), they go after the timeout.
    before = engine()
    placed = arrive(before, gang_pod("g-0", 4))
    info = json.loads(placed.annotations["cellfit.io/bind-info"])
    assert len(info["gang"]["placements"]) == 4
    after = engine()
    after.apply_pod(placed)
    assert booked_gpus(after) == 32
    after.expire_bookings(0.0)
    (released,) = after.expire_bookings(300.0)
    assert "released the 3 slots (24 GPUs)" in released.message and booked_gpus(after) == 8


def test_the_limits_follow_a_live_reload():
    hived = engine()
    hived.reconfigure({"gangBookingTimeoutSeconds": None, "unseenPodGraceSeconds": 2})
    assert hived.expiry.limits.gang_booking_timeout_seconds is None
    arrive(hived, gang_pod("g-0", 4))
    hived.expire_bookings(0.0)
    assert hived.expire_bookings(1e9) == []  # null: the gang keeps its slots
    filter_offered(hived, gang_pod("phantom", 1, job="other"), NODES)
    hived.expire_bookings(1e9)
    (released,) = hived.expire_bookings(1e9 + 2)
    assert released.name == "phantom" and "within 2 s" in released.message
