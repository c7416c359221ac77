"""Guaranteed pods kube-scheduler never brings to cellfit's filter (scheduler/cluster/stranded.py),
on a real HivedEngine and pod record: VC b's opportunistic pods, of a priority kube-scheduler may
not preempt, fill every node, so kube-scheduler's own filters find no node for VC a's guaranteed
pod ``g`` and mark it unschedulable. The leader books g's cells on a node kube-scheduler will
accept it on once they are gone, and the reclaim deletes the pods on them in the same round.

The API server is played by its answers: the pending pods' list (the PodScheduled condition
kube-scheduler writes) and the nodes' list; e2e/test_hived_reclaim_priority.py runs the same
against kube-apiserver and kube-scheduler."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Sequence

import msgspec
import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.capabilities import WaitingGuarantee
from scheduler.cluster.pending import PendingPods
from scheduler.cluster.reclaim import ReclaimController
from scheduler.cluster.stranded import StrandedGuarantees
from scheduler.config import ReclaimSettings
from scheduler.core.model import PodInfo
from scheduler.core.pods import PodStore
from scheduler.core.resources import Resources
from tests.cells.helpers import node_names, pod, rack_cluster, schedule
from tests.cluster.test_reclaim import Api, Clock

NODES = node_names()
PROFILE = "cellfit"
AFTER = 30.0
T0 = 1_800_000_000.0
CORES = 64


class ClusterApi(Api):
    """The controller's writes (Api), and what the API server answers to its two lists."""

    def __init__(self, *, gpu_resource: str = "nvidia.com/gpu") -> None:
        super().__init__()
        self.pending: list[dict[str, Any]] = []
        self.nodes = {name: {"metadata": {"name": name, "labels": {}},
                             "spec": {"taints": []},
                             "status": {"allocatable": {"cpu": str(CORES), "memory": "256Gi", gpu_resource: "8", "pods": "110"}}}
                      for name in NODES}
        self.node_lists = 0

    def list_pending_pods(self, scheduler_name: str) -> bytes:
        assert scheduler_name == PROFILE
        return json.dumps({"items": self.pending}).encode()

    def list_path(self, path: str) -> bytes:
        assert path.startswith("/api/v1/nodes")
        self.node_lists += 1
        return json.dumps({"items": list(self.nodes.values())}).encode()


def unschedulable(p: PodInfo, *, reason: str = "Unschedulable", **spec: Any) -> dict[str, Any]:
    """The pod as kube-scheduler leaves one it found no node for."""
    return {
        "metadata": {"name": p.name, "namespace": p.namespace, "uid": p.uid},
        "spec": {"containers": [{"name": "main"}], "schedulerName": PROFILE, **spec},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": reason}]},
    }


