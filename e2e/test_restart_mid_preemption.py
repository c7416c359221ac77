"""cellfit killed in the middle of a HiveD preemption keeps the preemptor's cells after its restart
(live hand session, issue restart22).

The chart's kube-scheduler and cellfit run here (chart_support); KWOK plays the pods. An
opportunistic Job's pod fills a node's 8 GPUs; its process exits 20 s after SIGTERM, and its Job
replaces a preempted pod (podFailurePolicy ignores DisruptionTarget). A guaranteed pod of the
same (default) VC and a higher PriorityClass arrives: kube-scheduler preempts the opportunistic
pod through cellfit and nominates the node, and cellfit keeps the cells for the guaranteed pod
while the victim leaves. cellfit is killed (SIGKILL). While it is down the victim exits,
kube-scheduler's next attempt for the guaranteed pod meets the closed port and clears its
nomination (schedule_one.go: an extender error ends with ``clearNominatedNode``), and the Job
makes its next pod. Then cellfit starts again.

Before the fix nothing tied the guaranteed pod to the cells once cellfit restarted: the booking
had lived in its memory, the nomination was gone, and the victim Job's next pod could take the
node and be preempted again (the live session: twice started, twice preempted, the guaranteed pod
waiting 1 min 51 s). Now the leader records the booking on the waiting pod
(``cellfit.io/reclaim-booking``) once the watch shows its victim leaving, and the restarted
engine keeps those cells from its first list: ready, it shows the node's GPUs held for the
guaranteed pod, and the guaranteed pod is the next one bound there."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from chart_support import (
    EXIT_AFTER, KWOK_TOLERATION, ChartScheduler, Cluster, Release, Scenarios, assert_no_double_booking, gpu_pod, is_active,
    running_on, scenario_scheduler, wait_for,
)

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("restart22-")
OPPORTUNISTIC = {"cellfit.io/priority": "opportunistic", "cellfit.io/job-class": "best-effort"}
RECORD = "cellfit.io/reclaim-booking"


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, ChartScheduler, Any]]:
    workdir = tmp_path_factory.mktemp(f"restart-mid-preemption-{SCENARIOS.run}")
    with scenario_scheduler(control_plane, workdir, SCENARIOS, nodes={"one": 1}, name="restart22") as (cluster, release, procs):
        yield cluster, release, procs, control_plane


def opportunistic_job(name: str, *, scheduler_name: str, node_selector: dict[str, str]) -> dict[str, Any]:
    """Whole-node opportunistic pods that checkpoint for 20 s on SIGTERM (grace 60 s) and resume:
    a preempted pod is replaced, not counted as failed."""
    pod = gpu_pod(name, scheduler_name=scheduler_name, node_selector=node_selector, gpus=8, priority_class="cellfit-best-effort",
                  labels=OPPORTUNISTIC)
    spec = pod["spec"]
    spec["restartPolicy"] = "Never"
    spec["terminationGracePeriodSeconds"] = 60
    spec["tolerations"] = [KWOK_TOLERATION]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
                     "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                     "template": {"metadata": {"labels": OPPORTUNISTIC, "annotations": {EXIT_AFTER: "20s"}}, "spec": spec}}}


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), {})


def test_the_guaranteed_pod_keeps_its_cells_across_a_restart_mid_preemption(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("restart22")
    where = SCENARIOS.selector("one")
    node = SCENARIOS.node("one")
    name = release.scheduler_name
    cluster.apply(opportunistic_job("opp", scheduler_name=name, node_selector=where), namespace=ns)

    def opp_pods() -> list[dict[str, Any]]:
        return [p for p in cluster.pods(ns) if p["metadata"]["name"].startswith("opp-")]

    first = wait_for(lambda: next((p["metadata"]["name"] for p in opp_pods() if running_on(cluster, ns, p["metadata"]["name"]) == node),
                                  None), 90, f"the opportunistic pod running (cellfit log {procs.cellfit.log})")
    with cluster.watch_pods(ns) as versions:
        cluster.apply(gpu_pod("owner", scheduler_name=name, node_selector=where, gpus=8, priority_class="cellfit-trial"), namespace=ns)

        def owner() -> dict[str, Any]:
            return cluster.kubectl_json("-n", ns, "get", "pod", "owner")

        wait_for(lambda: any(p["metadata"]["name"] == first and p["metadata"].get("deletionTimestamp") for p in opp_pods()), 60,
                 f"kube-scheduler preempting {first} for owner (scheduler log {procs.scheduler.log})")
        wait_for(lambda: owner()["status"].get("nominatedNodeName") == node, 30, "owner nominated to the node")
        # The leader's round (reclaim.periodSeconds, 5 s) records the booking while the victim leaves.
        wait_for(lambda: (owner()["metadata"].get("annotations") or {}).get(RECORD), 30,
                 f"the booking recorded on owner (cellfit log {procs.cellfit.log})")

        assert procs.cellfit.process is not None
        procs.cellfit.process.kill()  # no goodbye: the extender port simply refuses
        procs.cellfit.process.wait(10)
        procs.cellfit.process = None

        def nomination_cleared() -> bool:
            current = owner()
            message = scheduled_condition(current).get("message") or ""
            return (not current["status"].get("nominatedNodeName") and "/v1/extender/" in message
                    and not any(p["metadata"]["name"] == first for p in opp_pods()))

        wait_for(nomination_cleared, 120, f"{first} gone and kube-scheduler's attempt for owner refused, its nomination cleared "
                                          f"(scheduler log {procs.scheduler.log})")
        procs.cellfit.start()  # returns once /readyz answers: the first list is applied
        (cell,) = procs.cellfit.get("/v1/inspect/cells", node=node)["cells"]
        assert cell["gpus"]["guaranteed"] == 8 and cell["gpus"]["opportunistic"] == 0, cell["gpus"]  # owner's, from the record
        assert wait_for(lambda: running_on(cluster, ns, "owner"), 120,
                        f"owner running (cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log})") == node

    # Nobody but owner was bound to the node after the victim: the Job's next pod waited.
    takers = {v.pod["metadata"]["name"] for v in versions
              if v.pod["spec"].get("nodeName") == node and v.pod["metadata"]["name"] not in (first, "owner")}
    assert not takers, f"{sorted(takers)} bound to {node} while owner waited (cellfit log {procs.cellfit.log})"
    preempted = [e for p in opp_pods() for e in cluster.events(ns, p["metadata"]["name"]) if e["reason"] == "Preempted"]
    assert all(e["involvedObject"]["name"] == first for e in preempted), preempted
    assert [p["metadata"]["name"] for p in opp_pods() if is_active(p) and p["spec"].get("nodeName") == node] == []
    assert_no_double_booking(cluster.pods(ns))
