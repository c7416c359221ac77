"""HiveD's reclaim as a cluster admin or a tenant would break it (scheduler/cluster/stranded.py,
scheduler/cluster/reclaim.py), on the real HivedEngine and pod record of tests/cluster/test_stranded.py:
VC b's opportunistic pods fill every node at the waiting pod's priority."""

from __future__ import annotations

import json

import msgspec

from scheduler.constants import ANNOTATION_GPU_INDICES, ANNOTATION_RECLAIM_BOOKING
from scheduler.core.model import PodInfo
from tests.cells.helpers import pod, schedule
from scheduler.cluster.stranded import KUBE_SCHEDULER_RETRY_SECONDS as RETRY
from tests.cluster.test_stranded import AFTER, NODES, Cluster, unschedulable
from scheduler.kube.names import filter_offered


def whole_node_waiter(cluster: Cluster) -> PodInfo:
    """g asks for a whole node (8 GPUs): both opportunistic pods on it are its victims."""
    g = cluster.cellfits(pod("g", 8, "a"), cores=1)
    cluster.pods.record(g)
    cluster.g = g
    cluster.api.pending = [unschedulable(g)]
    return g


def other_schedulers_on_every_node(cluster: Cluster) -> list[str]:
    """On each node one of the two opportunistic pods is another scheduler's: cellfit may not
    delete it, and kube-scheduler will not preempt it (same priority)."""
    kept = []
    for name in NODES:
        first = cluster.pods.get(cluster.on(name)[0])
        assert first is not None
        cluster.pods.record(msgspec.structs.replace(first, scheduler_name="default-scheduler"))
        kept.append(first.uid)
    return kept


def test_a_stranded_pod_whose_cells_hold_a_pod_nobody_will_remove_deletes_nothing():
    cluster = Cluster(per_node=2)
    whole_node_waiter(cluster)
    other_schedulers_on_every_node(cluster)
    cluster.look_at(0)
    # Deleting the other pod on the node would free half the cells g needs: a loss for nothing.
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == []
    assert not cluster.engine.has_booking(cluster.g)


def test_a_stranded_pod_is_booked_where_every_victim_can_be_removed():
    cluster = Cluster(per_node=2)
    whole_node_waiter(cluster)
    kept = other_schedulers_on_every_node(cluster)
    free_node = "r1n2"
    cluster.pods.record(msgspec.structs.replace(cluster.pods.get(kept[NODES.index(free_node)]), scheduler_name="cellfit"))
    cluster.look_at(0)
    assert sorted(cluster.look_at(AFTER)) == cluster.on(free_node) and cluster.booked_node() == free_node


def test_a_waiting_pod_whose_victims_include_one_nobody_will_remove_deletes_none_of_them():
    cluster = Cluster(per_node=2)
    g = whole_node_waiter(cluster)
    cluster.api.pending = []
    assert filter_offered(cluster.engine, g, NODES).failed  # the filter books g's cells on a node, two victims
    (waiting,) = cluster.engine.waiting_guarantees()
    stuck = cluster.pods.get(waiting.victims[0])
    assert stuck is not None and len(waiting.victims) == 2
    cluster.pods.record(msgspec.structs.replace(stuck, scheduler_name="default-scheduler"))
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == []


def big_waiters(cluster: Cluster, count: int, *, cores: float) -> list[PodInfo]:
    """``count`` guaranteed pods of VC a, 4 GPUs and ``cores`` cores each, all unschedulable."""
    waiters = [cluster.cellfits(pod(f"g{i}", 4, "a"), cores=cores) for i in range(count)]
    for waiter in waiters:
        cluster.pods.record(waiter)
    cluster.pods.forget("g")
    cluster.api.pending = [unschedulable(waiter) for waiter in waiters]
    return waiters


def booked_nodes(cluster: Cluster) -> dict[str, str | None]:
    return {w.pod_uid: w.node for w in cluster.engine.waiting_guarantees()}


def test_two_stranded_pods_whose_cores_fit_one_at_a_time_are_not_booked_on_one_node():
    # Each node: 64 cores, two opportunistic pods of 4 GPUs and 1 core. g0 and g1 want 40 cores
    # each: one node takes the GPUs of both, not the cores.
    cluster = Cluster(per_node=2)
    big_waiters(cluster, 2, cores=40)
    cluster.look_at(0)
    cluster.look_at(AFTER)
    nodes = booked_nodes(cluster)
    assert sorted(nodes) == ["g0", "g1"] and nodes["g0"] != nodes["g1"]


