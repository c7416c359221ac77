"""HiveD's guarantee whatever the PriorityClasses, on a live cluster with the chart's scheduler
(scheduler/cluster/stranded.py, scheduler/cluster/reclaim.py). An opportunistic pod whose
PriorityClass equals the guaranteed pod's (cellfit-best-effort: a user's mistake) fills the GPUs
of a node the default VC owns; a guaranteed pod of that VC arrives. kube-scheduler's own filters
find the node full and it offers only lower-priority victims, so it neither preempts nor calls
cellfit: it marks the pod unschedulable. After ``reclaim.afterSeconds`` (30 s, the default the
chart leaves) the leader books the pod's cells on that node, marks the opportunistic pod
DisruptionTarget and deletes it, with Events on both pods, and the guaranteed pod is bound
there. Before the deletion the leader records the booking on the guaranteed pod (annotation
cellfit.io/reclaim-booking, which every replica's engine keeps). The same for a gang of two
whole-node pods behind two such pods. KWOK plays the pods (they run and go at once).

Under HA (two replicas as the chart runs them, e2e/test_failover.py's ``Replica``): replica A's
cellfit holds the controllers' Lease while replica B's kube-scheduler leads scheduling and calls
B's cellfit. A books and deletes; the squatter's Job replaces its pod at once, and an opportunistic
pod of a higher PriorityClass waits, which B's kube-scheduler tries first. B's engine keeps the
freed cells for the guaranteed pod from the record on it: neither of those runs on them, the
guaranteed pod does."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from chart_support import (
    ChartScheduler, Cluster, Release, Scenarios, assert_no_double_booking, ensure_release, gang_job, gpu_pod, is_active, running_on,
    scenario_scheduler, wait_for,
)
from test_failover import CONTROLLERS, Replica, lead_then_stand_by, lease

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("hivedprio-")
OPPORTUNISTIC = {"cellfit.io/priority": "opportunistic"}
RECORD = "cellfit.io/reclaim-booking"


@pytest.fixture
def split_leaders(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, Replica, Replica, Any]]:
    """Two replicas whose leaders are apart: A's cellfit holds the controllers' Lease (the
    reclaim), B's kube-scheduler leads scheduling (A's was killed) and calls B's cellfit.
    Function-scoped and first in the module: the other tests' chart scheduler takes the same
    scheduling Lease."""
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    SCENARIOS.add_nodes(cluster, "ha", 1)  # before cellfit starts: HiveD discovers it
    workdir = tmp_path_factory.mktemp(f"hived-reclaim-ha-{SCENARIOS.run}")
    a, b = Replica("replica-a", cluster, release, workdir), Replica("replica-b", cluster, release, workdir)
    try:
        lead_then_stand_by(a, b)
        assert a.scheduler is not None and a.scheduler.process is not None
        a.scheduler.process.kill()  # A's cellfit keeps leading the controllers
        a.scheduler.process.wait(10)
        a.scheduler.process = None
        wait_for(b.leads_scheduling, 60, f"replica B's kube-scheduler to lead (log {b.scheduler and b.scheduler.log})")
        assert lease(cluster, release, CONTROLLERS).get("holderIdentity") == "replica-a"
        yield cluster, release, a, b, control_plane
    finally:
        b.stop()
        a.stop()
        SCENARIOS.delete_nodes(cluster, ["ha"])


def squatter_job(name: str, *, scheduler_name: str, node_selector: dict[str, str]) -> dict[str, Any]:
    """One opportunistic whole-node pod of the guaranteed pods' PriorityClass, replaced by its
    Job at once when it is deleted."""
    pod = gpu_pod(name, scheduler_name=scheduler_name, node_selector=node_selector, gpus=8, priority_class="cellfit-best-effort",
                  labels=OPPORTUNISTIC)
    pod["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6,
                     "template": {"metadata": {"labels": OPPORTUNISTIC}, "spec": pod["spec"]}}}


def test_the_replica_kube_scheduler_calls_keeps_the_cells_the_leader_reclaimed(split_leaders: Any) -> None:
    cluster, release, a, b, cp = split_leaders
    ns = cp.create_namespace("ha")
    where = SCENARIOS.selector("ha")
    node = SCENARIOS.node("ha")
    name = release.scheduler_name
    cluster.apply(squatter_job("squatter", scheduler_name=name, node_selector=where), namespace=ns)

    def squatters_running() -> list[str]:
        return [p["metadata"]["name"] for p in cluster.pods(ns) if p["metadata"]["name"].startswith("squatter-")
                and p["spec"].get("nodeName") == node and p["status"].get("phase") == "Running" and is_active(p)]

    (first,) = wait_for(lambda: squatters_running() or None, 90, f"the squatter running (B's cellfit log {b.cellfit.log})")
    with cluster.watch_pods(ns) as versions:
        cluster.apply(gpu_pod("owner", scheduler_name=name, node_selector=where, gpus=4, priority_class="cellfit-best-effort"),
                      namespace=ns)
        # Higher than the owner's priority: kube-scheduler's queue brings it first once the node frees.
        cluster.apply(gpu_pod("eager", scheduler_name=name, node_selector=where, gpus=8, priority_class="cellfit-trial",
                              labels=OPPORTUNISTIC), namespace=ns)
        assert wait_for(lambda: running_on(cluster, ns, "owner"), 180,
                        f"owner running (A's cellfit log {a.cellfit.log}, B's {b.cellfit.log}, B's scheduler log "
                        f"{b.scheduler and b.scheduler.log})") == node
    logged = [line for line in a.cellfit.log.read_text(errors="replace").splitlines()
              if "opportunistic pod preempted for a guaranteed pod" in line and first in line]
    assert logged, f"replica A's cellfit (the controllers' leader) did not reclaim (log {a.cellfit.log})"
    # Neither the squatter's replacement nor the eager pod was ever bound to the node: B's engine
    # kept the cells for the owner.
    others = {v.pod["metadata"]["name"] for v in versions if v.pod["spec"].get("nodeName") == node}
    takers = {pod for pod in others if pod == "eager" or (pod.startswith("squatter-") and pod != first)}
    assert not takers, f"{sorted(takers)} bound to {node} before the guaranteed pod (B's cellfit log {b.cellfit.log})"
    assert_no_double_booking(cluster.pods(ns))


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, ChartScheduler, Any]]:
    workdir = tmp_path_factory.mktemp(f"hived-reclaim-priority-{SCENARIOS.run}")
    with scenario_scheduler(control_plane, workdir, SCENARIOS, nodes={"equal": 1, "gang": 2}, name="hived-prio") as (cluster, release, procs):
        yield cluster, release, procs, control_plane


def reasons(cluster: Cluster, ns: str, name: str) -> dict[str, str]:
    return {event["reason"]: event["message"] for event in cluster.events(ns, name)}


def test_an_opportunistic_pod_of_equal_priority_is_deleted_for_the_guaranteed_pod(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("equal")
    where = SCENARIOS.selector("equal")
    name = release.scheduler_name
    node = SCENARIOS.node("equal")
    cluster.apply(gpu_pod("squatter", scheduler_name=name, node_selector=where, gpus=8, priority_class="cellfit-best-effort",
                          labels=OPPORTUNISTIC), namespace=ns)
    assert wait_for(lambda: running_on(cluster, ns, "squatter"), 90, f"squatter running (cellfit log {procs.cellfit.log})") == node
    squatter_uid = cluster.kubectl_json("-n", ns, "get", "pod", "squatter")["metadata"]["uid"]

    with cluster.watch_pods(ns) as versions:
        cluster.apply(gpu_pod("owner", scheduler_name=name, node_selector=where, gpus=4, priority_class="cellfit-best-effort"),
                      namespace=ns)
        assert wait_for(lambda: running_on(cluster, ns, "owner"), 180,
                        f"owner running (cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log})") == node

    deleting = [v.pod for v in versions if v.pod["metadata"]["uid"] == squatter_uid and v.pod["metadata"].get("deletionTimestamp")]
    assert deleting, "the squatter was never deleted"
    # The booking was on the owner, for every replica's engine, before the squatter's deletion.
    order = [(v.pod["metadata"]["name"], bool(v.pod["metadata"].get("deletionTimestamp")),
              (v.pod["metadata"].get("annotations") or {}).get(RECORD)) for v in versions]
    recorded = [i for i, (pod, _, record) in enumerate(order) if pod == "owner" and record is not None]
    deleted = [i for i, (pod, gone, _) in enumerate(order) if pod == "squatter" and gone]
    assert recorded and recorded[0] < deleted[0], order
    assert json.loads(order[recorded[0]][2] or "{}")["node"] == node
    conditions = deleting[0]["status"].get("conditions", [])
    assert any(c["type"] == "DisruptionTarget" and c.get("message", "").startswith("cellfit:") for c in conditions), conditions
    preempted = wait_for(lambda: reasons(cluster, ns, "squatter").get("Preempted"), 30, "a Preempted Event on the squatter")
    reclaiming = wait_for(lambda: reasons(cluster, ns, "owner").get("ReclaimingCells"), 30, "a ReclaimingCells Event on the owner")
    for message in (preempted, reclaiming):
        assert "virtual cluster default" in message and "kube-scheduler preempts only lower priorities" in message, message
    # The leader's reclaim tells the victim what it does to its Job, as FitGpp's victims are told: a
    # bare pod has no controller to create it again.
    assert preempted.endswith("nothing resumes it"), preempted
    logged = [line for line in procs.cellfit.log.read_text(errors="replace").splitlines()
              if "opportunistic pod preempted for a guaranteed pod" in line and "squatter" in line]
    assert logged, f"no reclaim log line (cellfit log {procs.cellfit.log})"
    assert_no_double_booking(cluster.pods(ns))


def test_a_gang_behind_opportunistic_pods_of_equal_priority_gets_its_nodes(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("gang")
    where = SCENARIOS.selector("gang")
    name = release.scheduler_name
    nodes = sorted(SCENARIOS.node("gang", i) for i in range(2))
    for i in range(2):
        cluster.apply(gpu_pod(f"squatter-{i}", scheduler_name=name, node_selector=where, gpus=8, priority_class="cellfit-best-effort",
                              labels=OPPORTUNISTIC), namespace=ns)
    assert wait_for(lambda: sorted(filter(None, (running_on(cluster, ns, f"squatter-{i}") for i in range(2)))) == nodes or None, 90,
                    f"both squatters running (cellfit log {procs.cellfit.log})")
    cluster.apply(gang_job("pair", scheduler_name=name, node_selector=where, gpus=8, size=2, priority_class="cellfit-best-effort"),
                  namespace=ns)

    def gang_nodes() -> list[str] | None:
        running = [p["spec"]["nodeName"] for p in cluster.pods(ns)
                   if p["metadata"]["name"].startswith("pair-") and p["status"].get("phase") == "Running" and is_active(p)]
        return sorted(running) if len(running) == 2 else None

    assert wait_for(gang_nodes, 240, f"the gang's two pods running (cellfit log {procs.cellfit.log})") == nodes
    assert not [p for p in cluster.pods(ns) if p["metadata"]["name"].startswith("squatter-") and is_active(p)]
    assert_no_double_booking(cluster.pods(ns))
