"""The reclaim books a stranded pod's cells only on a node kube-scheduler's NodeResourcesFit will
accept it on once the opportunistic pods there are gone (scheduler/cluster/stranded.py): the
node's pod limit (allocatable ``pods``, counted against every pod bound there, terminating ones
too), and the pending pods kube-scheduler nominated to the node (``status.nominatedNodeName``)
of equal or higher priority, whose requests it counts there. A node either fills would have
had its opportunistic pods deleted for a pod that then cannot land there.

The cluster of tests/cluster/test_stranded.py: VC b's opportunistic pods fill every node, VC
a's guaranteed pod ``g`` (4 GPUs, 1 core, priority 100) is unschedulable."""

from __future__ import annotations

import msgspec

from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from tests.cluster.test_stranded import AFTER, CORES, NODES, Cluster, unschedulable

OPEN = "r1n1"  # the node left with room, where a test expects the booking


def system_pod(node: str) -> PodInfo:
    """A pod of no GPU bound to ``node`` (a DaemonSet's, say), not opportunistic: it stays."""
    return PodInfo(uid=f"sys-{node}", namespace="kube-system", name=f"sys-{node}", node_name=node, phase="Running",
                   requests=Resources(cpu_millis=100), scheduler_name="default-scheduler")


def nominated_pod(uid: str, node: str, *, priority: int, requests: Resources) -> PodInfo:
    """A pending pod kube-scheduler's preemption nominated to ``node``."""
    return PodInfo(uid=uid, namespace="ns", name=uid, phase="Pending", nominated_node_name=node, priority=priority,
                   requests=requests, scheduler_name="default-scheduler")


def only_on(cluster: Cluster, node: str) -> None:
    """g may go to ``node`` alone (a node selector)."""
    cluster.api.nodes[node]["metadata"]["labels"] = {"pool": "g"}
    cluster.api.pending = [unschedulable(cluster.g, nodeSelector={"pool": "g"})]


def test_a_node_its_staying_pods_fill_to_its_pod_limit_is_not_booked():
    # Each node runs a system pod beside its opportunistic one; every node's kubelet but OPEN's
    # was restarted with --max-pods=1 (running pods stay): once the opportunistic pod is gone
    # the system pod alone fills it, and kube-scheduler refuses it ("Too many pods").
    cluster = Cluster()
    for name in NODES:
        cluster.pods.record(system_pod(name))
        if name != OPEN:
            cluster.api.nodes[name]["status"]["allocatable"]["pods"] = "1"
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [uid for uid in cluster.on(OPEN) if uid.startswith("o")] and cluster.booked_node() == OPEN


def test_no_node_with_a_free_pod_slot_deletes_nothing():
    cluster = Cluster()
    for name in NODES:
        cluster.pods.record(system_pod(name))
        cluster.api.nodes[name]["status"]["allocatable"]["pods"] = "1"
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == [] and not cluster.engine.has_booking(cluster.g)


def test_a_node_without_allocatable_pods_holds_no_pod_for_kube_scheduler():
    # NodeResourcesFit reads a missing allocatable pods as 0: no pod fits there.
    cluster = Cluster()
    for name in NODES:
        if name != OPEN:
            del cluster.api.nodes[name]["status"]["allocatable"]["pods"]
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == cluster.on(OPEN) and cluster.booked_node() == OPEN


def test_the_cores_of_a_pod_nominated_there_of_equal_priority_keep_the_node_off():
    cluster = Cluster()
    only_on(cluster, "r0n2")
    cluster.pods.record(nominated_pod("n", "r0n2", priority=100, requests=Resources(cpu_millis=CORES * 1000)))
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == [] and not cluster.engine.has_booking(cluster.g)


def test_the_gpus_of_a_pod_nominated_there_of_higher_priority_keep_the_node_off():
    # The nominated pod waits for the opportunistic pod's 8 GPUs too: kube-scheduler counts them
    # for it, and g (4 GPUs) would not fit.
    cluster = Cluster()
    only_on(cluster, "r0n2")
    cluster.pods.record(nominated_pod("n", "r0n2", priority=1000, requests=Resources(cpu_millis=1000, gpus=8)))
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == [] and not cluster.engine.has_booking(cluster.g)


def test_the_pod_slot_of_a_pod_nominated_there_counts():
    cluster = Cluster()
    for name in NODES:
        cluster.api.nodes[name]["status"]["allocatable"]["pods"] = "1"  # the opportunistic pod's slot
    only_on(cluster, "r0n2")
    cluster.pods.record(nominated_pod("n", "r0n2", priority=100, requests=Resources(cpu_millis=100)))
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and not cluster.engine.has_booking(cluster.g)


def test_a_pod_nominated_there_of_lower_priority_does_not_count():
    # kube-scheduler preempts it for g, or g simply goes first: the node is g's to book.
    cluster = Cluster()
    only_on(cluster, "r0n2")
    cluster.pods.record(nominated_pod("n", "r0n2", priority=99, requests=Resources(cpu_millis=CORES * 1000, gpus=8)))
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == cluster.on("r0n2") and cluster.booked_node() == "r0n2"


def test_the_pods_own_nomination_does_not_count_against_it():
    cluster = Cluster()
    only_on(cluster, "r0n2")
    cluster.pods.record(msgspec.structs.replace(cluster.g, nominated_node_name="r0n2", requests=Resources(cpu_millis=CORES * 1000, gpus=4)))
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == cluster.on("r0n2") and cluster.booked_node() == "r0n2"
