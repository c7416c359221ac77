"""HiveD's guarantee whatever the PriorityClasses (scheduler/cluster/reclaim.py), on a real
HivedEngine and a real pod record: a guaranteed pod of VC a waits for cells that VC b's
opportunistic pods use; the controller deletes those kube-scheduler will not preempt (priority
not lower than the waiting pod's) once the pod has waited ``afterSeconds``, and nothing else."""

from __future__ import annotations

import threading
from typing import Any

import msgspec

from scheduler.cells import HivedEngine
from scheduler.cluster.reclaim import ReclaimController
from scheduler.config import ReclaimSettings
from scheduler.core.model import PodInfo
from scheduler.core.pods import PodStore
from scheduler.errors import KubernetesApiError
from tests.cells.helpers import node_names, pod, rack_cluster, schedule
from scheduler.kube.names import filter_offered

NODES = node_names()
PROFILE = "cellfit"
AFTER = 30.0
T0 = 1_800_000_000.0


class Api:
    """The writes the controller makes: status patches (the DisruptionTarget condition),
    deletions and Events, in order; and the reclaim bookings recorded on pods
    (``records``, in order: the pod, the record or None for cleared), which fail while
    ``refuse_records`` is set."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str]] = []  # ("condition" | "delete", pod name)
        self.conditions: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.records: list[tuple[str, str | None]] = []
        self.refuse_records: KubernetesApiError | None = None
        self.calls: list[str] = []  # every write above, in order: "condition o0", "delete o0", "record g"

    def write_path(self, method: str, path: str, body: Any, *, content_type: str = "application/json") -> bytes:
        name = path.split("/")[-2]
        assert path.startswith("/api/v1/namespaces/") and path.endswith("/status")
        if "status" in body:
            self.conditions[name] = body["status"]["conditions"][0]
            self.writes.append(("condition", name))
            self.calls.append(f"condition {name}")
            return b"{}"
        assert (method, content_type) == ("PATCH", "application/merge-patch+json")
        if self.refuse_records is not None:
            raise self.refuse_records
        (record,) = body["metadata"]["annotations"].values()
        self.records.append((name, record))
        self.calls.append(f"record {name}")
        return b"{}"

    def recorded(self, name: str) -> str | None:
        """The record last written on the pod (None: none, or cleared)."""
        return next((record for pod, record in reversed(self.records) if pod == name), None)

    def delete_pod(self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None) -> None:
        assert grace_period_seconds is None  # the pod's own grace period
        self.writes.append(("delete", name))
        self.calls.append(f"delete {name}")

    def create_event(self, **event: Any) -> None:
        self.events.append(event)

    @property
    def deleted(self) -> list[str]:
        return [name for what, name in self.writes if what == "delete"]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Cluster:
    """VC a and VC b own a rack each; b's opportunistic pods fill all eight nodes, so a's
    guaranteed pod ``g`` waits for one of them (``victim``)."""

    def __init__(self, *, opportunistic_priority: int, waiting_priority: int = 100, reclaimed: list[str] | None = None) -> None:
        self.engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}],
                                                                "b": [{"cellType": "V100-RACK", "count": 1}]}))
        self.pods = PodStore()
        self.lock = threading.RLock()
        for i in range(8):
            placed = schedule(self.engine, self.cellfits(pod(f"o{i}", 8, "b", priority="opportunistic"), opportunistic_priority), NODES)
            assert placed is not None
            self.pods.record(self.cellfits(placed, opportunistic_priority))
        self.waiting = self.cellfits(pod("g", 4, "a"), waiting_priority)
        self.pods.record(self.waiting)
        assert filter_offered(self.engine, self.waiting, NODES).failed  # g books its cells and waits
        (self.victim,) = self.engine.pending_preemptions()["g"]
        self.api, self.clock = Api(), Clock()
        self.remembered: list[str] = []
        self.controller = ReclaimController(api=self.api, engine=self.engine, pods=self.pods, lock=self.lock,
                                            settings=ReclaimSettings(after_seconds=AFTER), scheduler_name=PROFILE, clock=self.clock,
                                            on_reclaim=(reclaimed if reclaimed is not None else []).append,
                                            remember_victims=self.remembered.extend)

    @staticmethod
    def cellfits(p: PodInfo, priority: int) -> PodInfo:
        return msgspec.structs.replace(p, priority=priority, scheduler_name=PROFILE)

    def look_at(self, seconds: float) -> list[str]:
        """A look ``seconds`` after the first: the pods it deleted."""
        self.clock.now = T0 + seconds
        return [reclaim.victim.uid for reclaim in self.controller.reconcile()]


def test_an_opportunistic_pod_of_higher_priority_is_reclaimed_after_the_wait():
    reclaimed: list[str] = []
    cluster = Cluster(opportunistic_priority=1000, reclaimed=reclaimed)
    assert cluster.look_at(0) == []
    assert cluster.look_at(AFTER - 1) == []  # kube-scheduler has the first chance
    assert cluster.look_at(AFTER) == [cluster.victim]
    assert cluster.api.writes == [("condition", cluster.victim), ("delete", cluster.victim)]  # marked, then deleted
    condition = cluster.api.conditions[cluster.victim]
    assert (condition["type"], condition["status"], condition["reason"]) == ("DisruptionTarget", "True", "PreemptionByScheduler")
    assert reclaimed == ["a"]
    assert cluster.remembered == [cluster.victim]  # kube-scheduler retries once the watch shows it gone
    on_victim, on_waiting = cluster.api.events
    assert (on_victim["pod_name"], on_victim["reason"], on_victim["warning"]) == (cluster.victim, "Preempted", True)
    assert (on_waiting["pod_name"], on_waiting["reason"], on_waiting["warning"]) == ("g", "ReclaimingCells", False)
    for event in (on_victim, on_waiting):
        assert "virtual cluster a" in event["message"] and "kube-scheduler preempts only lower priorities" in event["message"]
        assert "cell " in event["message"] and "on node r" in event["message"]
    # The watch has not shown the deletion yet: the pod is not deleted twice.
    assert cluster.look_at(AFTER + 5) == [] and len(cluster.api.deleted) == 1


def test_an_opportunistic_pod_of_equal_priority_is_reclaimed():
    cluster = Cluster(opportunistic_priority=100, waiting_priority=100)
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [cluster.victim]


def test_a_lower_priority_opportunistic_pod_is_left_to_kube_scheduler():
    cluster = Cluster(opportunistic_priority=10, waiting_priority=100)
    cluster.look_at(0)
    assert cluster.look_at(AFTER * 10) == [] and cluster.api.writes == [] and cluster.api.events == []


def test_nothing_for_a_pod_that_stopped_waiting():
    cluster = Cluster(opportunistic_priority=1000)
    cluster.look_at(0)
    cluster.engine.delete_pod("g")  # the guaranteed pod is gone: its booking with it
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == []


def test_a_pod_that_waits_again_waits_the_whole_time_again():
    cluster = Cluster(opportunistic_priority=1000)
    cluster.look_at(0)
    cluster.engine.delete_pod("g")
    cluster.look_at(AFTER - 1)  # seen not waiting
    assert filter_offered(cluster.engine, cluster.waiting, NODES).failed  # waits again
    assert cluster.look_at(AFTER) == []  # its new wait begins here
    assert cluster.look_at(2 * AFTER - 1) == []
    assert cluster.look_at(2 * AFTER) == cluster.engine.pending_preemptions()["g"]


def test_pods_that_may_not_be_touched_are_not():
    cluster = Cluster(opportunistic_priority=1000)
    original = cluster.pods.get(cluster.victim)
    assert original is not None
    cluster.look_at(0)
    for changed in (msgspec.structs.replace(original, terminating=True),
                    msgspec.structs.replace(original, scheduler_name="default-scheduler"),
                    msgspec.structs.replace(original, labels={**original.labels, "cellfit.io/priority": "guaranteed"})):
        cluster.pods.record(changed)
        assert cluster.look_at(AFTER) == [] and cluster.api.writes == []
    cluster.pods.record(original)
    cluster.pods.record(msgspec.structs.replace(cluster.waiting, terminating=True))  # the waiting pod leaves
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == []
    cluster.pods.forget("g")  # gone from the watch, its booking not released yet
    assert cluster.look_at(AFTER) == [] and cluster.api.writes == []


def test_nothing_is_deleted_for_a_pod_whose_preemption_policy_is_never():
    # kube-scheduler preempts nobody for such a pod; cellfit's reclaim honours the same word.
    cluster = Cluster(opportunistic_priority=100, waiting_priority=100)
    cluster.pods.record(msgspec.structs.replace(cluster.waiting, may_preempt=False))
    cluster.look_at(0)
    assert cluster.look_at(AFTER * 10) == [] and cluster.api.writes == [] and cluster.api.events == []
