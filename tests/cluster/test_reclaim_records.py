"""The reclaim's booking recorded on the pending pod (annotation cellfit.io/reclaim-booking), so
that every replica's engine keeps the cells the leader deletes victims for: written before any
deletion, applied by each replica's pod watch, dropped when the record, the pod or its binding
says so, and given back by whichever replica leads. On the real HivedEngine and pod record of
tests/cluster/test_stranded.py, two of them standing for two replicas."""

from __future__ import annotations

import json
import threading
from typing import Any

import msgspec
import pytest

from scheduler.cells import HivedEngine
from scheduler.cluster.cache import ClusterCache
from scheduler.constants import ANNOTATION_BIND_INFO, ANNOTATION_RECLAIM_BOOKING
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.pods import PodStore
from scheduler.errors import KubernetesApiError
from scheduler.kube import translate, wire
from scheduler.cluster.stranded import KUBE_SCHEDULER_RETRY_SECONDS as RETRY
from tests.cells.helpers import pod, schedule, snapshot
from tests.cluster.test_reclaim import Cluster as WaitingCluster
from tests.cluster.test_reclaim_adversarial import shows, victims_gone
from tests.cluster.test_stranded import AFTER, NODES, Cluster, gang_members
from tests.support.api_double import ListingApi
from tests.support.kube_objects import node as node_body, pod as pod_body
from scheduler.kube.names import filter_offered

REFUSED = KubernetesApiError("patch pod ns/g: Kubernetes API unreachable: connection reset", status=None)


def booked(cluster: Cluster) -> tuple[Cluster, str, str]:
    """The leader books g's cells and deletes its victim; (the leader, the record, the victim)."""
    cluster.look_at(0)
    (victim,) = cluster.look_at(AFTER)
    record = cluster.api.recorded("g")
    assert record is not None
    return cluster, record, victim


def gpus_of(cluster: Cluster, uid: str = "g") -> tuple[str | None, list[int]] | None:
    booking = cluster.engine.allocator.by_pod.get(uid)
    return None if booking is None else (booking.node, booking.gpu_indices)


def ignored(cluster: Cluster) -> list[str]:
    return [note for note in cluster.engine.allocator.anomalies if ANNOTATION_RECLAIM_BOOKING in note]


# ------------------------------------------------------------------ the leader's write


def test_a_record_that_cannot_be_written_deletes_nothing_and_keeps_nothing_booked():
    cluster = Cluster()
    before = snapshot(cluster.engine)
    cluster.api.refuse_records = REFUSED
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == []
    assert snapshot(cluster.engine) == before  # no cells the other replicas would not keep
    cluster.api.refuse_records = None
    cluster.look_at(AFTER + 5)
    assert cluster.api.writes == []  # tried again once its wait has passed again
    deleted = cluster.look_at(2 * AFTER)
    assert len(deleted) == 1 and cluster.api.calls[0] == "record g" and cluster.api.recorded("g") is not None


def test_the_leader_records_a_hold_its_filter_made_before_deleting_for_it():
    cluster = WaitingCluster(opportunistic_priority=1000)
    cluster.look_at(0)
    cluster.api.refuse_records = REFUSED
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == []
    cluster.api.refuse_records = None
    assert cluster.look_at(AFTER + 5) == [cluster.victim]
    assert cluster.api.calls == ["record g", f"condition {cluster.victim}", f"delete {cluster.victim}"]
    assert cluster.api.recorded("g") == cluster.engine.reclaim_record("g")


def test_a_record_the_watch_has_not_shown_yet_is_not_written_twice():
    cluster, record, _ = booked(Cluster(per_node=2))  # g's 4 GPUs: one victim of the two on the node
    cluster.look_at(AFTER + 5)
    assert cluster.api.records == [("g", record)]


# ------------------------------------------------------------------ every replica's engine


def test_a_replica_keeps_exactly_the_gpus_the_leader_booked():
    leader, record, _ = booked(Cluster())
    serving = Cluster()
    shows(serving, record=record)
    assert gpus_of(serving) == gpus_of(leader) and serving.engine.waiting_guarantees() == leader.engine.waiting_guarantees()


def test_a_record_that_goes_gives_the_cells_back_on_every_replica():
    leader, record, _ = booked(Cluster())
    serving = Cluster()
    before = snapshot(serving.engine)
    shows(serving, record=record)
    assert gpus_of(serving) is not None
    shows(serving, record=None)
    assert snapshot(serving.engine) == before