class Cluster:
    """VC a and VC b own a rack each; b's opportunistic pods fill all eight nodes (``per_node``
    pods of ``8 / per_node`` GPUs and ``cores`` cores each), all of priority 100 like the
    guaranteed pod ``g`` (VC a, 4 GPUs, ``g_cores`` cores) kube-scheduler finds unschedulable.
    The nodes' GPUs are ``gpu_resource``, as the policy names them; ``pending``: the view the
    reclaim reads the pending pods from (None: it lists ``api.pending`` each round)."""

    def __init__(self, *, per_node: int = 1, cores: float = 1, g_cores: float = 1, g_vc: str = "a", g_priority: str | None = None,
                 gpu_resource: str = "nvidia.com/gpu", pending: PendingPods | None = None) -> None:
        self.engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}],
                                                                "b": [{"cellType": "V100-RACK", "count": 1}]}))
        self.pods = PodStore()
        self.lock = threading.RLock()
        for i in range(8 * per_node):
            squatter = self.cellfits(pod(f"o{i}", 8 // per_node, "b", priority="opportunistic"), cores=cores)
            placed = schedule(self.engine, squatter, NODES)
            assert placed is not None
            self.pods.record(self.cellfits(placed, cores=cores))
        self.g = self.cellfits(pod("g", 4, g_vc, priority=g_priority), cores=g_cores)
        self.pods.record(self.g)
        self.api, self.clock = ClusterApi(gpu_resource=gpu_resource), Clock()
        self.api.pending = [unschedulable(self.g)]
        self.stranded = StrandedGuarantees(api=self.api, engine=self.engine, pods=self.pods, lock=self.lock, scheduler_name=PROFILE,
                                           gpu_resource=gpu_resource, after_seconds=AFTER, pending=pending)
        self.controller = ReclaimController(api=self.api, engine=self.engine, pods=self.pods, lock=self.lock,
                                            settings=ReclaimSettings(after_seconds=AFTER), scheduler_name=PROFILE, clock=self.clock,
                                            stranded=self.stranded)

    @staticmethod
    def cellfits(p: PodInfo, *, cores: float) -> PodInfo:
        requests = Resources(cpu_millis=int(cores * 1000), memory_bytes=2**30, gpus=p.requests.gpus)
        return msgspec.structs.replace(p, priority=100, scheduler_name=PROFILE, requests=requests)

    def look_at(self, seconds: float) -> list[str]:
        """A look ``seconds`` after the first: the pods it deleted."""
        self.clock.now = T0 + seconds
        return [reclaim.victim.uid for reclaim in self.controller.reconcile()]

    def booked_node(self) -> str | None:
        waiting = [w for w in self.engine.waiting_guarantees() if w.pod_uid == "g"]
        return waiting[0].node if waiting else None

    def on(self, node: str) -> list[str]:
        return sorted(p.uid for p in self.pods.pods() if p.node_name == node and p.uid != "g")

    def taint_all_but(self, keep: str, taint: dict[str, str]) -> None:
        for name, body in self.api.nodes.items():
            if name != keep:
                body["spec"]["taints"] = [taint]


def test_a_stranded_pod_gets_its_cells_booked_and_their_squatter_deleted_in_one_round():
    cluster = Cluster()
    assert cluster.look_at(0) == [] and cluster.look_at(AFTER - 1) == []  # kube-scheduler may still find a way
    assert not cluster.engine.has_booking(cluster.g) and cluster.api.node_lists == 0
    deleted = cluster.look_at(AFTER)
    node = cluster.booked_node()
    assert node is not None and deleted == cluster.on(node) and len(deleted) == 1
    assert [event["reason"] for event in cluster.api.events] == ["Preempted", "ReclaimingCells"]
    # Booked once: a later look changes nothing and lists no nodes again.
    assert cluster.look_at(AFTER + 5) == [] and cluster.booked_node() == node and cluster.api.node_lists == 1


def test_the_cells_are_booked_where_the_node_selector_and_affinity_allow():
    cluster = Cluster()
    cluster.api.nodes["r1n2"]["metadata"]["labels"] = {"zone": "z1", "tier": "gold"}
    cluster.api.pending = [unschedulable(cluster.g, nodeSelector={"zone": "z1"}, affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold", "silver"]}]}]}}})]
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == cluster.on("r1n2") and cluster.booked_node() == "r1n2"


def test_untolerated_taints_keep_the_cells_off_a_node():
    taint = {"key": "gpu", "value": "broken", "effect": "NoSchedule"}
    cluster = Cluster()
    cluster.taint_all_but("r0n1", taint)
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == cluster.on("r0n1") and cluster.booked_node() == "r0n1"


def test_a_tolerated_taint_is_no_obstacle():
    taint = {"key": "gpu", "value": "broken", "effect": "NoSchedule"}
    cluster = Cluster()
    cluster.taint_all_but("r0n1", taint)
    cluster.api.pending = [unschedulable(cluster.g, tolerations=[{"key": "gpu", "operator": "Exists"}])]
    cluster.look_at(0)
    assert len(cluster.look_at(AFTER)) == 1 and cluster.booked_node() is not None


def test_no_node_the_pod_may_use_books_nothing_and_waits_before_the_next_try():
    cluster = Cluster()
    cluster.api.pending = [unschedulable(cluster.g, nodeSelector={"zone": "nowhere"})]
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == [] and not cluster.engine.has_booking(cluster.g)
    assert cluster.api.node_lists == 1
    cluster.look_at(AFTER + 5)
    assert cluster.api.node_lists == 1  # not every round
    cluster.look_at(2 * AFTER)
    assert cluster.api.node_lists == 2


def test_cores_that_would_not_fit_beside_the_pods_that_stay_keep_the_cells_off_a_node():
    cluster = Cluster()
    for name in NODES:  # every node's cores but r1n3's are taken by a pod that is not opportunistic
        if name != "r1n3":
            cluster.pods.record(PodInfo(uid=f"cpu-{name}", namespace="ns", name=f"cpu-{name}", node_name=name, phase="Running",
                                        requests=Resources(cpu_millis=(CORES - 1) * 1000 + 500)))
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == cluster.on("r1n3") and cluster.booked_node() == "r1n3"


def test_a_booking_whose_victims_free_too_few_cores_is_given_back():
    # Two opportunistic pods of 4 GPUs and 31.5 cores on each node; g needs 4 GPUs (one
    # victim) and 40 cores: it would fit were both gone, not beside the one that stays.
    cluster = Cluster(per_node=2, cores=31.5, g_cores=40)
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == []
    assert not cluster.engine.has_booking(cluster.g) and cluster.engine.waiting_guarantees() == []


def test_a_pod_with_constraints_the_rules_do_not_model_is_left_and_named_once(caplog: pytest.LogCaptureFixture):
    cluster = Cluster()
    cluster.api.pending = [unschedulable(cluster.g, affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]}})]
    cluster.look_at(0)
    with caplog.at_level(logging.WARNING, logger="scheduler.cluster.stranded"):
        assert cluster.look_at(AFTER) == [] and cluster.look_at(2 * AFTER) == []
    named = [r for r in caplog.records if getattr(r, "constraint", None) == "spec.affinity.podAntiAffinity (required terms)"]
    assert len(named) == 1 and not cluster.engine.has_booking(cluster.g)
    # The pod's owner is told too, once: a Warning Event on the pod naming the constraint.
    (event,) = cluster.api.events
    assert (event["pod_name"], event["reason"], event["warning"]) == ("g", "CellsNotReclaimed", True)
    assert "spec.affinity.podAntiAffinity (required terms)" in event["message"], event["message"]


def test_a_pod_that_has_free_cells_is_not_stranded_by_hived():
    cluster = Cluster()
    victim = cluster.on("r0n0")[0]
    cluster.engine.delete_pod(victim)  # a node of free cells: kube-scheduler's business, not a reclaim's
    cluster.pods.forget(victim)
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == [] and not cluster.engine.has_booking(cluster.g)


def test_free_cells_on_a_node_the_pod_may_not_use_do_not_keep_it_waiting():
    cluster = Cluster()
    victim = cluster.on("r0n0")[0]
    cluster.engine.delete_pod(victim)
    cluster.pods.forget(victim)
    for name, body in cluster.api.nodes.items():
        body["metadata"]["labels"] = {"pool": "free" if name == "r0n0" else "train"}
    cluster.api.pending = [unschedulable(cluster.g, nodeSelector={"pool": "train"})]
    cluster.look_at(0)
    deleted = cluster.look_at(AFTER)
    node = cluster.booked_node()
    assert node not in (None, "r0n0") and deleted == cluster.on(node)


@pytest.mark.parametrize("case", ["opportunistic", "other reason", "no such pod in the watch", "bound", "deleting"])
def test_pods_that_are_not_stranded_guarantees_are_left(case: str):
    cluster = Cluster(g_priority="opportunistic" if case == "opportunistic" else None)
    listed = unschedulable(cluster.g, reason="SchedulerError" if case == "other reason" else "Unschedulable")
    if case == "no such pod in the watch":
        cluster.pods.forget("g")
    if case == "bound":
        cluster.pods.record(msgspec.structs.replace(cluster.g, node_name="r0n0"))
    if case == "deleting":
        listed["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    cluster.api.pending = [listed]
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == [] and not cluster.engine.has_booking(cluster.g)


def test_a_pod_that_left_the_unschedulable_list_waits_the_whole_time_again():
    cluster = Cluster()
    cluster.look_at(0)
    cluster.api.pending = []
    cluster.look_at(AFTER - 1)
    cluster.api.pending = [unschedulable(cluster.g)]
    assert cluster.look_at(AFTER) == []  # its wait begins again here
    assert len(cluster.look_at(2 * AFTER)) == 1


def test_a_pod_hived_would_not_reclaim_for_is_planned_once_per_wait():
    cluster = Cluster()
    planned: list[str] = []
    need = cluster.engine.reclaim_need

    def counting(p: PodInfo, *, among: Sequence[str]) -> WaitingGuarantee | None:
        planned.append(p.uid)
        return need(p, among=among)

    cluster.engine.reclaim_need = counting  # type: ignore[method-assign]
    victim = cluster.on("r0n0")[0]
    cluster.engine.delete_pod(victim)  # free cells: HiveD needs no victim, kube-scheduler's business
    cluster.pods.forget(victim)
    cluster.look_at(0)
    for second in range(int(AFTER), int(2 * AFTER), 5):
        cluster.look_at(second)
    assert planned == ["g"]  # not once per round: a long queue would hold the engine lock every round
    cluster.look_at(2 * AFTER)
    assert planned == ["g", "g"]


def gang_members(cluster: Cluster, size: int) -> list[PodInfo]:
    members = [cluster.cellfits(pod(f"g{i}", 4, "a", gang=("train", size)), cores=1) for i in range(size)]
    for member in members:
        cluster.pods.record(member)
    cluster.pods.forget("g")
    cluster.api.pending = [unschedulable(member) for member in members]
    return members


def test_a_stranded_gang_gets_its_slots_and_every_member_its_victims():
    cluster = Cluster()
    gang_members(cluster, 2)
    cluster.look_at(0)
    deleted = cluster.look_at(AFTER)
    waiting = {w.pod_uid: w for w in cluster.engine.waiting_guarantees()}
    assert sorted(waiting) == ["g0", "g1"]
    victims = {uid for w in waiting.values() for uid in w.victims}  # HiveD packs the gang on one node: one squatter
    assert sorted(deleted) == sorted(victims) and len(deleted) == 1


def test_a_gang_member_whose_slot_needs_no_victim_keeps_nothing():
    cluster = Cluster()
    (member,) = gang_members(cluster, 1)
    victim = cluster.on("r0n0")[0]
    cluster.engine.delete_pod(victim)
    cluster.pods.forget(victim)
    assert cluster.engine.book_reclaim(member, among=["r0n0"]) is None
    assert not cluster.engine.has_booking(member)


def test_a_list_that_does_not_read_costs_the_round_its_bookings_only(caplog: pytest.LogCaptureFixture):
    cluster = Cluster()
    cluster.api.list_path = lambda path: b"<html>502 Bad Gateway</html>"  # type: ignore[method-assign]
    cluster.look_at(0)
    with caplog.at_level(logging.WARNING, logger="scheduler.cluster.reclaim"):
        assert cluster.look_at(AFTER) == []  # no exception out of the round: the reclaim still runs
    assert any("the API server's list did not read" in str(getattr(r, "reason", "")) for r in caplog.records)