def test_a_pod_booked_in_an_earlier_round_counts_on_its_node():
    cluster = Cluster(per_node=2)
    g0, g1 = big_waiters(cluster, 2, cores=40)
    cluster.api.pending = [unschedulable(g0)]
    cluster.look_at(0)
    cluster.look_at(AFTER)
    cluster.api.pending = [unschedulable(g0), unschedulable(g1)]
    cluster.look_at(AFTER + 1)
    cluster.look_at(2 * AFTER + 1)
    nodes = booked_nodes(cluster)
    assert sorted(nodes) == ["g0", "g1"] and nodes["g0"] != nodes["g1"]


def test_pods_of_different_constraints_in_one_round_each_go_where_theirs_allow():
    cluster = Cluster(per_node=2)
    g0, g1 = big_waiters(cluster, 2, cores=1)
    for name, body in cluster.api.nodes.items():
        body["metadata"]["labels"] = {"slot": name}
    cluster.api.pending = [unschedulable(g0, nodeSelector={"slot": "r1n2"}), unschedulable(g1, nodeSelector={"slot": "r1n0"})]
    cluster.look_at(0)
    cluster.look_at(AFTER)
    assert booked_nodes(cluster) == {"g0": "r1n2", "g1": "r1n0"}  # VC a's rack is one rack


def victims_gone(cluster: Cluster, victims: list[str]) -> None:
    """The deleted pods have terminated: the watch shows them gone."""
    for uid in victims:
        cluster.engine.delete_pod(uid)
        cluster.pods.forget(uid)


def test_cells_kube_scheduler_still_will_not_give_the_pod_once_free_are_given_back():
    # kube-scheduler refuses the node for what the rules do not check (its ephemeral storage, the
    # anti-affinity of a pod already there): g stays unschedulable on free cells booked for it.
    cluster = Cluster()
    cluster.look_at(0)
    victims = cluster.look_at(AFTER)
    assert victims and cluster.engine.has_booking(cluster.g)
    cluster.look_at(AFTER + 5)
    victims_gone(cluster, victims)
    cluster.look_at(AFTER + 10)
    # kube-scheduler has its chance first: it retries a parked pod within RETRY seconds
    cluster.look_at(AFTER + 10 + RETRY - 1)
    assert cluster.engine.has_booking(cluster.g)
    cluster.look_at(AFTER + 10 + RETRY)
    assert not cluster.engine.has_booking(cluster.g)
    released = [e for e in cluster.api.events if e["reason"] == "BookingReleased"]
    assert [(e["pod_name"], e["warning"]) for e in released] == [("g", True)] and "ephemeral storage" in released[0]["message"]
    # Nothing more is deleted for it: its VC's cells are free, kube-scheduler's business.
    for seconds in (2 * RETRY, 3 * RETRY, 6 * RETRY):
        assert cluster.look_at(seconds) == []
    assert len(cluster.api.deleted) == 1


def test_a_node_kube_scheduler_refused_the_pod_is_not_reclaimed_for_again():
    # The cells given back fill with opportunistic pods again (the victim's replacement):
    # kube-scheduler still refuses g that node, so nothing there is deleted for g a second time.
    cluster = Cluster()
    node = "r1n2"
    for name, body in cluster.api.nodes.items():
        body["metadata"]["labels"] = {"slot": name}
    cluster.api.pending = [unschedulable(cluster.g, nodeSelector={"slot": node})]
    cluster.look_at(0)
    (victim,) = cluster.look_at(AFTER)
    assert cluster.booked_node() == node
    victims_gone(cluster, [victim])
    cluster.look_at(AFTER + 5)
    cluster.look_at(AFTER + 5 + RETRY)
    assert not cluster.engine.has_booking(cluster.g)
    replacement = schedule(cluster.engine, cluster.cellfits(pod("o-new", 8, "b", priority="opportunistic"), cores=1), [node])
    assert replacement is not None
    cluster.pods.record(cluster.cellfits(replacement, cores=1))
    deleted = [uid for seconds in range(int(2 * RETRY), int(4 * RETRY), 5) for uid in cluster.look_at(seconds)]
    assert "o-new" not in deleted


def test_cells_whose_victims_still_terminate_stay_booked():
    cluster = Cluster()
    cluster.look_at(0)
    cluster.look_at(AFTER)
    for seconds in (2 * AFTER, 10 * RETRY, 100 * RETRY):  # a training pod's long grace period
        cluster.look_at(seconds)
    assert cluster.engine.has_booking(cluster.g)


