"""No opportunistic pod is preempted for a guaranteed pod while its virtual cluster's own cells
are being freed, on a live cluster with the chart's scheduler (scheduler/cells/freeing.py; seen
live, one try in three). The default VC owns two nodes: its guaranteed pod ``leaving`` fills one
and is deleted, and takes its time to exit (a grace period of 600 s, kwok's exit after 300 s,
e2e/cluster/README.md "Stages"); an opportunistic pod of a lower PriorityClass
fills the other. A guaranteed pod ``owner`` of the VC arrives: kube-scheduler's own filters find
both nodes full, and its preemption offers only the opportunistic pod's node (``leaving`` is of
the owner's priority). Before, cellfit's preempt verb named the opportunistic pod and
kube-scheduler deleted it while ``leaving``'s cells were a moment from free; now it names none,
the owner waits, and runs on ``leaving``'s node once that pod is gone (force-deleted here once
kube-scheduler has tried the owner). The preempt verb's refusal, which the owner's
PreemptionRefused Event and ``kubectl cellfit why`` read, says HiveD's wait for ``leaving``'s cells
(before: "a best-effort pod never preempts others (FitGpp)", cellfit's filter never being asked).
KWOK plays the pods."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from chart_support import EXIT_AFTER, ChartScheduler, Cluster, Release, Scenarios, gpu_pod, running_on, scenario_scheduler, wait_for

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("hivedfree-")
OPPORTUNISTIC = {"cellfit.io/priority": "opportunistic"}


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, ChartScheduler, Any]]:
    workdir = tmp_path_factory.mktemp(f"hived-reclaim-freeing-{SCENARIOS.run}")
    with scenario_scheduler(control_plane, workdir, SCENARIOS, nodes={"freeing": 2}, name="hived-freeing") as (cluster, release, procs):
        yield cluster, release, procs, control_plane


def failed_scheduling(cluster: Cluster, ns: str, name: str) -> list[str]:
    return [e["message"] for e in cluster.events(ns, name) if e.get("reason") == "FailedScheduling"]


def preemption_refused(cluster: Cluster, ns: str, name: str) -> list[str]:
    return [e["message"] for e in cluster.events(ns, name) if e.get("reason") == "PreemptionRefused"]


def test_no_opportunistic_pod_is_preempted_while_the_vcs_pod_terminates(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("freeing")
    where = SCENARIOS.selector("freeing")
    name = release.scheduler_name
    logs = f"cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log}"
    leaving = gpu_pod("leaving", scheduler_name=name, node_selector=where, gpus=8, priority_class="cellfit-best-effort", annotations={EXIT_AFTER: "300s"})
    leaving["spec"]["terminationGracePeriodSeconds"] = 600
    cluster.apply(leaving, namespace=ns)
    freed = wait_for(lambda: running_on(cluster, ns, "leaving"), 90, f"leaving running ({logs})")
    cluster.apply(
        gpu_pod("borrower", scheduler_name=name, node_selector=where, gpus=8, priority_class="cellfit-opportunistic", labels=OPPORTUNISTIC), namespace=ns
    )
    borrowed = wait_for(lambda: running_on(cluster, ns, "borrower"), 90, f"borrower running ({logs})")
    assert borrowed != freed
    gone = ("-n", ns, "delete", "pod", "leaving", "--grace-period=0", "--force", "--ignore-not-found")
    try:
        with cluster.watch_pods(ns) as versions:
            cluster.kubectl("-n", ns, "delete", "pod", "leaving", "--wait=false")
            wait_for(lambda: cluster.kubectl_json("-n", ns, "get", "pod", "leaving")["metadata"].get("deletionTimestamp"), 30, "leaving terminating")
            cluster.apply(gpu_pod("owner", scheduler_name=name, node_selector=where, gpus=8, priority_class="cellfit-best-effort"), namespace=ns)
            # kube-scheduler has tried the owner, its preemption included, when it tells it failed.
            wait_for(lambda: failed_scheduling(cluster, ns, "owner"), 90, f"owner's FailedScheduling ({logs})")
            owner = cluster.kubectl_json("-n", ns, "get", "pod", "owner")
            assert not owner["status"].get("nominatedNodeName"), owner["status"]
            refused = wait_for(lambda: preemption_refused(cluster, ns, "owner"), 30, f"owner's PreemptionRefused ({logs})")
            assert any(
                message.startswith("cellfit preempts no one for this pod: HiveD waits for cell ")
                and f"on node {freed}, which pods leaving free ({ns}/leaving): no opportunistic pod is preempted" in message
                for message in refused
            ), refused
            assert cluster.kubectl_json("-n", ns, "get", "pod", "leaving")["status"].get("phase") == "Running"  # still terminating
            cluster.kubectl(*gone)
            assert wait_for(lambda: running_on(cluster, ns, "owner"), 180, f"owner running ({logs})") == freed
        deleted = [v for v in versions if v.pod["metadata"]["name"] == "borrower" and v.pod["metadata"].get("deletionTimestamp")]
        assert not deleted, f"the borrower was preempted while leaving's cells were being freed ({logs})"
        assert running_on(cluster, ns, "borrower") == borrowed
    finally:
        cluster.kubectl(*gone, check=False)
