"""The reclaim's booking recorded on a pending pod (annotation cellfit.io/reclaim-booking) is
cleared once the pod is bound (life28 #3). Every replica's engine reads the record only while
the pod is pending; once bound its cells are kept by its node and bind-info. Before, the leader
kept the record in line for pending pods only, and a bound pod carried it for the rest of its
life, naming in ``kubectl describe`` cells it no longer waited for. On the real HivedEngine and
pod record of tests/cluster/test_stranded.py."""

from __future__ import annotations

import msgspec

from scheduler.errors import KubernetesApiError
from tests.cluster.test_reclaim_adversarial import shows, victims_gone
from tests.cluster.test_stranded import AFTER, Cluster

REFUSED = KubernetesApiError("patch pod ns/g: Kubernetes API unreachable: connection reset", status=None)


def bound_after_its_reclaim(cluster: Cluster) -> tuple[str, str]:
    """The leader books g's cells, records them on g, deletes the victim; the victim leaves and
    g is bound where it was booked. (the node, the record)"""
    cluster.look_at(0)
    (victim,) = cluster.look_at(AFTER)
    record, node = cluster.api.recorded("g"), cluster.booked_node()
    assert record is not None and node is not None
    g = shows(cluster, record=record)
    victims_gone(cluster, [victim])
    bound = msgspec.structs.replace(g, node_name=node, phase="Running")
    cluster.pods.record(bound)
    cluster.engine.apply_pod(bound)
    return node, record


def test_the_record_is_cleared_once_the_pod_is_bound_and_its_cells_stay() -> None:
    cluster = Cluster()
    node, record = bound_after_its_reclaim(cluster)
    cluster.look_at(AFTER + 10)
    assert cluster.api.records == [("g", record), ("g", None)]
    booking = cluster.engine.allocator.by_pod["g"]
    assert booking.node == node and len(booking.gpu_indices) == 4  # what the pod runs on is kept
    shows(cluster, record=None)  # the watch shows the write
    cluster.look_at(AFTER + 15)
    assert cluster.api.records == [("g", record), ("g", None)]  # cleared once


def test_a_new_leader_clears_the_record_a_former_one_left_on_a_bound_pod() -> None:
    former = Cluster()
    node, record = bound_after_its_reclaim(former)
    successor = Cluster()  # its watch shows g bound, carrying the record
    g = shows(successor, record=record)
    bound = msgspec.structs.replace(g, node_name=node, phase="Running")
    successor.pods.record(bound)
    successor.look_at(0)
    assert successor.api.records == [("g", None)]


def test_a_clear_that_fails_is_tried_again_next_round() -> None:
    cluster = Cluster()
    _, record = bound_after_its_reclaim(cluster)
    cluster.api.refuse_records = REFUSED
    cluster.look_at(AFTER + 10)
    assert cluster.api.recorded("g") == record
    cluster.api.refuse_records = None
    cluster.look_at(AFTER + 15)
    assert cluster.api.records[-1] == ("g", None)


def test_a_pending_pod_keeps_its_record() -> None:
    cluster = Cluster()
    cluster.look_at(0)
    cluster.look_at(AFTER)
    record = cluster.api.recorded("g")
    assert record is not None
    shows(cluster, record=record)
    cluster.look_at(AFTER + 10)
    assert cluster.api.records == [("g", record)]
