"""HiveD's reclaim told to its victim, on a live cluster with the chart's scheduler: an
opportunistic pod of a Job (PriorityClass cellfit-opportunistic, below the guaranteed pod's)
fills a node the default VC owns; a guaranteed pod of that VC arrives; cellfit's filter turns
it away while the cells are borrowed, kube-scheduler asks the preempt verb whom to take, HiveD
names the opportunistic pod and kube-scheduler deletes it. Before, the victim read only
kube-scheduler's own "Preempted by pod <uid> on node <node>" (live hand session); now cellfit's
Preempted Event on it says who reclaims the cells and for which VC, that it ran there
opportunistically, and what the preemption does to its Job (backoffLimit 6, no
podFailurePolicy: counted as a failed pod); the guaranteed pod gets cellfit's Preempting Event
naming the victim. KWOK plays the pods."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from chart_support import ChartScheduler, Cluster, Release, Scenarios, gpu_pod, is_active, running_on, scenario_scheduler, wait_for
from test_hived_reclaim_priority import squatter_job

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("hivedevent-")


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, ChartScheduler, Any]]:
    workdir = tmp_path_factory.mktemp(f"hived-reclaim-event-{SCENARIOS.run}")
    with scenario_scheduler(control_plane, workdir, SCENARIOS, nodes={"reclaim": 1}, name="hived-event") as (cluster, release, procs):
        yield cluster, release, procs, control_plane


def borrower_job(name: str, *, scheduler_name: str, node_selector: dict[str, str]) -> dict[str, Any]:
    """One opportunistic whole-node pod of a PriorityClass below the guaranteed pod's (kube-scheduler
    then asks cellfit whom to preempt), of a Job that counts a preempted pod as failed."""
    job = squatter_job(name, scheduler_name=scheduler_name, node_selector=node_selector)
    job["spec"]["template"]["spec"]["priorityClassName"] = "cellfit-opportunistic"
    return job


def cellfit_event(cluster: Cluster, ns: str, name: str, reason: str, head: str) -> str | None:
    found = [e["message"] for e in cluster.events(ns, name) if e.get("reason") == reason and e.get("message", "").startswith(head)]
    return found[-1] if found else None


def test_the_reclaimed_pod_is_told_who_reclaims_and_what_happens_to_its_job(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("reclaim")
    where = SCENARIOS.selector("reclaim")
    name = release.scheduler_name
    node = SCENARIOS.node("reclaim")
    cluster.apply(borrower_job("borrower", scheduler_name=name, node_selector=where), namespace=ns)

    def borrower() -> str | None:
        running = [p["metadata"]["name"] for p in cluster.pods(ns) if p["metadata"]["name"].startswith("borrower-")
                   and p["spec"].get("nodeName") == node and p["status"].get("phase") == "Running" and is_active(p)]
        return running[0] if running else None

    victim = wait_for(borrower, 90, f"the borrower running (cellfit log {procs.cellfit.log})")
    cluster.apply(gpu_pod("owner", scheduler_name=name, node_selector=where, gpus=8, priority_class="cellfit-best-effort"),
                  namespace=ns)
    assert wait_for(lambda: running_on(cluster, ns, "owner"), 180,
                    f"owner running (cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log})") == node

    head = f"preempted by {ns}/owner on node {node}: "
    told = wait_for(lambda: cellfit_event(cluster, ns, victim, "Preempted", head), 30,
                    f"cellfit's Preempted Event on {victim} (events {cluster.events(ns, victim)})")
    assert told == (
        f"{head}HiveD reclaims the cells this pod ran on for {ns}/owner, a guaranteed pod of virtual cluster default, whose cells "
        "they are; this pod ran there opportunistically (cellfit.io/priority: opportunistic), which keeps no cells from its "
        "virtual cluster's guaranteed pods; its Job counts it as a failed pod against its backoffLimit 6, as its "
        "spec.podFailurePolicy does not ignore DisruptionTarget: its 1st failed pod, after which it tolerates 5 more"
    ), told
    preempting = wait_for(lambda: cellfit_event(cluster, ns, "owner", "Preempting", f"preempting {ns}/{victim} on node {node} ("), 30,
                          f"cellfit's Preempting Event on owner (events {cluster.events(ns, 'owner')})")
    assert "reclaiming cells of virtual cluster default for this guaranteed pod" in preempting, preempting
    job = cluster.kubectl_json("-n", ns, "get", "job", "borrower")
    assert "cellfit.io/preemptions" not in (job["metadata"].get("annotations") or {})  # FitGpp's count, not HiveD's
