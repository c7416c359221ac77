"""FitGpp takes a HiveD gang whole, on a live control plane with the chart's scheduler (user24
F6, F14). A best-effort gang of two whole-node pods (cellfit.io/gang, one Job whose
podFailurePolicy ignores DisruptionTarget) fills both nodes of the scenario; a trial pod of 8
GPUs arrives. Before, FitGpp preempted one member: the other kept its node while the job hung,
and HiveD re-booked the victim's slot for its replacement on the node the trial pod preempted
for, which that booking and the trial's hold kept from each other for ever. Now the preempt verb
answers kube-scheduler the member on the chosen node, cellfit marks and deletes the other
itself, HiveD gives the gang's slots back, and the trial pod binds where it preempted; the
gang's replacement pods wait, all or nothing. KWOK plays the pods (they run, and go at once)."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from chart_support import (
    ChartScheduler, Cluster, Release, Scenarios, assert_no_double_booking, gang_job, gpu_pod, is_active, running_on,
    scenario_scheduler, wait_for,
)

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("fitgppgang-")
IGNORE_DISRUPTION = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, ChartScheduler, Any]]:
    workdir = tmp_path_factory.mktemp(f"fitgpp-gang-{SCENARIOS.run}")
    with scenario_scheduler(control_plane, workdir, SCENARIOS, nodes={"gang": 2}, name="fitgpp-gang") as (cluster, release, procs):
        yield cluster, release, procs, control_plane


def test_a_trial_pod_preempts_the_whole_gang_and_binds_where_it_preempted(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("gang")
    where = SCENARIOS.selector("gang")
    name = release.scheduler_name
    nodes = sorted(SCENARIOS.node("gang", i) for i in range(2))
    gang = gang_job("bert", scheduler_name=name, node_selector=where, gpus=8, size=2, priority_class="cellfit-best-effort")
    gang["spec"]["podFailurePolicy"] = IGNORE_DISRUPTION
    gang["spec"]["backoffLimit"] = 2
    cluster.apply(gang, namespace=ns)

    def members() -> dict[str, dict[str, Any]]:
        return {p["metadata"]["uid"]: p for p in cluster.pods(ns) if p["metadata"]["name"].startswith("bert-") and is_active(p)
                and p["status"].get("phase") == "Running"}

    running = wait_for(lambda: (found := members()) and len(found) == 2 and found or None, 90,
                       f"the gang's two pods running (cellfit log {procs.cellfit.log})")
    assert sorted(p["spec"]["nodeName"] for p in running.values()) == nodes
    cluster.apply(gpu_pod("te", scheduler_name=name, node_selector=where, gpus=8, priority_class="cellfit-trial",
                          labels={"cellfit.io/job-class": "trial"}), namespace=ns)
    node = wait_for(lambda: running_on(cluster, ns, "te"), 180,
                    f"the trial pod running (cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log})")
    assert node in nodes
    left = [p["metadata"]["name"] for uid, p in members().items() if uid in running]
    assert not left, f"gang members still running beside the trial pod: {left} (cellfit log {procs.cellfit.log})"
    preempting = [e["message"] for e in cluster.events(ns, "te") if e["reason"] == "Preempting"]
    assert preempting and preempting[0].startswith(f"preempting the gang {ns}/bert (2 pods, 16 GPUs) on node {node} and its pods on node "), preempting

    def preempted(pod_name: str) -> list[str] | None:
        # cellfit's own (kube-scheduler's says only "Preempted by pod <uid> on node ...", on the member it deletes)
        return [e["message"] for e in cluster.events(ns, pod_name) if e["reason"] == "Preempted" and "FitGpp score" in e["message"]] or None

    for pod_name in sorted(p["metadata"]["name"] for p in running.values()):
        said = wait_for(lambda: preempted(pod_name), 30, f"a Preempted Event on {pod_name}")  # noqa: B023 (called at once)
        assert f"with every pod of the gang {ns}/bert (2 pods, 16 GPUs), on nodes {nodes[0]}, {nodes[1]}" in said[0], said
    # The gang's replacement pods wait whole: none shares the trial pod's node, none runs alone.
    replacements = [p for p in cluster.pods(ns) if p["metadata"]["name"].startswith("bert-") and p["metadata"]["uid"] not in running
                    and is_active(p)]
    assert not [p for p in replacements if p["spec"].get("nodeName") == node], replacements
    assert_no_double_booking(cluster.pods(ns))