def test_a_booked_pod_kube_scheduler_binds_keeps_its_cells():
    cluster = Cluster()
    cluster.look_at(0)
    victims = cluster.look_at(AFTER)
    victims_gone(cluster, victims)
    cluster.api.pending = []  # kube-scheduler is binding it: no longer unschedulable
    for seconds in (AFTER + 5, 2 * RETRY, 5 * RETRY):
        cluster.look_at(seconds)
    assert cluster.engine.has_booking(cluster.g)


def test_a_pod_that_may_never_preempt_gets_nothing_deleted_for_it():
    # Its PriorityClass says preemptionPolicy: Never: kube-scheduler preempts nobody for it, and
    # neither may cellfit.
    cluster = Cluster()
    cluster.api.pending = [unschedulable(cluster.g, preemptionPolicy="Never")]
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == [] and not cluster.engine.has_booking(cluster.g)
    assert [(e["reason"], "preemptionPolicy is Never" in e["message"]) for e in cluster.api.events] == [("CellsNotReclaimed", True)]


def test_a_pod_that_may_preempt_lower_priorities_is_reclaimed_for():
    cluster = Cluster()
    cluster.api.pending = [unschedulable(cluster.g, preemptionPolicy="PreemptLowerPriority")]
    cluster.look_at(0)
    assert len(cluster.look_at(AFTER)) == 1


def shows(replica: Cluster, *, record: str | None, uid: str = "g") -> PodInfo:
    """The replica's pod watch shows the pod with ``record`` as its reclaim booking (None:
    without one): its record and its engine hear of it, as the cache passes an event on."""
    known = replica.pods.get(uid)
    assert known is not None
    annotations = {key: value for key, value in known.annotations.items() if key != ANNOTATION_RECLAIM_BOOKING}
    if record is not None:
        annotations[ANNOTATION_RECLAIM_BOOKING] = record
    watched = msgspec.structs.replace(known, annotations=annotations)
    replica.pods.record(watched)
    replica.engine.apply_pod(watched)
    return watched


def test_the_cells_booked_by_the_leader_are_kept_by_the_replica_kube_scheduler_calls():
    leader, serving = Cluster(), Cluster()  # two replicas' engines: the same pods, placed alike
    leader.look_at(0)
    (victim,) = leader.look_at(AFTER)
    node = leader.booked_node()
    record = leader.api.recorded("g")
    assert node is not None and record is not None
    assert leader.api.calls == ["record g", f"condition {victim}", f"delete {victim}"]  # recorded before any deletion
    for replica in (leader, serving):
        shows(replica, record=record)  # the watch brings the leader's write to every replica
        victims_gone(replica, [victim])
    # The victim's Job replaces it; kube-scheduler brings the new pod to its cellfit first.
    replacement = serving.cellfits(pod("o-new", 8, "b", priority="opportunistic"), cores=1)
    assert schedule(leader.engine, replacement, [node]) is None  # the leader's engine keeps g's cells
    assert schedule(serving.engine, replacement, [node]) is None
    # and gives them to g, on exactly the GPUs the leader booked
    g = serving.pods.get("g")
    assert g is not None
    placed = schedule(serving.engine, g, NODES)
    assert placed is not None and placed.node_name == node
    assert placed.annotations[ANNOTATION_GPU_INDICES] == ",".join(str(i) for i in json.loads(record)["gpuIndices"])


def test_a_gang_whose_cores_fit_one_pod_per_node_gets_a_slot_per_node():
    cluster = Cluster(per_node=2)
    members = [cluster.cellfits(pod(f"m{i}", 4, "a", gang=("train", 2)), cores=40) for i in range(2)]
    for member in members:
        cluster.pods.record(member)
    cluster.pods.forget("g")
    cluster.api.pending = [unschedulable(member) for member in members]
    cluster.look_at(0)
    deleted = cluster.look_at(AFTER)
    nodes = booked_nodes(cluster)
    assert sorted(nodes) == ["m0", "m1"] and nodes["m0"] != nodes["m1"] and len(deleted) == 2


def test_a_pod_without_gpus_that_nobody_will_remove_keeps_no_node_out():
    # Labelled opportunistic and of another scheduler, but holding no GPU: never on g's cells.
    cluster = Cluster()
    for name in NODES:
        cluster.pods.record(PodInfo(uid=f"cpu-{name}", namespace="ns", name=f"cpu-{name}", node_name=name, phase="Running",
                                    priority=1000, scheduler_name="default-scheduler",
                                    labels={"cellfit.io/priority": "opportunistic"}))
    cluster.look_at(0)
    assert len(cluster.look_at(AFTER)) == 1 and cluster.booked_node() is not None