def test_a_deleted_pod_or_one_bound_elsewhere_keeps_nothing():
    leader, record, _ = booked(Cluster())
    for outcome in ("deleted", "bound elsewhere"):
        serving = Cluster()
        before = snapshot(serving.engine)
        g = shows(serving, record=record)
        assert gpus_of(serving) is not None
        if outcome == "deleted":
            serving.engine.delete_pod("g")
            assert snapshot(serving.engine) == before
        else:
            elsewhere = next(name for name in ("r0n0", "r0n1") if name != leader.booked_node())
            victims_gone(serving, serving.on(elsewhere))  # another scheduler's binding, on cells freed since
            serving.engine.apply_pod(msgspec.structs.replace(g, node_name=elsewhere, phase="Running"))
            assert gpus_of(serving) == (elsewhere, [0, 1, 2, 3])


def test_cells_the_leader_gives_back_at_kube_schedulers_retry_are_given_back_on_every_replica():
    leader, record, victim = booked(Cluster())
    serving = Cluster()
    victims_gone(serving, [victim])
    before = snapshot(serving.engine)
    for replica in (leader, serving):
        shows(replica, record=record)
    victims_gone(leader, [victim])
    leader.look_at(AFTER + 10)
    leader.look_at(AFTER + 10 + RETRY)
    assert not leader.engine.has_booking(leader.g) and leader.api.records[-1] == ("g", None)  # cleared with the give-back
    shows(serving, record=None)
    assert snapshot(serving.engine) == before


def test_a_record_not_cleared_is_cleared_at_a_later_round():
    leader, record, victim = booked(Cluster())
    shows(leader, record=record)
    victims_gone(leader, [victim])
    leader.look_at(AFTER + 10)
    leader.api.refuse_records = REFUSED
    leader.look_at(AFTER + 10 + RETRY)
    assert not leader.engine.has_booking(leader.g) and leader.api.recorded("g") == record
    leader.api.refuse_records = None
    leader.look_at(AFTER + 15 + RETRY)
    assert leader.api.records[-1] == ("g", None)
    leader.look_at(AFTER + 20 + RETRY)
    assert leader.api.records.count(("g", None)) == 1


def test_a_new_leader_gives_back_what_the_former_leader_booked():
    former, record, victim = booked(Cluster())
    successor = Cluster()  # its own reclaim driver, started when it takes the Lease
    shows(successor, record=record)
    victims_gone(successor, [victim])
    successor.look_at(AFTER + 10)  # g is unschedulable and recorded: its give-back is this leader's now
    assert successor.engine.has_booking(successor.g) and successor.api.writes == []
    successor.look_at(AFTER + 10 + RETRY - 1)
    assert successor.engine.has_booking(successor.g)
    successor.look_at(AFTER + 10 + RETRY)
    assert not successor.engine.has_booking(successor.g) and successor.api.records == [("g", None)]
    assert [e["reason"] for e in successor.api.events] == ["BookingReleased"]


# ------------------------------------------------------------------ records not kept


def test_a_record_that_does_not_read_is_ignored_naming_the_pod_and_the_field():
    serving = Cluster()
    before = snapshot(serving.engine)
    told: list[str] = []
    serving.engine._on_change = told.append
    shows(serving, record='{"version": 1, "node": ')
    assert snapshot(serving.engine) == before and told == ignored(serving)
    (note,) = told
    assert "pod ns/g" in note and "annotation cellfit.io/reclaim-booking does not read (is not JSON)" in note


# A record naming what it may not: edited by hand, or forged (the chart's statePolicy refuses
# anyone but cellfit writing it), it must book nothing, least of all another VC's cells.
@pytest.mark.parametrize("field, value, said", [
    ("node", "gpu-99", "names node 'gpu-99', which has no HiveD cells"),
    ("vc", "b", "names virtual cluster 'b' for a guaranteed pod of 'a'"),
    ("priority", "opportunistic", "names priority 'opportunistic': only guaranteed pods have cells reclaimed"),
    ("gpuIndices", [0, 1], "names 2 GPUs but the pod requests 4"),
])
def test_a_record_that_is_not_the_pods_is_ignored_naming_it(field: str, value: object, said: str):
    leader, record, _ = booked(Cluster())
    serving = Cluster()
    before = snapshot(serving.engine)
    shows(serving, record=json.dumps({**json.loads(record), field: value}))
    assert snapshot(serving.engine) == before
    (note,) = ignored(serving)
    assert note.startswith("pod ns/g: annotation cellfit.io/reclaim-booking ") and said in note, note


def test_a_record_that_no_longer_fits_is_ignored_and_keeps_nothing():
    leader, record, _ = booked(Cluster())
    node = leader.booked_node()
    assert node is not None
    serving = Cluster()
    other = serving.cellfits(pod("g2", 4, "a"), cores=1)
    serving.pods.record(other)
    assert serving.engine.book_reclaim(other, among=[node]) is not None  # another guaranteed pod holds those GPUs here
    assert gpus_of(serving, "g2") == gpus_of(leader)
    before = snapshot(serving.engine)
    shows(serving, record=record)
    assert snapshot(serving.engine) == before and not serving.engine.has_booking(serving.g)
    (note,) = ignored(serving)
    assert "pod ns/g" in note and "no longer fit" in note


