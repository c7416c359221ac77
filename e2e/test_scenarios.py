"""What an ML engineer sees: annotated Jobs from deploy/examples, submitted with kubectl to the
chart's scheduler (its kube-scheduler and cellfit run here with the chart's configs and RBAC;
see chart_support), on fake 8-GPU nodes. Each scenario has nodes of its own, labelled
``cellfit.io/e2e-scenario=<scenario>``, and its pods select them, so scenarios never compete.

(a) FitGpp preemption: a node is full of two best-effort Jobs that differ only in their grace
    period; a trial Job arrives. Exactly FitGpp's victim (the shorter grace period, hence the
    lower score) is preempted, although kube-scheduler alone would have taken the other pod;
    it is deleted with its whole grace period, exits on SIGTERM 3 s into it (KWOK plays the
    kubelet: e2e/cluster/stages/pod-exit-on-delete.yaml) and is gone before the period ends;
    its Job is annotated cellfit.io/preemptions=1 and counts no failure; events Preempting
    and Preempted explain it; when the trial Job is done, the preempted Job resumes in a new
    pod.
(b) Gang: a 2-pod gang of 8-GPU pods waits while only one node is free (no pod of it takes
    the free node), and is placed all at once when the second node frees up.
(c) Restart: cellfit restarts while Jobs run and new pods queue; it recovers every allocation
    (same GPUs for the same pods, as /v1/inspect shows), and the queued pods get only free
    GPUs: no GPU index is ever handed to two pods.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any, Iterator

import pytest

from chart_support import (
    ChartScheduler,
    Cluster,
    Release,
    Scenarios,
    assert_no_double_booking,
    example_job,
    gpu_bookings,
    gpu_pod,
    is_active,
    scenario_scheduler,
    wait_for,
)

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("")
NODES = {"preempt": 1, "gang": 2, "restart": 2}  # scenario -> 8-GPU nodes of its own
VICTIM_EXIT_SECONDS = 3  # how long the preempted pod's process takes to exit on SIGTERM


selector = SCENARIOS.selector


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, ChartScheduler, Any]]:
    workdir = tmp_path_factory.mktemp(f"scenarios-{SCENARIOS.run}")
    with scenario_scheduler(control_plane, workdir, SCENARIOS, nodes=NODES, name="scenarios") as (cluster, release, procs):
        yield cluster, release, procs, control_plane


def job_pods(cluster: Cluster, ns: str, job: str, *, active_only: bool = True) -> list[dict[str, Any]]:
    pods = cluster.pods(ns, f"job-name={job}")
    return [p for p in pods if is_active(p)] if active_only else pods


def bound(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p["spec"].get("nodeName")]


def running_pod(cluster: Cluster, ns: str, job: str) -> dict[str, Any] | None:
    pods = [p for p in bound(job_pods(cluster, ns, job)) if p["status"].get("phase") == "Running"]
    return pods[0] if len(pods) == 1 else None


def event_reasons(cluster: Cluster, ns: str, pod: str) -> dict[str, list[str]]:
    reasons: dict[str, list[str]] = {}
    for event in cluster.events(ns, pod):
        reasons.setdefault(event["reason"], []).append(event.get("message", ""))
    return reasons


def timestamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


# ------------------------------------------------------------------------------ (a) FitGpp


def test_trial_job_preempts_exactly_fitgpps_victim_which_resumes_later(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("preempt")
    where = selector("preempt")
    name = release.scheduler_name
    # Two BE Jobs of equal size fill the node. "cheap" has the shorter grace period, so the lower
    # FitGpp score (size + s * GP): it is the victim. It starts first, so kube-scheduler's own
    # choice (the pod that started last among equals) would have been "costly".
    # Its process needs 3 s of its 10 s grace period to checkpoint and exit on SIGTERM.
    cheap = example_job("be-job", name="be-cheap", scheduler_name=name, node_selector=where, gpus=4, grace_seconds=10,
                        exit_after=f"{VICTIM_EXIT_SECONDS}s")
    costly = example_job("be-job", name="be-costly", scheduler_name=name, node_selector=where, gpus=4, grace_seconds=120)
    cluster.apply(cheap, namespace=ns)
    cheap_pod = wait_for(lambda: running_pod(cluster, ns, "be-cheap"), 60, "be-cheap running")
    time.sleep(1.1)  # distinct start times (kube-scheduler ranks equal-priority victims by start time)
    cluster.apply(costly, namespace=ns)
    costly_pod = wait_for(lambda: running_pod(cluster, ns, "be-costly"), 60, "be-costly running")
    assert cheap_pod["spec"]["priority"] == costly_pod["spec"]["priority"] == 500

    te = example_job("te-job", name="te-probe", scheduler_name=name, node_selector=where, gpus=4, run_for="25s")
    victim_name = cheap_pod["metadata"]["name"]
    grace = cheap["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    # kube-scheduler deletes the victim with its grace period. KWOK plays the kubelet: the
    # process exits on SIGTERM after VICTIM_EXIT_SECONDS (phase Failed, exit code 143), the Job
    # controller counts the pod (podFailurePolicy: DisruptionTarget -> Ignore) and drops its
    # finalizer, and the pod is deleted. Watched, not polled: the Failed state lasts only until
    # the finalizer goes.
    with cluster.watch_pods(ns, victim_name) as victim_versions:
        cluster.apply(te, namespace=ns)
        deleting = wait_for(lambda: next((v.pod for v in victim_versions if v.pod["metadata"].get("deletionTimestamp")), None),
                            60, f"{victim_name} deleted by preemption (scheduler log {procs.scheduler.log})")
        gone = wait_for(lambda: next((v for v in victim_versions if v.event == "DELETED"), None), 60, f"{victim_name} gone")
    assert any(c["type"] == "DisruptionTarget" and c["status"] == "True" and c.get("reason") == "PreemptionByScheduler"
               for c in deleting["status"]["conditions"]), deleting["status"]["conditions"]
    # Deleted with its whole grace period (nothing cut it to 0), and gone before it ran out.
    # deletionTimestamp is the end of the grace period, in whole seconds.
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == grace, deleting["metadata"]
    grace_ends = timestamp(deleting["metadata"]["deletionTimestamp"])
    deleted_at = grace_ends - grace
    assert gone.received <= grace_ends, f"{victim_name} gone {gone.received - deleted_at:.1f}s after its deletion ({grace}s grace)"
    # It exited by itself on SIGTERM, VICTIM_EXIT_SECONDS in (not killed when the grace period ended: 137).
    exits = [v.pod for v in victim_versions if v.pod["status"].get("phase") == "Failed"]
    assert exits, [(v.event, v.pod["status"].get("phase")) for v in victim_versions]
    (terminated,) = [c["state"]["terminated"] for c in exits[0]["status"]["containerStatuses"]]
    assert (terminated["exitCode"], terminated["reason"]) == (143, "Error"), terminated
    # (The deletion time is known to the second, so the exit may read up to 1 s early.)
    exited_after = timestamp(terminated["finishedAt"]) - deleted_at
    assert VICTIM_EXIT_SECONDS - 1.5 <= exited_after <= grace, exited_after
    te_pod = wait_for(lambda: running_pod(cluster, ns, "te-probe"), 90,
                      f"te-probe running (cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log})")
    assert te_pod["spec"]["priority"] == 1000

    # Exactly FitGpp's victim went; the other BE pod runs on, untouched.
    victim_uid = cheap_pod["metadata"]["uid"]
    remaining_uids = {p["metadata"]["uid"] for p in job_pods(cluster, ns, "be-costly")}
    assert remaining_uids == {costly_pod["metadata"]["uid"]}
    assert victim_uid not in {p["metadata"]["uid"] for p in job_pods(cluster, ns, "be-cheap", active_only=False)}

    # Events explain it, on both sides.
    te_events = wait_for(lambda: event_reasons(cluster, ns, te_pod["metadata"]["name"]).get("Preempting"), 30, "Preempting event")
    assert any(cheap_pod["metadata"]["name"] in message for message in te_events), te_events
    victim_events = wait_for(lambda: event_reasons(cluster, ns, cheap_pod["metadata"]["name"]).get("Preempted"), 30,
                             "Preempted event")
    assert victim_events
    assert not event_reasons(cluster, ns, costly_pod["metadata"]["name"]).get("Preempted")

    # The Job counts the preemption, and not as a failure (podFailurePolicy Ignore on DisruptionTarget).
    def preemptions() -> str | None:
        job = cluster.kubectl_json("-n", ns, "get", "job", "be-cheap")
        return job["metadata"].get("annotations", {}).get("cellfit.io/preemptions")

    assert wait_for(preemptions, 30, "cellfit.io/preemptions on be-cheap") == "1"
    assert cluster.kubectl_json("-n", ns, "get", "job", "be-costly")["metadata"].get("annotations", {}).get("cellfit.io/preemptions") is None
    assert not cluster.kubectl_json("-n", ns, "get", "job", "be-cheap")["status"].get("failed")
    assert procs.cellfit.metric("cellfit_preemptions_total") >= 1 or procs.cellfit.metric("cellfit_preempt_victims_total") >= 1

    # It resumes: a new pod, which waits while the trial Job holds the GPUs, then runs.
    replacement = wait_for(lambda: [p for p in job_pods(cluster, ns, "be-cheap") if p["metadata"]["uid"] != victim_uid],
                           60, "a replacement pod of be-cheap")[0]
    assert replacement["metadata"]["uid"] != victim_uid
    resumed = wait_for(lambda: running_pod(cluster, ns, "be-cheap"), 120, "be-cheap resumed after te-probe finished")
    assert resumed["metadata"]["uid"] != victim_uid
    te_pods = job_pods(cluster, ns, "te-probe", active_only=False)
    assert [p["status"]["phase"] for p in te_pods] == ["Succeeded"], "be-cheap resumed while te-probe still ran"
    wait_for(lambda: cluster.kubectl_json("-n", ns, "get", "job", "te-probe")["status"].get("succeeded") == 1, 30,
             "te-probe complete")
    still = running_pod(cluster, ns, "be-costly")
    assert still is not None and still["metadata"]["uid"] == costly_pod["metadata"]["uid"]
    assert_no_double_booking(cluster.pods(ns))


# ------------------------------------------------------------------------------ (b) gang


def test_gang_is_placed_all_at_once_or_not_at_all(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("gang")
    where = selector("gang")
    name = release.scheduler_name
    # 4 GPUs taken on one node: one node is free, but the gang needs both.
    filler = gpu_pod("filler", scheduler_name=name, node_selector=where, gpus=4, priority_class="cellfit-best-effort")
    cluster.apply(filler, namespace=ns)
    wait_for(lambda: cluster.kubectl_json("-n", ns, "get", "pod", "filler")["spec"].get("nodeName"), 60, "filler bound")
    gang = example_job("gang-job", name="gang-bert", scheduler_name=name, node_selector=where, gpus=8, parallelism=2)
    assert gang["spec"]["template"]["metadata"]["annotations"]["cellfit.io/gang-size"] == "2"
    cluster.apply(gang, namespace=ns)

    def gang_waits_with_reason() -> list[str]:
        pods = job_pods(cluster, ns, "gang-bert")
        per_pod = [event_reasons(cluster, ns, p["metadata"]["name"]).get("FailedScheduling", []) for p in pods]
        return [m for messages in per_pod for m in messages] if len(pods) == 2 and all(per_pod) else []

    messages = wait_for(gang_waits_with_reason, 60, "FailedScheduling for the gang's pods")
    assert any("gang" in m for m in messages), messages
    # Not at all: the free node could hold one pod of the gang, yet neither is placed.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert not bound(job_pods(cluster, ns, "gang-bert")), "a pod of the gang was placed alone"
        time.sleep(1)

    cluster.kubectl("-n", ns, "delete", "pod", "filler", "--wait=true", timeout=60)
    pods = wait_for(lambda: (lambda ps: ps if len(bound(ps)) == 2 else None)(job_pods(cluster, ns, "gang-bert")), 90,
                    f"both gang pods bound (cellfit log {procs.cellfit.log})")
    nodes = {p["spec"]["nodeName"] for p in pods}
    assert nodes == {SCENARIOS.node("gang", 0), SCENARIOS.node("gang", 1)}, nodes
    infos = [json.loads(p["metadata"]["annotations"]["cellfit.io/bind-info"]) for p in pods]
    for info in infos:
        assert info["gang"]["size"] == 2 and len(info["gang"]["placements"]) == 2, info
        assert {pl["node"] for pl in info["gang"]["placements"]} == nodes
    # All at once: both bindings within a few seconds of each other.
    scheduled = [timestamp(next(c["lastTransitionTime"] for c in p["status"]["conditions"] if c["type"] == "PodScheduled"))
                 for p in pods]
    assert abs(scheduled[0] - scheduled[1]) <= 5, scheduled
    assert_no_double_booking(cluster.pods(ns))


# ------------------------------------------------------------------------------ (c) restart


def allocations(procs: ChartScheduler, nodes: list[str]) -> set[tuple[str, str, tuple[int, ...]]]:
    """(pod, node, GPU indices) of every booking cellfit holds on ``nodes``, read from the GPU
    cells of /v1/inspect/cells."""
    gpus: dict[tuple[str, str], list[int]] = {}

    def walk(cell: dict[str, Any], node: str) -> None:
        if "gpuIndex" in cell:
            for pod in cell.get("pods", []):
                gpus.setdefault((pod, node), []).append(cell["gpuIndex"])
        for child in cell.get("children", []):
            walk(child, node)

    for node in nodes:
        for top in procs.cellfit.get("/v1/inspect/cells", node=node)["cells"]:
            walk(top, node)
    return {(pod, node, tuple(sorted(indices))) for (pod, node), indices in gpus.items()}


def test_cellfit_restart_recovers_every_allocation_without_double_booking(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("restart")
    where = selector("restart")
    name = release.scheduler_name
    nodes = [SCENARIOS.node("restart", i) for i in range(2)]
    # 3 x 2 GPUs + 4 GPUs running: 10 of 16 GPUs.
    running = example_job("be-job", name="steady", scheduler_name=name, node_selector=where, gpus=2, parallelism=3)
    cluster.apply(running, gpu_pod("solo", scheduler_name=name, node_selector=where, gpus=4,
                                   priority_class="cellfit-best-effort"), namespace=ns)
    wait_for(lambda: len(bound(cluster.pods(ns))) == 4, 90, "steady (3 pods) and solo bound")
    before_pods = {p["metadata"]["name"]: (p["spec"]["nodeName"], p["metadata"]["annotations"]["cellfit.io/gpu-indices"])
                   for p in cluster.pods(ns)}
    before = allocations(procs, nodes)
    assert len(before) == 4, before
    assert {(pod.split("/")[-1], node, ",".join(map(str, gpus))) for pod, node, gpus in before} == {
        (pod, node, gpus) for pod, (node, gpus) in before_pods.items()}, (before, before_pods)

    # cellfit goes away mid-run; more work arrives meanwhile: 4 x 2 GPUs for the 6 free.
    procs.cellfit.stop()
    queued = example_job("be-job", name="queued", scheduler_name=name, node_selector=where, gpus=2, parallelism=4)
    cluster.apply(queued, namespace=ns)
    wait_for(lambda: len(job_pods(cluster, ns, "queued")) == 4, 30, "queued's 4 pods created")
    time.sleep(5)
    assert not bound(job_pods(cluster, ns, "queued")), "a pod was bound while cellfit was down"

    procs.cellfit.start()  # ready = watch synced and allocations rebuilt from bind-info
    after = allocations(procs, nodes)
    assert before <= after, f"lost after restart: {before - after}"

    # Exactly the 6 free GPUs go to 3 queued pods; the 4th waits.
    wait_for(lambda: len(bound(job_pods(cluster, ns, "queued"))) == 3, 90, f"3 queued pods bound (cellfit log {procs.cellfit.log})")
    time.sleep(5)
    assert len(bound(job_pods(cluster, ns, "queued"))) == 3
    pods = cluster.pods(ns)
    assert_no_double_booking(pods)
    for pod in pods:
        if pod["metadata"]["name"] in before_pods:
            assert (pod["spec"]["nodeName"], pod["metadata"]["annotations"]["cellfit.io/gpu-indices"]) == before_pods[pod["metadata"]["name"]]
    used = {node: sorted(i for _, gpus in bookings for i in gpus) for node, bookings in gpu_bookings(pods).items()}
    assert used == {node: list(range(8)) for node in nodes}, used