def test_the_same_record_again_changes_nothing_the_replica_decided_since():
    # The replica's filter moved g's hold to cells freed since (no victims): the next watch
    # event of g, with the same record, must not book the recorded cells again.
    leader, record, _ = booked(Cluster())
    serving = Cluster()
    g = shows(serving, record=record)
    free = next(name for name in ("r0n0", "r0n1", "r0n2", "r0n3") if name != leader.booked_node())
    (squatter,) = serving.on(free)
    serving.engine.delete_pod(squatter)
    serving.pods.forget(squatter)
    decision = filter_offered(serving.engine, g, [free])
    assert decision.feasible == [free] and not serving.engine.has_booking(g)
    serving.engine.apply_pod(g)
    assert not serving.engine.has_booking(g)


# ------------------------------------------------------------------ a restarted replica


def pod_info(body: dict[str, Any]) -> PodInfo:
    return translate.pod_info(wire.POD_DECODER.decode(json.dumps(body)), gpu_resource="nvidia.com/gpu")


def node_info(body: dict[str, Any]) -> NodeInfo:
    return translate.node_info(wire.NODE_DECODER.decode(json.dumps(body)), gpu_resource="nvidia.com/gpu")


def test_a_restarted_replica_recovers_the_record_before_serving_and_after_the_running_pods():
    """The relist brings a pending pod before the running ones (its position in the list): a
    stale record naming the GPUs a running guaranteed pod holds must not take them from it."""
    names = ["gpu-1", "gpu-2"]
    nodes = [node_body(name) for name in names]
    first = HivedEngine.from_nodes([node_info(body) for body in nodes])
    for body in nodes:
        first.apply_node(node_info(body))
    running = pod_body("run-0", uid="uid-run", gpus=4, node_name="gpu-1", phase="Running")
    placed = schedule(first, pod_info(running), ["gpu-1"])
    assert placed is not None
    running["metadata"]["annotations"] = dict(placed.annotations)
    # The pending pod's record names the same GPUs (written before the running pod got them).
    stale = pod_body("wait-0", uid="uid-wait", gpus=4, annotations={ANNOTATION_RECLAIM_BOOKING: placed.annotations[ANNOTATION_BIND_INFO]})
    restarted = HivedEngine.from_nodes([node_info(body) for body in nodes])
    cache = ClusterCache(api=ListingApi(nodes=nodes, pods=[stale, running]), engine=restarted, lock=threading.RLock(),  # type: ignore[arg-type]
                         gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=None)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    assert restarted.allocator.by_pod["uid-run"].gpu_indices == json.loads(placed.annotations[ANNOTATION_BIND_INFO])["gpuIndices"]
    assert "uid-wait" not in restarted.allocator.by_pod
    assert any("ml/wait-0" in note and ANNOTATION_RECLAIM_BOOKING in note for note in restarted.allocator.anomalies)


def test_a_restarted_replica_keeps_the_recorded_cells_from_its_first_list():
    leader, record, _ = booked(Cluster())
    restarted = Cluster()  # its engine rebuilt from the list: the running pods, then g with its record
    shows(restarted, record=record)
    assert gpus_of(restarted) == gpus_of(leader)


def test_a_record_whose_cell_the_virtual_cluster_has_no_quota_left_for_is_ignored():
    # Here VC a's one rack is bound already, around another pod's cells: the record's rack,
    # free here, would be a second (its quota and Theorem 1's invariant are the planner's).
    leader, record, _ = booked(Cluster())
    recorded_rack = json.loads(record)["node"][:2]
    serving = Cluster()
    other = serving.cellfits(pod("g2", 4, "a"), cores=1)
    serving.pods.record(other)
    assert serving.engine.book_reclaim(other, among=[name for name in NODES if not name.startswith(recorded_rack)]) is not None
    before = snapshot(serving.engine)
    shows(serving, record=record)
    assert snapshot(serving.engine) == before and not serving.engine.has_booking(serving.g)
    (note,) = ignored(serving)
    assert "no longer fit" in note


def test_a_replica_keeps_each_gang_members_slot_as_the_leader_booked_it():
    leader, serving = Cluster(), Cluster()
    for replica in (leader, serving):
        gang_members(replica, 2)
    leader.look_at(0)
    assert leader.look_at(AFTER)
    records = {uid: leader.api.recorded(uid) for uid in ("g0", "g1")}
    for uid, record in records.items():
        assert record is not None
        shows(serving, record=record, uid=uid)
    assert ignored(serving) == []
    assert {uid: gpus_of(serving, uid) for uid in records} == {uid: gpus_of(leader, uid) for uid in records}
    assert serving.engine.waiting_guarantees() == leader.engine.waiting_guarantees()
